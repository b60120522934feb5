"""LakelogSinkOperator run for real by `airflow dags test` on a migrated SQLite DB, into a DuckDB file (S5.1, S5.3,
S8.3, S10.1): every committed record once across runs, nothing of an aborted or open transaction, and a value
that is not JSON fails the task at once in one line, loading nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from lakelog import Producer
from lakelog.log import create_topic

pytestmark = [pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
DAGS = Path(__file__).parent / "dags"


def airflow(args: list[str], home: Path, root: str, database: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS / "lakelog_test_sink.py"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_LAKELOG_DEFAULT": json.dumps({"conn_type": "lakelog", "extra": {"root": root}}),
        "LAKELOG_TEST_DATABASE": str(database),
    }
    env.pop("LAKELOG_ROOT", None)
    airflow_cli = Path(sys.executable).with_name("airflow")
    return subprocess.run([str(airflow_cli), *args], env=env, capture_output=True, text=True, timeout=300, cwd=home)


def transactions(root: str, batches: list[tuple[range, bool]], producer: Producer) -> list[int]:
    """Each batch of ids in its own transaction over 2 partitions, committed or aborted; the committed ids."""
    committed = []
    for ids, commit in batches:
        producer.begin_transaction()
        for i in ids:
            producer.produce("orders", key=str(i), value=json.dumps({"id": i, "name": f"n{i}"}), partition=i % 2)
        producer.flush()
        if commit:
            producer.commit_transaction()
            committed += list(ids)
        else:
            producer.abort_transaction()
    return committed


def loaded(database: Path, table: str = "orders") -> list[int]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return [row[0] for row in connection.execute(f"SELECT id FROM {table} ORDER BY id").fetchall()]


def test_S5_3_S10_1_the_sink_operator_loads_each_committed_record_once_across_runs(tmp_path, root):
    create_topic(root, "orders", 2)
    create_topic(root, "raw", 1)
    producer = Producer({"lakelog.root": root, "transactional.id": "orders-writer"})
    producer.init_transactions()
    expected = transactions(root, [(range(10), True), (range(10, 15), False), (range(15, 20), True)], producer)
    home, database = tmp_path / "airflow-home", tmp_path / "sink.duckdb"
    home.mkdir()
    migrated = airflow(["db", "migrate"], home, root, database)
    assert migrated.returncode == 0, migrated.stderr[-2000:]

    first = airflow(["dags", "test", "lakelog_test_sink"], home, root, database)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    assert loaded(database) == expected

    # A transaction left open holds the sink at the LSO (S5.1); what commits before the next run loads then, once.
    expected += transactions(root, [(range(20, 24), True)], producer)
    producer.begin_transaction()
    producer.produce("orders", value=json.dumps({"id": 99, "name": "open"}), partition=0)
    producer.flush()
    second = airflow(["dags", "test", "lakelog_test_sink"], home, root, database)
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    assert loaded(database) == expected
    producer.abort_transaction()

    # S8.3: a value that is not JSON fails the task as AirflowFailException (no retry would mend it) in one line, and loads nothing of its batch.
    raw = Producer({"lakelog.root": root})
    raw.produce("raw", value=b"not json", partition=0)
    raw.flush()
    bad = airflow(["dags", "test", "lakelog_test_sink_bad"], home, root, database)
    output = bad.stdout + bad.stderr
    assert bad.returncode != 0, output[-3000:]
    assert "sink raw into duckdb table raw: INVALID_REQUEST: raw-0@0: the value is not a JSON object" in output, output[-3000:]
    assert "AirflowFailException" in output, output[-3000:]
    assert loaded(database, "raw") == []
