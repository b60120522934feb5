"""Quality gates on loads (issue 13 item 2): `lakelog load`, load_unit (LakelogLoadOperator's loader) and the batch
writer they share judge a unit's rows whole before its commit (S11.1-S11.3, S10.2, S8.3).

A 10k-row unit with one bad row: enforce raises PolicyViolation naming the expectation, nothing is published and
the result row keeps the bad value; the same unit fixed commits. warn commits and records the failure. dead-letter
puts the unit in `<topic>.dlq` exactly once, also when the loader is SIGKILLed between validating and committing
and run again.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

import pyarrow as pa
import pytest

from lakelog.cli import main
from lakelog.errors import PolicyViolation
from lakelog.jobs.batch_writer import TransactionalBatchWriter
from lakelog.jobs.unit_load import load_unit
from lakelog.log import READ_UNCOMMITTED, open_partition
from lakelog.quality import read_results, write_suite
from lakelog.quality.dead_letter import DLQ_HEADER, dlq_topic
from lakelog.quality.results import failed_expectations, outcome
from lakelog.store import Location
from tests.helpers import topic_rows
from tests.quality.conftest import ORDERS_SUITE

pytestmark = [pytest.mark.roots("local", "s3"), pytest.mark.usefixtures("gx")]

ROWS = 10_000
BAD_ROW = 4_321
PARTITIONS = 3


def write_orders(root: str, name: str, *, bad: bool) -> str:
    """A Parquet file of ROWS orders next to the root (one with amount_cents -5 if `bad`): its URI."""
    folder = Location.of(root.rstrip("/") + "-landing")
    folder.io.make_dirs(folder.uri)
    amounts = [i * 10 for i in range(ROWS)]
    if bad:
        amounts[BAD_ROW] = -5
    rows = pa.table(
        {"id": [f"o{i}" for i in range(ROWS)], "customer": [f"c{i % 97}" for i in range(ROWS)], "amount_cents": amounts}
    )
    target = folder / name
    folder.io.write_parquet(rows, target.uri)
    return target.uri


def gate(root: str, topic: str, mode: str) -> None:
    write_suite(root, topic, json.dumps(ORDERS_SUITE), mode=mode)


def cli(*args: str) -> int:
    return main(list(args))


def test_S11_1_S8_3_a_bad_row_refuses_the_unit_load_and_the_fixed_unit_commits(root, topic):
    orders = topic(name="orders", partitions=PARTITIONS)
    gate(root, orders, "enforce")
    source = write_orders(root, "day.parquet", bad=True)

    with pytest.raises(PolicyViolation, match="expect_column_values_to_be_between on value.amount_cents") as raised:
        load_unit(root, orders, source, "orders.2026-11-23", key_column="id")
    assert raised.value.error.txn_requires_abort()
    assert "\n" not in str(raised.value)
    assert topic_rows(root, orders) == []  # read_committed unchanged (S11.1)
    assert not any(open_partition(root, orders, p).open_transactions() for p in range(PARTITIONS))  # aborted
    [row] = read_results(root, topic=orders).to_pylist()
    assert row["validation_id"] == raised.value.validation_id
    assert (row["success"], row["mode"], row["load_unit"], row["row_count"]) == (False, "enforce", "orders.2026-11-23", ROWS)
    assert row["transactional_id"] == "lakelog.load.orders.2026-11-23"
    [failure] = failed_expectations(row)
    assert (failure["column"], failure["unexpected_values"]) == ("value.amount_cents", [-5])
    assert sum(item["last_offset"] - item["first_offset"] + 1 for item in row["offset_ranges"]) == ROWS
    assert outcome(root, row) == "aborted"

    # The unit was not committed: its retry, with the source fixed, validates again and commits (S10.2).
    fixed = write_orders(root, "day.parquet", bad=False)
    loaded = load_unit(root, orders, fixed, "orders.2026-11-23", key_column="id")
    assert loaded.loaded and loaded.rows == ROWS
    assert len(topic_rows(root, orders)) == ROWS
    passed = read_results(root, topic=orders).to_pylist()[0]
    assert passed["success"] and passed["validation_id"] == loaded.validations[orders]
    assert outcome(root, passed) == "committed"
    # A repeat of the committed unit is skipped and validates nothing.
    assert not load_unit(root, orders, fixed, "orders.2026-11-23", key_column="id").loaded
    assert read_results(root, topic=orders).num_rows == 2


def test_S11_2_warn_commits_the_unit_and_records_the_failure_with_it(root, topic):
    orders = topic(name="orders", partitions=PARTITIONS)
    gate(root, orders, "warn")
    loaded = load_unit(root, orders, write_orders(root, "day.parquet", bad=True), "u", key_column="id")
    assert loaded.loaded and len(topic_rows(root, orders)) == ROWS
    [row] = read_results(root, topic=orders).to_pylist()
    assert (row["success"], row["mode"], row["validation_id"]) == (False, "warn", loaded.validations[orders])
    assert failed_expectations(row)[0]["unexpected_values"] == [-5]
    assert outcome(root, row) == "committed"


def test_S11_1_lakelog_load_refuses_a_bad_file_with_one_line_and_loads_it_fixed(root, topic, capsys):
    orders = topic(name="orders", partitions=1)
    gate(root, orders, "enforce")
    assert (
        cli(
            "load",
            "--topic",
            orders,
            write_orders(root, "day.parquet", bad=True),
            "--root",
            root,
            "--key-column",
            "id",
            "--no-progress",
        )
        == 2
    )
    # Log lines (WARNING) go first; the error is one line, naming Kafka's error code and the expectation.
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("lakelog: POLICY_VIOLATION: suite orders failed") and "value.amount_cents" in last
    assert topic_rows(root, orders) == []
    assert read_results(root, topic=orders).column("success").to_pylist() == [False]

    assert (
        cli(
            "load",
            "--topic",
            orders,
            write_orders(root, "day.parquet", bad=False),
            "--root",
            root,
            "--key-column",
            "id",
            "--no-progress",
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert (printed["total_rows"], printed["appended_by_this_run"]) == (ROWS, ROWS)
    assert len(topic_rows(root, orders)) == ROWS
    assert read_results(root, topic=orders).column("success").to_pylist() == [True, False]


def test_S11_3_S10_2_lakelog_load_dead_letters_a_bad_file_once(root, topic, capsys):
    orders = topic(name="orders", partitions=PARTITIONS)
    gate(root, orders, "dead-letter")
    source = write_orders(root, "day.parquet", bad=True)
    args = ("load", "--topic", orders, source, "--root", root, "--key-column", "id", "--partition", "1", "--no-progress")
    assert cli(*args) == 0
    assert topic_rows(root, orders) == []  # the good topic stays clean
    dead = topic_rows(root, dlq_topic(orders))
    [row] = read_results(root, topic=orders).to_pylist()
    assert len(dead) == ROWS and not row["success"] and row["mode"] == "dead-letter"
    assert all(item["headers"] == [{"key": DLQ_HEADER, "value": row["validation_id"].encode()}] for item in dead)
    assert [item["partition"] for item in row["offset_ranges"]] == [1]  # the DLQ's partition: the one loaded
    assert outcome(root, row) == "committed"  # read in the DLQ, where the rows went
    # Run again: the load is committed, nothing more is appended or validated (S10.2).
    assert cli(*args) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["appended_by_this_run"] == 0
    assert len(topic_rows(root, dlq_topic(orders))) == ROWS
    assert read_results(root, topic=orders).num_rows == 1


def _load_and_die_at(root: str, topic: str, source: str, point: str) -> None:
    """`lakelog load` that SIGKILLs itself after its unit was judged: with the DLQ rows and the result row appended
    in the transaction but before the commit is decided ("judged"), or right after the decision ("decided")."""
    from lakelog.coordinator.transaction import coordinator as transaction_coordinator

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "judged":
        TransactionalBatchWriter._record_batch = die
    else:
        original = transaction_coordinator.TransactionCoordinator._hit

        def hit(self, name, **details):
            if name == transaction_coordinator.FAULT_AFTER_DECISION:
                die()
            original(self, name, **details)

        transaction_coordinator.TransactionCoordinator._hit = hit
    main(["load", "--topic", topic, source, "--root", root, "--no-progress"])


@pytest.mark.slow
@pytest.mark.roots("local")
@pytest.mark.parametrize("point", ["judged", "decided"])
def test_S11_3_S4_5_dead_letter_is_exactly_once_when_the_loader_is_killed_between_validating_and_committing(root, topic, point):
    orders = topic(name="orders", partitions=1)
    gate(root, orders, "dead-letter")
    source = write_orders(root, "day.parquet", bad=True)
    worker = multiprocessing.get_context("spawn").Process(target=_load_and_die_at, args=(root, orders, source, point))
    worker.start()
    worker.join(300)
    assert worker.exitcode == -signal.SIGKILL
    dlq = dlq_topic(orders)
    assert len(topic_rows(root, dlq, READ_UNCOMMITTED)) == ROWS  # staged in the transaction
    if point == "judged":
        # Undecided: nothing is visible, not the rows and not a result saying where they went (S11.2).
        assert topic_rows(root, dlq) == [] and read_results(root, topic=orders).num_rows == 0
    assert cli("load", "--topic", orders, source, "--root", root, "--no-progress") == 0
    assert topic_rows(root, orders) == []
    dead = topic_rows(root, dlq)
    assert len(dead) == ROWS and len({item["value"] for item in dead}) == ROWS
    [row] = read_results(root, topic=orders).to_pylist()  # one committed result: the transaction that committed
    assert {item["headers"][0]["value"] for item in dead} == {row["validation_id"].encode()}
    # "judged": the dead attempt was aborted and the run again validated and committed once; "decided": the run
    # again found the commit decided, finished it (S4.5) and appended nothing.
    expected_uncommitted = 2 * ROWS if point == "judged" else ROWS
    assert len(topic_rows(root, dlq, READ_UNCOMMITTED)) == expected_uncommitted


@pytest.mark.roots("local")
def test_S11_1_the_load_operator_fails_a_bad_unit_without_retry_and_loads_it_fixed(root, topic, monkeypatch):
    """LakelogLoadOperator's execute path (no scheduler): a refused unit fails the task at once (a retry would judge
    the same rows), with one line naming the expectation; the fixed unit loads."""
    from airflow.sdk.exceptions import AirflowFailException

    from lakelog.airflow.operators.load import LakelogLoadOperator

    monkeypatch.setenv("AIRFLOW_CONN_LAKELOG_DEFAULT", json.dumps({"conn_type": "lakelog", "extra": {"root": root}}))
    orders = topic(name="orders", partitions=PARTITIONS)
    gate(root, orders, "enforce")
    source = write_orders(root, "day.parquet", bad=True)
    operator = LakelogLoadOperator(task_id="load", topic=orders, source=source, key_column="id", unit="orders.day-1")
    with pytest.raises(AirflowFailException, match="POLICY_VIOLATION: suite orders failed.*value.amount_cents") as raised:
        operator.execute({})
    assert "\n" not in str(raised.value)
    assert topic_rows(root, orders) == []
    write_orders(root, "day.parquet", bad=False)
    assert operator.execute({})["rows"] == ROWS
    assert [row["success"] for row in read_results(root, topic=orders).to_pylist()] == [True, False]
