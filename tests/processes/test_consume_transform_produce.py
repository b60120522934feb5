"""The consume-transform-produce job as users run it: the command line with N workers, and one worker
as a Python function (S7.4). The chaos run is in test_consume_transform_produce_chaos.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import table_fingerprint

from lakelog import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from lakelog.admin import AdminClient, NewTopic
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import UnknownTopicOrPartition
from lakelog.log import create_topic
from pipelines.consume_transform_produce import SOURCE_HEADER, Job, run_worker
from pipelines.topic_positions import end_offsets

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RECORDS = 3000


@pytest.fixture
def lake(tmp_path) -> str:
    root = tmp_path / "lake"
    root.mkdir()
    create_topic(str(root), "in", 4, None)
    create_topic(str(root), "out", 2, None)
    producer = Producer({"lakelog.root": str(root), "linger.ms": 600_000})  # one batch per partition, at flush
    for index in range(RECORDS):
        producer.produce("in", f"r{index}", key=f"k{index}", partition=index % 4)
    producer.flush()
    return str(root)


def output(lake: str) -> list:
    with Consumer({"lakelog.root": lake, "enable.partition.eof": True}) as reader:
        reader.assign([TopicPartition("out", p, OFFSET_BEGINNING) for p in range(2)])
        messages, at_end = [], set()
        while len(at_end) < 2:
            for message in reader.consume(10_000, 5.0):
                if message.error() is None:
                    messages.append(message)
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
        return messages


def check_exactly_once(lake: str, group: str) -> None:
    messages = output(lake)
    sources = Counter(dict(m.headers())[SOURCE_HEADER] for m in messages)
    assert sources == Counter({f"in:{i % 4}:{i // 4}".encode(): 1 for i in range(RECORDS)})
    for message in messages:
        _, partition, offset = dict(message.headers())[SOURCE_HEADER].decode().split(":")
        index = int(offset) * 4 + int(partition)
        assert (message.key(), message.value(), message.partition()) == (
            f"k{index}".encode(),
            f"R{index}".encode(),
            int(partition) % 2,
        )
    committed = GroupCoordinator(lake).fetch_offsets(group, [("in", p) for p in range(4)])
    assert {tp[1]: record.offset for tp, record in committed.items()} == end_offsets(lake, "in")


def test_S7_4_command_line_runs_n_workers_until_the_group_caught_up(lake):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.consume_transform_produce",
            "--root",
            lake,
            "--input",
            "in",
            "--output",
            "out",
            "--group",
            "upper",
            "--workers",
            "2",
            "--batch-records",
            "500",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["workers"] == 2 and report["restarts"] == 0
    check_exactly_once(lake, "upper")
    assert GroupCoordinator(lake).describe("upper").members == {}  # the workers left on SIGTERM


def test_S7_4_one_worker_as_a_function_stops_when_asked(lake):
    job = Job(lake, "in", "out", "fn", batch_records=1000, heartbeat_interval_ms=100)
    groups = GroupCoordinator(lake)

    def caught_up() -> bool:
        records = groups.fetch_offsets("fn", [("in", p) for p in range(4)])
        return {tp[1]: record and record.offset for tp, record in records.items()} == end_offsets(lake, "in")

    report = run_worker(job, 0, stop=caught_up)
    assert (report.records, report.aborts, report.fencings) == (RECORDS, 0, 0)
    check_exactly_once(lake, "fn")


def test_a_job_with_a_missing_topic_is_refused_and_writes_nothing(lake):
    before = table_fingerprint(lake)
    with pytest.raises(UnknownTopicOrPartition):
        run_worker(Job(lake, "in", "nowhere", "g"), 0, stop=lambda: True)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.consume_transform_produce",
            "--root",
            lake,
            "--input",
            "in",
            "--output",
            "in",
            "--group",
            "g",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "must not read what it writes" in result.stderr
    assert table_fingerprint(lake) == before


def test_a_new_group_over_an_empty_and_a_fully_deleted_partition_stops_and_creates_its_output(tmp_path):
    """A new group starts each partition at its log start offset (auto.offset.reset=earliest); a partition with
    nothing to read there (empty, or every record deleted) is caught up without a committed offset, so the job stops;
    a missing output topic is created with the input's partition count, and the supervisor says both."""
    root = str(tmp_path / "lake")
    admin = AdminClient({"lakelog.root": root})
    admin.create_topics([NewTopic("sparse", num_partitions=3)])["sparse"].result()
    producer = Producer({"lakelog.root": root})
    for index in range(5):
        producer.produce("sparse", f"kept{index}", partition=0)
    for index in range(3):
        producer.produce("sparse", f"deleted{index}", partition=2)
    producer.flush()
    admin.delete_records([TopicPartition("sparse", 2, -1)])[TopicPartition("sparse", 2, -1)].result()
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.consume_transform_produce", "--root", root, "--input", "sparse"]
        + ["--output", "sparse-upper", "--group", "fresh", "--workers", "1"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "created the output topic sparse-upper with 3 partitions" in result.stderr, result.stderr
    assert "group fresh has committed all of sparse; stopping" in result.stderr, result.stderr
    with Consumer({"lakelog.root": root, "enable.partition.eof": True}) as reader:
        reader.assign([TopicPartition("sparse-upper", p, OFFSET_BEGINNING) for p in range(3)])
        values, at_end = [], set()
        while len(at_end) < 3:
            for message in reader.consume(100, 5.0):
                if message.error() is None:
                    values.append(message.value())
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
    assert sorted(values) == [f"KEPT{index}".encode() for index in range(5)]
