"""Every write path against an `enforce` suite (S11.1, S8.3): nothing unvalidated becomes visible, and `quality report`
shows the result. The Producer without transactional.id (and so `lakelog produce` and confluent-style programs) judges
each batch before it appends it: a failing batch is refused through every message's delivery report, with nothing
written. Spark writes: tests/spark/test_spark_write_gate.py; view refreshes: tests/spark/test_view_gate.py."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakelog.cli import main
from lakelog.client import Producer
from lakelog.errors import KafkaError, PolicyViolation
from lakelog.log import create_topic
from lakelog.quality import DLQ_HEADER, dlq_topic, read_results, write_suite
from lakelog.sql import read_committed
from lakelog.store import initialise_root
from tests.docs.test_readme_examples import EXAMPLES
from tests.helpers import table_fingerprint
from tests.quality.conftest import ORDERS_SUITE

pytestmark = pytest.mark.usefixtures("gx")

GOOD = [{"customer": "c1", "amount_cents": 200}, {"customer": "c2", "amount_cents": 300}]
BAD = [{"customer": "c3", "amount_cents": 400}, {"customer": "c4", "amount_cents": -5}]


def gated(root, topic, mode: str = "enforce", partitions: int = 1) -> str:
    name = topic(name=f"orders-{mode}", partitions=partitions)
    write_suite(root, name, json.dumps(ORDERS_SUITE), mode=mode)
    return name


def visible(root, name: str) -> list[dict]:
    """The read_committed values of the topic, decoded."""
    return sorted((json.loads(value) for value in read_committed(root, name).column("value").to_pylist()), key=str)


def report(root, name: str, capsys) -> list[dict]:
    """`lakelog quality report --json`: the topic's results (latest first), each with its outcome."""
    capsys.readouterr()
    assert main(["quality", "report", "--topic", name, "--json", "--root", root]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def produce_batch(root, name: str, orders: list[dict], conf: dict | None = None) -> list[tuple]:
    """Produce `orders` as one batch of a producer without transactional.id; each message's (error, topic, offset)."""
    reports: list[tuple] = []
    producer = Producer({"lakelog.root": root, "linger.ms": 60_000, **(conf or {})})
    for index, item in enumerate(orders):
        producer.produce(
            name,
            json.dumps(item).encode(),
            key=f"k{item['customer']}{index}".encode(),
            on_delivery=lambda error, message: reports.append((error, message.topic(), message.offset(), message.headers())),
        )
    assert producer.flush(30) == 0
    return reports


# -- every write path, one bad unit each -----------------------------------------------------------------


def write_transactional(root, name, capsys, tmp_path, monkeypatch) -> None:
    producer = Producer({"lakelog.root": root, "transactional.id": "tx"})
    producer.init_transactions()
    producer.begin_transaction()
    for index, item in enumerate(BAD):
        producer.produce(name, json.dumps(item).encode(), key=f"k{index}".encode())
    with pytest.raises(PolicyViolation):
        producer.commit_transaction()


def write_idempotent(root, name, capsys, tmp_path, monkeypatch) -> None:
    reports = produce_batch(root, name, BAD)
    assert [error.code() for error, *_ in reports] == [KafkaError.POLICY_VIOLATION] * len(BAD)


def write_cli_produce(root, name, capsys, tmp_path, monkeypatch) -> None:
    lines = "".join(json.dumps({"key": f"k{index}", "value": item}) + "\n" for index, item in enumerate(BAD))
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    capsys.readouterr()
    assert main(["produce", "--topic", name, "--root", root]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    line = err.strip()  # one line, with the code
    assert line.startswith("lakelog: POLICY_VIOLATION: delivered 0 message(s), 2 failed: ")
    assert "value.amount_cents" in line


def write_cli_load(root, name, capsys, tmp_path, monkeypatch) -> None:
    source = tmp_path / "day1.jsonl"
    source.write_text("".join(json.dumps(item) + "\n" for item in BAD))
    capsys.readouterr()
    assert main(["load", "--topic", name, str(source), "--key-column", "customer", "--no-progress", "--root", root]) != 0
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err  # no WARNING lines before the error
    line = err.strip()
    assert line.startswith("lakelog: POLICY_VIOLATION: ")


WRITERS = {
    "transactional Producer": write_transactional,
    "idempotent Producer": write_idempotent,
    "lakelog produce": write_cli_produce,
    "lakelog load": write_cli_load,
}


@pytest.mark.parametrize("path", list(WRITERS))
def test_S11_1_every_write_path_refuses_a_failing_unit_and_quality_report_shows_it(
    root, topic, capsys, tmp_path, monkeypatch, path
):
    name = gated(root, topic)
    WRITERS[path](root, name, capsys, tmp_path, monkeypatch)
    assert visible(root, name) == []
    [result] = report(root, name, capsys)
    assert (result["success"], result["mode"], result["row_count"]) == (False, "enforce", len(BAD))
    assert result["outcome"] in ("aborted", "refused")


# -- the Producer without transactional.id ------------------------------------------------------------------


@pytest.mark.roots("local", "s3")
def test_S11_1_S8_3_an_idempotent_batch_that_fails_enforce_is_refused_with_nothing_written(root, topic, capsys):
    """The batch's file goes out while the topic's suite is read; its commit waits for the read, so a refused
    batch commits nothing and its file is deleted: the topic's tables byte for byte as they were."""
    name = gated(root, topic)
    assert len(produce_batch(root, name, GOOD)) == 2
    before = table_fingerprint(f"{root}/topics/{name}")

    reports = produce_batch(root, name, BAD)
    for error, where, offset, _ in reports:
        assert (error.code(), error.name(), where, offset) == (KafkaError.POLICY_VIOLATION, "POLICY_VIOLATION", name, None)
        assert "expect_column_values_to_be_between on value.amount_cents" in error.str()
        assert "nothing was written" in error.str()
    assert table_fingerprint(f"{root}/topics/{name}") == before  # S8.3: the table as it was, byte for byte
    assert visible(root, name) == GOOD

    refused, passed = report(root, name, capsys)
    assert (refused["success"], refused["outcome"], refused["offset_ranges"]) == (False, "refused", [])
    assert refused["validation_id"] in reports[0][0].str()
    assert (passed["success"], passed["outcome"]) == (True, "committed")
    assert passed["offset_ranges"] == [{"partition": 0, "first_offset": 0, "last_offset": 1}]


@pytest.mark.parametrize("conf", [{}, {"enable.idempotence": False}], ids=["idempotent", "plain"])
def test_S11_1_warn_lets_a_failing_batch_through_and_records_it(root, topic, capsys, conf):
    name = gated(root, topic, "warn")
    reports = produce_batch(root, name, BAD, conf)
    assert [error for error, *_ in reports] == [None, None]
    assert visible(root, name) == sorted(BAD, key=str)
    [result] = report(root, name, capsys)
    assert (result["success"], result["mode"], result["row_count"]) == (False, "warn", 2)
    assert result["offset_ranges"] == [{"partition": 0, "first_offset": 0, "last_offset": 1}]


def test_S11_3_dead_letter_sends_a_failing_batch_to_the_dlq_with_its_validation_id(root, topic, capsys):
    name = gated(root, topic, "dead-letter")
    before = table_fingerprint(f"{root}/topics/{name}")
    reports = produce_batch(root, name, BAD)
    assert {(error, where) for error, where, *_ in reports} == {(None, dlq_topic(name))}
    assert table_fingerprint(f"{root}/topics/{name}") == before
    assert visible(root, dlq_topic(name)) == sorted(BAD, key=str)
    [result] = report(root, name, capsys)
    assert (result["success"], result["mode"]) == (False, "dead-letter")
    headers = read_committed(root, dlq_topic(name)).column("headers").to_pylist()
    assert {{item["key"]: item["value"] for item in row}[DLQ_HEADER].decode() for row in headers} == {result["validation_id"]}


def test_S11_1_a_suite_attached_after_a_producers_first_batch_gates_its_next_batch(root, topic):
    """The suite is read before every batch: a producer never decides on a suite read before the batch it judges."""
    name = topic(name="orders")
    producer = Producer({"lakelog.root": root, "linger.ms": 60_000})
    reports: list = []
    producer.produce(name, json.dumps(BAD[1]).encode(), key=b"early", on_delivery=lambda e, m: reports.append(e))
    producer.flush(30)
    assert reports == [None]  # ungated yet: it went through
    write_suite(root, name, json.dumps(ORDERS_SUITE), mode="enforce")
    producer.produce(name, json.dumps(BAD[1]).encode(), key=b"late", on_delivery=lambda e, m: reports.append(e))
    producer.flush(30)
    assert reports[1] is not None and reports[1].code() == KafkaError.POLICY_VIOLATION
    assert [row["success"] for row in read_results(root, topic=name).to_pylist()] == [False]
    assert len(visible(root, name)) == 1


# -- a confluent-style program: the README's porting example, run as written ----------------------------------


def test_S11_1_the_readme_porting_example_gets_policy_violation_in_its_delivery_report(tmp_path, capsys):
    """The confluent-kafka program of the README, unchanged, on a topic with an enforce suite: its delivery
    callback sees POLICY_VIOLATION, and no refused word is ever visible."""
    lake = str(tmp_path / "lake")
    initialise_root(lake)
    create_topic(lake, "words", 1)
    suite = {
        "name": "words",
        "expectations": [
            {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value", "value_set": ["ALPHA", "BETA"]}}
        ],
    }
    write_suite(lake, "words", json.dumps(suite), mode="enforce")
    script = tmp_path / "porting.py"
    script.write_text(EXAMPLES["porting"].code)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("LAKELOG_")}
    done = subprocess.run(
        [sys.executable, script.name], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0
    assert "delivery failed: " in done.stderr and "POLICY_VIOLATION" in done.stderr, done.stderr[-2000:]
    words = {value.decode() for value in read_committed(lake, "words").column("value").to_pylist()}
    assert words <= {"ALPHA", "BETA"} and "GAMMA" not in words
    assert any(row["success"] is False for row in read_results(lake, topic="words").to_pylist())


def test_S8_3_a_suite_that_cannot_be_read_fails_the_batch_through_its_delivery_report(root, topic):
    """The gate's read of the suite is storage like the append: a failure is retried as the append is, then it is
    the batch's delivery error (produce() raises nothing), and nothing is written."""
    name = topic(name="orders-unreadable-suite")
    # The suite's object is a folder: every read of it fails, as an unreachable store does.
    (Path(root) / "quality" / f"{name}.json").mkdir(parents=True)
    producer = Producer({"lakelog.root": root, "linger.ms": 0, "retries": 1, "retry.backoff.ms": 1})
    errors = []
    producer.produce(name, value=json.dumps(GOOD[0]).encode(), on_delivery=lambda error, message: errors.append(error))
    assert producer.flush(30) == 0
    assert [error.code() for error in errors] == [KafkaError.KAFKA_STORAGE_ERROR]
    assert visible(root, name) == []
