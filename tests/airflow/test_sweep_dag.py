"""The Airflow sweep DAG, run for real with `airflow dags test` on a migrated SQLite DB (S4.7, S8.2).

The DAG is LakelogSweepOperator on the `lakelog_default` connection; an S3 root's settings
reach it through the environment (the emulator's AWS_* variables), so the extra names only the root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakelog import AdminClient, NewTopic, Producer
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.log import open_partition
from lakelog.log.partition import wall_clock_ms

pytestmark = [pytest.mark.slow, pytest.mark.roots("local", "s3")]
REPO = Path(__file__).resolve().parents[2]


def airflow(args: list[str], home: Path, root: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "airflow" / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_LAKELOG_DEFAULT": json.dumps({"conn_type": "lakelog", "extra": {"root": root}}),
    }
    env.pop("LAKELOG_ROOT", None)
    airflow_cli = Path(sys.executable).with_name("airflow")
    return subprocess.run([str(airflow_cli), *args], env=env, capture_output=True, text=True, timeout=300, cwd=home)


def test_S4_7_sweep_dag_aborts_a_dead_producers_transaction(tmp_path, root):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("events", num_partitions=2)])
    # The dead producer began its transaction 2 s ago by its clock: past its 1 s timeout for the sweep's wall clock
    # at once, no sleep (S4.7; the sweep aborts once now > start + transaction.timeout.ms).
    dead = Producer(
        {"lakelog.root": root, "transactional.id": "nightly", "transaction.timeout.ms": 1000},
        clock=lambda: wall_clock_ms() - 2000,
    )
    dead.init_transactions()
    dead.begin_transaction()
    dead.produce("events", value="half", partition=0)
    dead.flush()
    assert open_partition(root, "events", 0).last_stable_offset() == 0

    home = tmp_path / "airflow-home"
    home.mkdir()
    migrated = airflow(["db", "migrate"], home, root)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    run = airflow(["dags", "test", "lakelog_sweep"], home, root)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert "'aborted_timed_out': ['nightly']" in output, output[-3000:]

    assert TransactionCoordinator(root).describe("nightly").state.value == "CompleteAbort"
    log = open_partition(root, "events", 0)
    assert log.last_stable_offset() == log.high_watermark() == 2
