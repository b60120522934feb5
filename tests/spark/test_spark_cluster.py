"""Every Spark path on a real Spark standalone cluster: a master and two one-core workers, each its own JVM
(tests/spark/spark_cluster.py), jobs submitted with `spark-submit --master spark://...` as a user would.

The cluster and every driver start with a scrubbed environment (no AWS_*, no LAKELOG_*): on the S3 root, the
root's settings reach the executors only as the application ships them (`storage.*` options, `--storage-option`),
which is what these tests prove. Spark's own event log shows the tasks of one stage ran in both executors.
Reads at both isolation levels (S5.2: read_committed shows no aborted and no open transaction's record), a write
whose every record lands once (S4, S10.2), the committed-view job; an executor SIGKILLed mid-write.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from spark_cluster import SPARK_SUBMIT, SparkCluster, ancestors, scrubbed_env
from spark_events import EventLog
from spark_histories import HistoryWriter, consumer_rows, fetch_rows

from lakelog import catalog, jars, sql
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, create_topic
from lakelog.store import Location

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark-cluster")]

REPO = Path(__file__).resolve().parents[2]
TOPIC_JOB = Path(__file__).resolve().parent / "cluster_jobs" / "topic_job.py"
PARTITIONS = 4
SUBMIT_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> SparkCluster:
    """One cluster for the module; its logs (master, workers, executors) are in its folder of the test's tmp."""
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def cluster_logs(cluster: SparkCluster):
    """The tails of the cluster's logs in the test's captured output (shown when it fails)."""
    yield
    print(cluster.log_tails())


