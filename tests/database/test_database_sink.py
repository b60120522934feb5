"""Exactly once out of the log into PostgreSQL and DuckDB: rows and positions in one database transaction, the
sink fenced by an epoch in the same database, SIGKILLed at every step and restarted (S5.1, S5.3, S10.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from lakelog import Producer
from lakelog.errors import InvalidRequest, ProducerFenced
from lakelog.jobs.database.columns import parse_columns
from lakelog.jobs.database.duckdb_target import DuckdbTarget
from lakelog.jobs.database.sink import run_sink
from lakelog.log import create_topic

CHILD = Path(__file__).with_name("sink_child.py")
COLUMNS = "id:bigint,name:text,amount:numeric"
KINDS = ["postgres", "duckdb"]


@pytest.fixture(params=KINDS)
def database(request, tmp_path):
    """(kind, dsn or file, a function that reads the table's rows sorted, a target factory)."""
    if request.param == "postgres":
        import psycopg

        from lakelog.jobs.database.postgres import PostgresTarget

        dsn = request.getfixturevalue("postgres_dsn")

        def rows(table: str = "orders") -> list[tuple]:
            with psycopg.connect(dsn) as connection:
                found = connection.execute(f"SELECT id, name, amount::text FROM {table} ORDER BY id, lakelog_offset").fetchall()
            return [(i, n, str(float(a)) if a is not None else None) for i, n, a in found]

        return "postgres", dsn, rows, lambda: PostgresTarget(dsn, "orders")
    path = str(tmp_path / "sink.duckdb")

    def rows(table: str = "orders") -> list[tuple]:
        with duckdb.connect(path) as connection:
            found = connection.execute(f"SELECT id, name, amount::VARCHAR FROM {table} ORDER BY id, lakelog_offset").fetchall()
        return [(i, n, str(float(a)) if a is not None else None) for i, n, a in found]

    return "duckdb", path, rows, lambda: DuckdbTarget(path, "orders")


def produce_history(root: str) -> list[tuple]:
    """Committed, aborted and committed transactions over 2 partitions; the rows read_committed sees, sorted by id."""
    create_topic(root, "orders", 2)
    producer = Producer({"lakelog.root": root, "transactional.id": "writer"})
    producer.init_transactions()
    expected = []
    for batch, commit in ((0, True), (1, False), (2, True), (3, True)):
        producer.begin_transaction()
        for i in range(batch * 10, batch * 10 + 10):
            value = {"id": i, "name": f"n{i}", "amount": i / 4}
            producer.produce("orders", key=str(i), value=json.dumps(value), partition=i % 2)
            if commit:
                expected.append((i, f"n{i}", str(float(i / 4))))
        producer.flush()
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()
    return sorted(expected)


def sink(root, factory, **options):
    defaults = {"name": "orders-sink", "columns": parse_columns(COLUMNS), "offset_columns": True, "batch_records": 7}
    return run_sink(root, "orders", factory(), **{**defaults, **options})


def test_S5_3_S10_1_append_loads_every_committed_row_once_and_a_rerun_loads_nothing(root, database):
    kind, _, rows, factory = database
    expected = produce_history(root)
    first = sink(root, factory)
    assert rows() == expected and first.rows == 30 and first.epoch == 1
    again = sink(root, factory)
    assert again.rows == 0 and again.epoch == 2 and rows() == expected
    # An open transaction holds the sink at its partition's LSO (S5.1); once committed, its rows come.
    producer = Producer({"lakelog.root": root, "transactional.id": "late"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce("orders", value=json.dumps({"id": 100, "name": "late", "amount": 1}), partition=0)
    producer.flush()
    producer2 = Producer({"lakelog.root": root})
    producer2.produce("orders", value=json.dumps({"id": 101, "name": "after", "amount": 2}), partition=0)
    producer2.flush()
    assert sink(root, factory).rows == 0 and rows() == expected
    producer.commit_transaction()
    assert sink(root, factory).rows == 2
    assert rows()[-2:] == [(100, "late", "1.0"), (101, "after", "2.0")]


def test_upsert_keeps_the_last_value_per_key_and_a_tombstone_deletes(root, database):
    kind, _, rows, factory = database
    create_topic(root, "orders", 1)
    producer = Producer({"lakelog.root": root})
    for value in ({"id": 1, "name": "a", "amount": 1}, {"id": 2, "name": "b", "amount": 2}, {"id": 1, "name": "c", "amount": 3}):
        producer.produce("orders", key=str(value["id"]), value=json.dumps(value))
    producer.produce("orders", key="2", value=None)
    producer.flush()
    sink(root, factory, mode="upsert", key=["id"], offset_columns=False, batch_records=2)
    if kind == "postgres":
        import psycopg

        with psycopg.connect(database[1]) as connection:
            found = connection.execute("SELECT id, name FROM orders ORDER BY id").fetchall()
    else:
        with duckdb.connect(database[1]) as connection:
            found = connection.execute("SELECT id, name FROM orders ORDER BY id").fetchall()
    assert found == [(1, "c")]


def test_a_value_that_is_not_json_stops_the_sink_in_one_line_and_loads_nothing_of_its_batch(root, database):
    _, _, rows, factory = database
    create_topic(root, "orders", 1)
    producer = Producer({"lakelog.root": root})
    producer.produce("orders", value=json.dumps({"id": 1, "name": "a", "amount": 1}))
    producer.produce("orders", value=b"not json")
    producer.flush()
    with pytest.raises(InvalidRequest, match=r"orders-0@1: the value is not a JSON object"):
        sink(root, factory)
    assert rows() == []


@pytest.mark.parametrize("mode", ["append", "upsert"])
@pytest.mark.parametrize("step", ["read", "copied", "before-commit", "committed"])
def test_S10_1_a_sink_killed_at_every_step_and_restarted_loads_each_row_once(root, database, step, mode):
    kind, dsn, rows, _ = database
    expected = produce_history(root)
    spec = {"kind": kind, "dsn": dsn, "table": "orders", "root": root, "topic": "orders", "name": "orders-sink",
            "columns": COLUMNS, "mode": mode, "key": ["id"] if mode == "upsert" else [], "batch": 7,
            "kill_at": step, "kill_on": 2}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, str(CHILD), json.dumps(spec)], capture_output=True, text=True, env=env, timeout=120)
    assert killed.returncode == -9, killed.stderr
    loaded_before = len(rows())
    assert loaded_before == {"read": 7, "copied": 7, "before-commit": 7, "committed": 14}[step]
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps({**spec, "kill_at": None})], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert rows() == expected  # every committed row once, none of the aborted transaction


def test_S4_1_a_zombie_sink_is_fenced_by_the_next_instance_and_commits_nothing(root, database):
    kind, _, rows, factory = database
    produce_history(root)
    zombie_target = factory()
    started = {}

    def step(name: str) -> None:
        # After the zombie's first batch is read, a new instance of the sink claims the next epoch and loads all.
        if name == "read" and not started:
            started["new"] = sink(root, factory)

    with pytest.raises(ProducerFenced, match="epoch 1 is fenced by epoch 2"):
        run_sink(root, "orders", zombie_target, name="orders-sink", columns=parse_columns(COLUMNS), offset_columns=True,
                 batch_records=7, step=step)  # fmt: skip
    assert started["new"].rows == 30 and len(rows()) == 30
