"""`lakelog topics delete-records` and the log cleaner of `lakelog coordinator sweep`, run for real (S9.1, S8.2, S8.3)."""

from __future__ import annotations

import json

from helpers import fingerprint_but_sweeps, table_fingerprint

from lakelog import Producer
from lakelog.log import create_topic, open_partition


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def produce(lake, topic, batches, partition=0, timestamp=0):
    """`batches` batches of 3 records, each its own file (not idempotent: a 1970 timestamp expires a producer id)."""
    producer = Producer({"lakelog.root": lake, "linger.ms": 600_000, "enable.idempotence": False})
    for _ in range(batches):
        for n in range(3):
            producer.produce(topic, f"v{n}", partition=partition, timestamp=timestamp)
        producer.flush()


def test_S9_1_topics_delete_records_moves_the_log_start(lakelog, lake):
    create_topic(lake, "pay", 2)
    for partition in (0, 1):
        produce(lake, "pay", 2, partition)
    lines = ok(lakelog("topics", "delete-records", "--topic", "pay", "--offset", "4", "--partition", "0", "--root", lake))
    assert [json.loads(line) for line in lines.splitlines()] == [{"topic": "pay", "partition": 0, "low_watermark": 4}]
    assert open_partition(lake, "pay", 0).log_start_offset() == 4
    assert open_partition(lake, "pay", 1).log_start_offset() == 0
    lines = ok(lakelog("topics", "delete-records", "--topic", "pay", "--offset", "-1", "--root", lake))
    assert [json.loads(line)["low_watermark"] for line in lines.splitlines()] == [6, 6]


def test_S8_3_topics_delete_records_beyond_the_high_watermark_exits_2_unchanged(lakelog, lake):
    create_topic(lake, "pay", 1)
    produce(lake, "pay", 1)
    before = table_fingerprint(lake)
    refused = lakelog("topics", "delete-records", "--topic", "pay", "--offset", "4", "--root", lake)
    assert refused.returncode == 2 and "OFFSET_OUT_OF_RANGE" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert table_fingerprint(lake) == before


def test_S9_1_S8_2_coordinator_sweep_applies_retention_once(lakelog, lake):
    create_topic(lake, "old", 1, {"retention.ms": 3_600_000})
    create_topic(lake, "kept", 1, {"retention.ms": -1})
    for topic in ("old", "kept"):
        produce(lake, topic, 2, timestamp=1000)  # 1970: far past an hour
    report = json.loads(ok(lakelog("coordinator", "sweep", "--root", lake)))
    [cleaned] = report["log_cleaner"]
    assert (cleaned["topic"], cleaned["partition"], cleaned["error"]) == ("old", 0, None)
    assert cleaned["retention"]["files_removed"] == 2 and cleaned["retention"]["log_start_offset"] == 6
    assert open_partition(lake, "old", 0).log_start_offset() == 6
    assert open_partition(lake, "kept", 0).log_start_offset() == 0
    # Idempotent: the next sweep has nothing to do and writes nothing (removed files wait out their grace).
    before = fingerprint_but_sweeps(lake)
    assert json.loads(ok(lakelog("coordinator", "sweep", "--root", lake)))["log_cleaner"] == []
    assert fingerprint_but_sweeps(lake) == before
