"""The transactional Producer's quality gate (issue 13 item 2, modes of item 4): commit_transaction() judges every
row the transaction wrote to gated topics before it decides (S11.1), its result row commits or aborts with the data
(S11.2), and dead-letter rows land in `<topic>.dlq` exactly once (S11.3), also across a crash and a run again."""

from __future__ import annotations

import json

import pytest

from lakelog.cli import main
from lakelog.client import Producer
from lakelog.client.producer import TransactionState
from lakelog.client.producer.gate import FAULT_AFTER_VALIDATION
from lakelog.coordinator.transaction.coordinator import FAULT_AFTER_DECISION, TransactionCoordinator
from lakelog.errors import KafkaError, PolicyViolation
from lakelog.log.partition import wall_clock_ms
from lakelog.quality import DLQ_HEADER, dlq_topic, read_results, write_suite
from lakelog.quality.results import failed_expectations, results_log_exists
from lakelog.sql import read_committed
from tests.helpers import Crash, crash_at
from tests.quality.conftest import ORDERS_SUITE

pytestmark = pytest.mark.usefixtures("gx")

ROWS = 10_000
BAD_INDEX = 6_543


def order(index: int, amount: int | None = None) -> bytes:
    return json.dumps({"customer": f"c{index % 97}", "amount_cents": index * 10 if amount is None else amount}).encode()


def gated(root, topic, mode: str, partitions: int = 3) -> str:
    name = topic(name=f"orders-{mode}", partitions=partitions)
    write_suite(root, name, json.dumps(ORDERS_SUITE), mode=mode)
    return name


def producer(root, transactional_id: str = "loader", reports: list | None = None) -> Producer:
    conf = {"lakelog.root": root, "transactional.id": transactional_id, "batch.num.messages": 2_000}
    if reports is not None:
        conf["on_delivery"] = lambda error, message: reports.append((error, message))
    p = Producer(conf)
    p.init_transactions()
    return p


def load(p: Producer, name: str, count: int, *, bad: int | None = None, first_key: int = 0) -> None:
    """One transaction of `count` orders (the one at `bad` has a negative amount), not yet committed."""
    p.begin_transaction()
    for index in range(count):
        p.produce(name, order(index, -5 if index == bad else None), key=f"k{first_key + index}".encode())


def outcomes(root, name: str, capsys) -> dict[str, str]:
    """`lakelog quality report --json`: each result's validation id -> its transaction's outcome."""
    assert main(["quality", "report", "--topic", name, "--json", "--root", root]) == 0
    return {row["validation_id"]: row["outcome"] for row in map(json.loads, capsys.readouterr().out.splitlines())}


