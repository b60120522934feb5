"""The Spark jobs of pipelines/: partition status and the read_committed view, incremental and exactly once.

The view must always hold exactly the topic's read_committed rows up to the
LSO of some past run, each once: after runs SIGKILLed at every step (real
processes, a spark-submit among them) and run again, after a run that loses its
commit to another, after new commits, aborts and transactions left open.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_histories import fetch_rows, random_history, spark_rows

from lakelog import catalog, sql
from lakelog.errors import KafkaTimeout
from lakelog.log import READ_COMMITTED, open_partition
from lakelog.store import Location
from lakelog.store.io.retry import RetryPolicy
from pipelines import materialize_committed_view as view_job
from pipelines.materialize_committed_view import materialize_committed_view, view_position
from pipelines.partition_status import partition_status
from pyspark_lakelog import read_table

pytestmark = [pytest.mark.spark, pytest.mark.roots("local", "s3")]

REPO = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).resolve().parent / "spark_workers.py"


def view_rows(spark, root, topic):
    return spark_rows(spark.read.format("lakelog").option("root", root).option("view", topic).load())


def assert_view_is_read_committed(spark, root, topic):
    """The view holds each partition's read_committed rows up to its recorded position, each once, and
    positions are the LSOs of the last run (here: nothing committed since, so the current LSOs)."""
    view = catalog.open_view(root, topic)
    partitions = open_partition(root, topic, 0).config.num_partitions
    positions = {p: view_position(view, p) for p in range(partitions)}
    assert positions == {p: open_partition(root, topic, p).last_stable_offset() for p in range(partitions)}
    rows = view_rows(spark, root, topic)
    assert len({(row[0], row[1]) for row in rows}) == len(rows), "a row is in the view twice"
    assert rows == fetch_rows(root, topic, READ_COMMITTED, end=positions)
    # Jobs read views with read_table (Spark's Parquet reader, or file-IO tasks on S3): the same rows.
    assert spark_rows(read_table(spark, view)) == rows


def test_partition_status_is_the_logs_own_and_incremental(spark, root):
    writer = random_history(root, "status", random.Random(3), partitions=3, steps=40)
    first = partition_status(spark, root, "status")
    assert first.recomputed == [0, 1, 2] and first.version == 1
    rows = {
        row["partition"]: row
        for row in spark.read.format("lakelog").option("root", root).option("status", "status").load().collect()
    }
    for partition in range(3):
        log = open_partition(root, "status", partition)
        row = rows[partition]
        assert (row["high_watermark"], row["last_stable_offset"], row["table_version"]) == (
            log.high_watermark(),
            log.last_stable_offset(),
            log.version,
        )
        assert {t["producer_id"]: t["first_offset"] for t in row["open_transactions"]} == log.open_transactions()
        assert [(t["producer_id"], t["first_offset"], t["marker_offset"]) for t in row["aborted_transactions"]] == [
            (t.producer_id, t.first_offset, t.marker_offset) for t in log.aborted_transactions(0, log.high_watermark())
        ]
    again = partition_status(spark, root, "status")
    assert again.version is None and again.recomputed == []
    writer.plain_batch(1)
    third = partition_status(spark, root, "status")
    assert third.recomputed == [1] and third.version == 2
    status = catalog.open_status(root, "status")
    assert len(status.data_paths()) == 1 and status.io.parquet_metadata(status.data_paths()[0]).num_rows == 3
    assert sorted(row["partition"] for row in read_table(spark, status).collect()) == [0, 1, 2]


def test_view_is_incremental_and_follows_the_lso(spark, root):
    writer = random_history(root, "orders", random.Random(4), partitions=3, steps=40)
    writer.transactional_batch(11, 0, rows=2)  # open: holds partition 0's LSO
    report = materialize_committed_view(spark, root, "orders")
    assert report.version == 1
    assert_view_is_read_committed(spark, root, "orders")
    assert materialize_committed_view(spark, root, "orders").version is None
    for producer_id in sorted(writer.open):
        writer.end(producer_id, commit=producer_id != 12)
    for _ in range(15):
        writer.step()
    assert materialize_committed_view(spark, root, "orders").version == 2
    assert_view_is_read_committed(spark, root, "orders")
    # DuckDB sees the same: the view and the topic's read_committed rows, as `lakelog sql` queries them.
    columns = 'partition, "offset", key, value, headers, timestamp'
    differ = sql.query(
        root,
        f"SELECT count(*) AS n FROM ((SELECT {columns} FROM orders_view EXCEPT ALL SELECT {columns} FROM orders) "
        f"UNION ALL (SELECT {columns} FROM orders EXCEPT ALL SELECT {columns} FROM orders_view))",
    )
    assert differ.column("n").to_pylist() == [0]
    assert sql.query(root, "SELECT count(*) AS n FROM orders_view").column("n").to_pylist() == [
        len(view_rows(spark, root, "orders"))
    ]


@pytest.mark.parametrize("timeout_s", [60.0, 0.0], ids=["decides-again", "past-the-deadline"])
def test_a_run_that_loses_its_commit_decides_again(spark, root, timeout_s):
    """Run A is overtaken between writing its files and committing them: run B commits the same rows first.
    A's commit fails (strict v+1), A deletes its files, waits through the retry policy and finds nothing left
    to do; past its deadline it gives up with KafkaTimeout instead (S9.5: a loser never commits blindly)."""
    writer = random_history(root, "race", random.Random(6), partitions=2, steps=30)
    inner = []
    waits = []

    def overtake(point):
        if point == view_job.FAULT_MOVED and not inner:
            inner.append(materialize_committed_view(spark, root, "race"))

    backoff = RetryPolicy().start(timeout_s, sleep=waits.append)
    if timeout_s:
        report = materialize_committed_view(spark, root, "race", fault=overtake, backoff=backoff)
        assert report.version is None and backoff.retries == 1 and len(waits) <= 1
    else:
        with pytest.raises(KafkaTimeout, match="lost its commit race past the deadline"):
            materialize_committed_view(spark, root, "race", fault=overtake, backoff=backoff)
        assert waits == []
    assert inner[0].version == 1
    assert_view_is_read_committed(spark, root, "race")
    view = catalog.open_view(root, "race")
    data_files = {entry.name for entry in view.location.list() if entry.name.endswith(".parquet")}
    assert data_files == {entry.path for entry in view.data_files()}, "the loser left files behind"
    writer.plain_batch(0)


def written_by_a_run(view_folder: Location) -> bool:
    """Whether a run has started writing into the view's folder: its staging folder (local roots: Spark's
    writer), or a data file written straight into the table (S3 roots: file-IO tasks)."""
    return any(entry.name != "_delta_log" for entry in view_folder.list())


# Five Spark runs, each a JVM of its own, over a 40-step history: 2 minutes on a quiet machine, past pytest's 600 s
# beside the main tier's workers on two cores; it runs in the soak tier, with a limit of its own.
@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.roots("local", "s3", release=("s3",))
@pytest.mark.timeout(1200)
def test_view_runs_killed_at_any_point_leave_no_duplicate_and_no_gap(spark, root, tmp_path):
    """SIGKILL a spark-submit run while Spark writes its files, then runs at every fault point (planned;
    written; files moved into the table but in no commit; committed but not cleaned up), with new
    transactions between runs; a final run leaves the view equal to the topic's read_committed rows up
    to the LSO, each once."""
    rng = random.Random(8)
    writer = random_history(root, "killed", rng, partitions=3, steps=40)
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    submit = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "spark-submit"),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            str(REPO / "pipelines" / "materialize_committed_view.py"),
            "--root",
            root,
            "--topic",
            "killed",
        ],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    view_folder = Location.of(root) / "views" / "killed"
    deadline = time.monotonic() + 180
    while not written_by_a_run(view_folder) and submit.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # Killed the moment Spark starts writing: the kill must land mid-run, before the commit.
    os.killpg(submit.pid, signal.SIGKILL)
    assert submit.wait(60) == -signal.SIGKILL, "the spark-submit run ended before it was killed"
    assert written_by_a_run(view_folder), "the spark-submit run never started writing"
    assert catalog.open_view(root, "killed").version == 0, "the kill landed after the commit, not mid-run"
    for point in (view_job.FAULT_PLANNED, view_job.FAULT_WRITTEN, view_job.FAULT_MOVED, view_job.FAULT_COMMITTED):
        for _ in range(6):
            writer.step()
        before = catalog.open_view(root, "killed").version
        run = subprocess.run(
            [sys.executable, str(WORKERS), "materialize", root, "killed", point],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
            start_new_session=True,
        )
        assert run.returncode == -signal.SIGKILL, run.stdout + run.stderr[-3000:]
        assert f"at {point}" in run.stdout
        # Only a run killed after its commit changed the view.
        assert catalog.open_view(root, "killed").version == before + (point == view_job.FAULT_COMMITTED)
    assert catalog.open_view(root, "killed").version == 1  # the one run killed after its commit
    for producer_id in sorted(writer.open):
        writer.end(producer_id, commit=True)
    materialize_committed_view(spark, root, "killed")
    assert_view_is_read_committed(spark, root, "killed")