def make_root(request, kind: str, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A fresh root both workers see (a local folder, or a prefix on the S3 emulator) and the storage options a job
    must be given to reach it (the test process's AWS_* never reach the cluster)."""
    from lakelog.store import initialise_root

    if kind == "s3":
        s3 = request.getfixturevalue("s3")
        root, options = request.getfixturevalue("s3_root"), s3.storage_options()
    else:
        root, options = str(tmp_path / "root"), {}
    initialise_root(root)
    return root, options


def history(root: str) -> dict[str, set[bytes]]:
    """Topic `orders`: committed transactions and plain batches over 4 partitions (many files, so a read has
    several tasks), one aborted transaction (producer 12) and one left open on partition 3 (producer 13)."""
    create_topic(root, "orders", PARTITIONS)
    writer = HistoryWriter(root, "orders", PARTITIONS, random.Random(7))
    for round_ in range(3):
        for partition in range(PARTITIONS):
            writer.transactional_batch(11, partition, rows=3)
            writer.plain_batch(partition)
        if round_ == 1:
            for partition in range(PARTITIONS):
                writer.transactional_batch(12, partition, rows=2)
            writer.end(12, commit=False)
        writer.end(11, commit=True)
    writer.transactional_batch(13, 3, rows=2)
    return {"aborted": prefixed(root, "p12-"), "open": prefixed(root, "p13-")}


def prefixed(root: str, prefix: str) -> set[bytes]:
    return {row[3] for row in fetch_rows(root, "orders", READ_UNCOMMITTED) if row[3].startswith(prefix.encode())}


def submit(
    cluster: SparkCluster, tmp_path: Path, name: str, script: Path, arguments: list[str], *, delta: bool, **conf: str
) -> tuple[subprocess.Popen, Path, float]:
    """Start `spark-submit --master spark://...` of `script` in a scrubbed environment, its event log in
    tmp_path/events-name; with `delta`, lakelog's JVM jars (Delta's connector, S3A) on the driver's and executors'
    class path and Delta's extension, as `lakelog jars conf` gives them (else the data source's Python paths only)."""
    events = tmp_path / f"events-{name}"
    events.mkdir()
    settings = {
        **(jars.spark_conf() if delta else {}),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "768m",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.databricks.delta.snapshotPartitions": "2",
        # Start no job before both executors are up, so a stage can spread over both.
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",
        **conf,
    }
    command = [str(SPARK_SUBMIT), "--master", cluster.master_url, "--name", name]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    started = time.monotonic()
    process = subprocess.Popen(
        [*command, str(script), *arguments],
        cwd=tmp_path,
        env=scrubbed_env({"SPARK_CONF_DIR": str(cluster.conf_dir)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return process, events, started


def finish(cluster: SparkCluster, submitted) -> tuple[str, EventLog]:
    process, events, started = submitted
    try:
        out, err = process.communicate(timeout=SUBMIT_TIMEOUT_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, f"{err[-4000:]}\n{cluster.log_tails()}"
    log = EventLog.read(events)
    print(f"{process.args[4]} ran {time.monotonic() - started:.1f} s; executor ids by stage:")
    for description, stages in log.stages_by_job.items():
        by_stage = log.executors_by_stage(description)
        print(f"  {description}: " + ", ".join(f"stage {s}: {by_stage.get(s, [])}" for s in stages))
    return out, log


def storage_arguments(options: dict[str, str]) -> list[str]:
    return [item for key, value in options.items() for item in ("--storage-option", f"{key}={value}")]


def wait_for_file(path: Path, process: subprocess.Popen, cluster: SparkCluster) -> str:
    deadline = time.monotonic() + SUBMIT_TIMEOUT_S
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {path.name}: {process.stderr.read()[-4000:] if process.stderr else ''}\n{cluster.log_tails()}")
        time.sleep(0.05)
    time.sleep(0.05)  # the file is written in one call; let it be whole
    return path.read_text()


def kill_held_executor(cluster: SparkCluster, submitted, hold: Path, staging: Location) -> None:
    """SIGKILL the executor JVM running the held write task (found from its Python worker's pid), then release it."""
    worker_pid = int(wait_for_file(hold / "held-0-0", submitted[0], cluster))
    executors = cluster.executor_pids()
    (executor,) = [pid for pid in ancestors(worker_pid) if pid in executors]
    staged = [(entry.uri.rsplit("/", 1)[-1], entry.size) for entry in staging.list(recursive=True) if not entry.is_dir]
    print(f"killing executor JVM {executor} (of {sorted(executors)}) mid-write; staged so far: {staged}")
    os.kill(executor, signal.SIGKILL)
    (hold / "release").write_text("")


# CI runs the first two (about a minute each on two cores); the release tier the others: Delta's reader (lakelog's
# JVM jars; on S3 through S3A with the root's shipped settings) makes the view job's reads a Spark job per partition.
@pytest.mark.parametrize(
    ("kind", "fault", "delta"),
    [
        ("local", "kill", False),
        ("s3", None, False),
        pytest.param("local", None, True, marks=pytest.mark.release),
        pytest.param("s3", "kill", True, marks=pytest.mark.release),
    ],
    ids=["local-kill", "s3", "local-delta", "s3-delta-kill"],
)
def test_reads_writes_and_the_view_job_on_a_cluster(cluster, request, tmp_path, kind, fault, delta):
    """S5.2 on two executors: read_committed drops the aborted and the open transaction's records, read_uncommitted
    has them; the write lands every read_committed record once (one transaction, S4.1), also when the executor of
    one of its tasks is SIGKILLed mid-stage (`kill`: the killed attempt's staged rows never commit, S10.2); the
    view job's view holds the read_committed rows up to the LSOs. On S3, only the shipped storage settings reach
    the executors."""
    root, options = make_root(request, kind, tmp_path)
    held = history(root)
    result_file, hold = tmp_path / "result.json", tmp_path / "hold"
    hold.mkdir()
    arguments = ["--root", root, "--source", "orders", "--dest", "copied", "--result", str(result_file), "--view"]
    arguments += storage_arguments(options) + (["--hold", str(hold), "--hold-mode", "kill"] if fault else [])
    submitted = submit(cluster, tmp_path, "topic", TOPIC_JOB, arguments, delta=delta)
    staging = Location.of(root, options).child("_spark_staging")
    if fault == "kill":
        kill_held_executor(cluster, submitted, hold, staging)
    _, log = finish(cluster, submitted)
    result = json.loads(result_file.read_text())

    for level in (READ_COMMITTED, READ_UNCOMMITTED):
        expected = sorted([row[0], row[1], row[3].hex()] for row in fetch_rows(root, "orders", level))
        assert result[level] == expected, level
        assert result[f"{level} tasks"] >= 2
    committed_values = {bytes.fromhex(row[2]) for row in result[READ_COMMITTED]}
    uncommitted_values = {bytes.fromhex(row[2]) for row in result[READ_UNCOMMITTED]}
    assert held["aborted"] and held["open"]
    assert not committed_values & (held["aborted"] | held["open"])
    assert held["aborted"] | held["open"] <= uncommitted_values
    for description in (f"read {READ_COMMITTED}", f"read {READ_UNCOMMITTED}", "write"):
        assert log.spread_over_two(description), (description, log.executors_by_stage(description))

    written = Counter(row[3] for row in consumer_rows(root, "copied", READ_COMMITTED))
    assert written == Counter(committed_values)
    assert max(written.values()) == 1
    assert not staging.exists() or not staging.list(recursive=True)
    if fault == "kill":
        write_tasks = [task for task in log.tasks if task.stage_id in log.stages_by_job["write"]]
        assert any(task.reason != "Success" and task.index == 0 for task in write_tasks), write_tasks
        assert len({task.executor_id for task in log.tasks}) >= 3, "no executor replaced the killed one"

    assert result["view"] == 1
    view = catalog.open_view(Location.of(root, options), "orders")
    assert view.version == 1
    in_view = sql.query(root, 'SELECT partition, "offset", value FROM orders_view').to_pylist()
    expected = [(row[0], row[1], row[3]) for row in fetch_rows(root, "orders", READ_COMMITTED)]
    assert sorted((row["partition"], row["offset"], row["value"]) for row in in_view) == expected