def rows_of(root, name: str) -> list[tuple]:
    table = read_committed(root, name)
    return sorted(
        zip(
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )


def test_S11_1_a_bad_row_in_a_10k_row_load_aborts_it_and_the_fixed_load_commits(root, topic, capsys):
    name = gated(root, topic, "enforce")
    p = producer(root)
    load(p, name, 100, first_key=ROWS)  # an earlier good load: read_committed is not empty
    p.commit_transaction()
    before = rows_of(root, name)
    assert len(before) == 100

    load(p, name, ROWS, bad=BAD_INDEX)
    with pytest.raises(PolicyViolation) as caught:
        p.commit_transaction()
    violation = caught.value
    assert "expect_column_values_to_be_between on value.amount_cents" in str(violation)
    assert violation.args[0].txn_requires_abort() and violation.result.success is False
    assert violation.gx_result["success"] is False and violation.validation_id
    # Aborted by the gate: READY again; the usual abort after an abortable error is a no-op.
    assert p._transaction_state is TransactionState.READY
    p.abort_transaction()
    assert rows_of(root, name) == before  # S11.1: read_committed unchanged

    [result] = read_results(root, topic=name).to_pylist()[:1]
    assert (result["validation_id"], result["success"], result["mode"]) == (violation.validation_id, False, "enforce")
    assert (result["transactional_id"], result["row_count"]) == ("loader", ROWS)
    [failure] = failed_expectations(result)
    assert (failure["type"], failure["column"], failure["unexpected_values"]) == (
        "expect_column_values_to_be_between",
        "value.amount_cents",
        [-5],
    )
    assert sum(item["last_offset"] - item["first_offset"] + 1 for item in result["offset_ranges"]) == ROWS

    # The same load, fixed: commits; its "passed" row is in the transaction, visible only once it commits (S11.2).
    seen_before_commit = []
    p._gate.fault = lambda point, details: seen_before_commit.append(
        (point, [row["validation_id"] for row in read_results(root).to_pylist()], details["validation_ids"])
    )
    load(p, name, ROWS)
    p.commit_transaction()
    [(point, visible, [passed_id])] = seen_before_commit
    assert point == FAULT_AFTER_VALIDATION and passed_id not in visible
    assert len(rows_of(root, name)) == 100 + ROWS
    latest = read_results(root, topic=name).to_pylist()[0]
    assert (latest["validation_id"], latest["success"], latest["row_count"]) == (passed_id, True, ROWS)
    reported = outcomes(root, name, capsys)
    assert (reported[violation.validation_id], reported[passed_id]) == ("aborted", "committed")


def test_S11_1_warn_commits_and_records_the_failure(root, topic):
    name = gated(root, topic, "warn")
    p = producer(root)
    load(p, name, 1_000, bad=7)
    p.commit_transaction()
    assert len(rows_of(root, name)) == 1_000  # published, bad row included
    [result] = read_results(root, topic=name).to_pylist()
    assert (result["success"], result["mode"]) == (False, "warn")
    assert failed_expectations(result)[0]["unexpected_values"] == [-5]


def test_S11_3_dead_letter_routes_a_failing_unit_to_the_dlq_exactly_once_across_a_crash(root, topic, capsys):
    """Dead-letter: the failing unit's rows go to `<topic>.dlq` with the validation id header, in the transaction
    that records the result; a process that dies between validating and committing leaves nothing (the next init
    aborts it, S4.2), and the run again puts the rows there exactly once. The good topic stays untouched."""
    name = gated(root, topic, "dead-letter")
    dlq = dlq_topic(name)
    crashed = producer(root)
    crashed._gate.fault = crash_at(FAULT_AFTER_VALIDATION)
    load(crashed, name, 500, bad=3)
    with pytest.raises(Crash):
        crashed.commit_transaction()
    # The next instance's init aborts the crashed attempt: no dead letters, no result row (S11.2, S11.3).
    reports: list = []
    again = producer(root, reports=reports)
    assert rows_of(root, dlq) == [] and rows_of(root, name) == []
    assert read_results(root, topic=name).num_rows == 0

    load(again, name, 500, bad=3)
    again.commit_transaction()
    again.flush()
    dead = read_committed(root, dlq)
    assert dead.num_rows == 500 and rows_of(root, name) == []
    [result] = read_results(root, topic=name).to_pylist()
    assert (result["success"], result["mode"]) == (False, "dead-letter")
    assert {{h["key"]: h["value"] for h in headers}[DLQ_HEADER].decode() for headers in dead.column("headers").to_pylist()} == {
        result["validation_id"]
    }
    assert sorted(dead.column("key").to_pylist()) == sorted(f"k{i}".encode() for i in range(500))
    # Delivery reports name the topic the rows went to.
    assert len(reports) == 500 and {message.topic() for error, message in reports if error is None} == {dlq}
    assert outcomes(root, name, capsys) == {result["validation_id"]: "committed"}  # read in <topic>.dlq

    # A passing unit of a dead-letter topic goes to the topic itself.
    load(again, name, 200, first_key=1_000)
    again.commit_transaction()
    assert len(rows_of(root, name)) == 200 and read_committed(root, dlq).num_rows == 500


def test_S11_2_a_crash_between_validating_and_committing_leaves_nothing_and_no_passed_row(root, topic):
    """Enforce, passing: killed after the verdict and the in-transaction result row, before the decision. The
    sweep (S4.7) or the next init (S4.2) aborts it; no result says "passed" for data that never committed."""
    name = gated(root, topic, "enforce")
    crashed = producer(root)
    crashed._gate.fault = crash_at(FAULT_AFTER_VALIDATION)
    load(crashed, name, 300)
    with pytest.raises(Crash):
        crashed.commit_transaction()
    assert read_results(root).num_rows == 0
    later = TransactionCoordinator(root, clock=lambda: wall_clock_ms() + 120_000)
    assert later.sweep().aborted_timed_out == ["loader"]
    assert rows_of(root, name) == [] and read_results(root).num_rows == 0
    # The run again commits once, with its one passed row.
    again = producer(root)
    load(again, name, 300)
    again.commit_transaction()
    assert len(rows_of(root, name)) == 300
    assert [row["success"] for row in read_results(root, topic=name).to_pylist()] == [True]


def test_S11_2_a_crash_after_the_decision_commits_data_and_result_together(root, topic):
    """Killed after the commit decision, before the markers: the next init rolls it forward (S4.5): the data and
    its passed row are both visible, once."""
    name = gated(root, topic, "dead-letter")
    crashed = producer(root)
    crashed._coordinator = TransactionCoordinator(root, fault=crash_at(FAULT_AFTER_DECISION))
    load(crashed, name, 300, bad=0)
    with pytest.raises(Crash):
        crashed.commit_transaction()
    producer(root)
    assert read_committed(root, dlq_topic(name)).num_rows == 300 and rows_of(root, name) == []
    [result] = read_results(root, topic=name).to_pylist()
    assert (result["success"], result["mode"]) == (False, "dead-letter")


def test_S8_3_ungated_topics_beside_a_gated_one_are_not_validated_and_abort_with_it(root, topic):
    """An ungated topic written in the same transaction as a gated one is not validated (no result row of its own);
    an enforce failure of the gated topic aborts both (S4.8), read_committed of each unchanged (S8.3); a
    transaction of ungated topics only creates no results log."""
    plain = topic(name="plain", partitions=1)
    p = producer(root)
    p.begin_transaction()
    p.produce(plain, b"not json", key=b"a")
    p.commit_transaction()
    assert not results_log_exists(root)
    name = gated(root, topic, "enforce", partitions=1)
    load(p, name, 50)
    p.produce(plain, b"not json either", key=b"b")
    p.commit_transaction()
    assert [row["topic"] for row in read_results(root).to_pylist()] == [name]
    before = (rows_of(root, plain), rows_of(root, name))
    load(p, name, 50, bad=1, first_key=100)
    p.produce(plain, b"also not json", key=b"c")
    with pytest.raises(PolicyViolation):
        p.commit_transaction()
    assert (rows_of(root, plain), rows_of(root, name)) == before


def test_S11_3_abort_transaction_drops_the_held_dead_letter_rows(root, topic):
    """abort_transaction() reports the held rows of a dead-letter topic as purged and forgets them: nothing is
    written, and the next transaction judges and publishes only its own rows."""
    name = gated(root, topic, "dead-letter", partitions=1)
    reports: list = []
    p = producer(root, reports=reports)
    load(p, name, 20, bad=0)
    p.flush()
    assert reports == []  # held back: no delivery yet
    p.abort_transaction()
    assert len(reports) == 20 and {error.code() for error, _ in reports} == {KafkaError._PURGE_QUEUE}
    assert rows_of(root, name) == [] and rows_of(root, dlq_topic(name)) == []
    load(p, name, 10, first_key=100)
    p.commit_transaction()
    assert len(rows_of(root, name)) == 10 and rows_of(root, dlq_topic(name)) == []
    assert [row["row_count"] for row in read_results(root, topic=name).to_pylist()] == [10]


def test_S8_3_a_suite_that_does_not_fit_the_rows_makes_the_transaction_abort_only(root, topic):
    """A dead-letter suite naming `offset` (held rows have none yet): commit_transaction() raises InvalidRequest
    naming the column, the transaction is abort-only, nothing is published and no result is recorded."""
    from lakelog.errors import InvalidRequest

    name = topic(name="offsets", partitions=1)
    suite = {
        "name": "offsets",
        "meta": {},
        "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "offset"}}],
    }
    write_suite(root, name, json.dumps(suite), mode="dead-letter")
    p = producer(root)
    load(p, name, 5)
    with pytest.raises(InvalidRequest, match="'offset'"):
        p.commit_transaction()
    assert p._transaction_state is TransactionState.ABORTABLE_ERROR
    p.abort_transaction()
    assert rows_of(root, name) == [] and rows_of(root, dlq_topic(name)) == [] and not results_log_exists(root)
