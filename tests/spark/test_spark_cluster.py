"""Every Spark path on a real Spark standalone cluster: a master and two one-core workers, each its own JVM
(tests/spark/spark_cluster.py), jobs submitted with `spark-submit --master spark://...` as a user would.

The cluster and every driver start with a scrubbed environment (no AWS_*, no LAKELOG_*): on the S3 root, the
root's settings reach the executors only as the application ships them (`storage.*` options, `--storage-option`),
which is what these tests prove. Spark's own event log shows the tasks of one stage ran in both executors.
Reads at both isolation levels (S5.2: read_committed shows no aborted and no open transaction's record), a write
whose every record lands once (S4, S10.2), the committed-view job; an executor SIGKILLed mid-write.
"""

from __future__ import annotations

import contextlib
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
from lakelog.jobs.maintenance import Sweeper
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, create_topic, open_partition
from lakelog.log.partition import wall_clock_ms
from lakelog.store import Location

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark-cluster")]

REPO = Path(__file__).resolve().parents[2]
TOPIC_JOB = Path(__file__).resolve().parent / "cluster_jobs" / "topic_job.py"
PARTITIONS = 4
SUBMIT_TIMEOUT_S = 300
PIPELINES = REPO / "pipelines"
DAY_MS = 86_400_000  # staging.retention.ms's default


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
            raise AssertionError(
                f"no {path.name}: {process.stderr.read()[-4000:] if process.stderr else ''}\n{cluster.log_tails()}"
            )
        time.sleep(0.05)
    time.sleep(0.05)  # the file is written in one call; let it be whole
    return path.read_text()


def kill_held_executor(cluster: SparkCluster, submitted, hold: Path, staging: Location) -> None:
    """SIGKILL the executor JVM running the held write task (found from its Python worker's pid), then release it.

    The held attempt has staged all its rows in closed files (checked here, on the root) and its commit message has
    not left the executor: those rows are what a write that committed whatever was staged would land twice."""
    held = json.loads(wait_for_file(hold / "held-0-0", submitted[0], cluster))
    executors = cluster.executor_pids()
    (executor,) = [pid for pid in ancestors(held["pid"]) if pid in executors]
    staged = dict(held["files"])
    assert staged and sum(staged.values()) > 0, f"the held attempt staged no rows: {held}"
    on_root = {info.uri for info in staging.list(recursive=True)}
    assert set(staged) <= on_root, (staged, on_root)
    print(f"killing executor JVM {executor} (of {sorted(executors)}) after its write task staged {staged}")
    os.kill(executor, signal.SIGKILL)
    (hold / "release").write_text("")


def kill_read_executor(cluster: SparkCluster, submitted, hold: Path) -> None:
    """SIGKILL the executor JVM running the held read task (it has handed Spark its first rows), then release it."""
    held = json.loads(wait_for_file(hold / "read-held-0-0", submitted[0], cluster))
    executors = cluster.executor_pids()
    (executor,) = [pid for pid in ancestors(held["pid"]) if pid in executors]
    print(f"killing executor JVM {executor} (of {sorted(executors)}) in the middle of its read task")
    os.kill(executor, signal.SIGKILL)
    (hold / "read-release").write_text("")


def run_cases(cluster: SparkCluster, request, tmp_path: Path, cases: list[dict], *, delta: bool, **conf: str):
    """Make each case's root and history, run them all in one application of TOPIC_JOB (killing the executor of a
    `hold: kill` case's held task), and check each case; returns the event log."""
    hold = tmp_path / "hold"
    hold.mkdir()
    for number, case in enumerate(cases):
        root, options = make_root(request, case.pop("kind"), tmp_path / f"case-{number}")
        case.update(root=root, storage=options, source="orders", dest="copied", held=history(root))
    spec, result_file = tmp_path / "spec.json", tmp_path / "result.json"
    spec.write_text(json.dumps({"cases": [{k: v for k, v in case.items() if k != "held"} for case in cases], "hold": str(hold)}))
    submitted = submit(cluster, tmp_path, "topic", TOPIC_JOB, [str(spec), str(result_file)], delta=delta, **conf)
    for case in cases:
        if case.get("hold") == "kill":
            kill_held_executor(cluster, submitted, hold, Location.of(case["root"], case["storage"]).child("_spark_staging"))
        elif case.get("hold") == "kill-read":
            kill_read_executor(cluster, submitted, hold)
    _, log = finish(cluster, submitted)
    results = json.loads(result_file.read_text())["cases"]
    for number, (case, result) in enumerate(zip(cases, results, strict=True)):
        check_case(number, case, result, log)
    return log


def check_case(number: int, case: dict, result: dict, log: EventLog) -> None:
    """S5.2 on two executors: read_committed drops the aborted and the open transaction's records, read_uncommitted
    has them; the write lands every read_committed record once, even if an attempt of it was killed (S10.2); the
    view holds the read_committed rows up to the LSOs."""
    root, options, held = case["root"], case["storage"], case["held"]
    for level in (READ_COMMITTED, READ_UNCOMMITTED):
        expected = sorted([row[0], row[1], row[3].hex()] for row in fetch_rows(root, "orders", level))
        assert result[level] == expected, (number, level)
        assert result[f"{level} tasks"] >= 2
    committed_values = {bytes.fromhex(row[2]) for row in result[READ_COMMITTED]}
    uncommitted_values = {bytes.fromhex(row[2]) for row in result[READ_UNCOMMITTED]}
    assert held["aborted"] and held["open"]
    assert not committed_values & (held["aborted"] | held["open"])
    assert held["aborted"] | held["open"] <= uncommitted_values
    for step in (f"read {READ_COMMITTED}", f"read {READ_UNCOMMITTED}", "write"):
        description = f"{number} {step}"
        assert log.spread_over_two(description), (description, log.executors_by_stage(description))

    written = Counter(row[3] for row in consumer_rows(root, "copied", READ_COMMITTED))
    assert written == Counter(committed_values), number
    assert max(written.values()) == 1
    staging = Location.of(root, options).child("_spark_staging")
    assert not staging.exists() or not staging.list(recursive=True), "a write left staged files behind"
    write_tasks = [task for task in log.tasks if task.stage_id in log.stages_by_job[f"{number} write"]]
    if case.get("hold") == "kill":
        assert any(task.reason != "Success" and task.index == 0 for task in write_tasks), write_tasks
    if case.get("hold") == "kill-read":
        # The read's task 0 was killed mid-read and ran again; the rows above are each read_committed record once.
        read_tasks = [task for task in log.tasks if task.stage_id in log.stages_by_job[f"{number} read {READ_COMMITTED}"]]
        assert any(task.reason != "Success" and task.index == 0 for task in read_tasks), read_tasks
        assert any(task.reason == "Success" and task.index == 0 for task in read_tasks), read_tasks
    if case.get("view"):
        assert result["view"] == 1
        assert catalog.open_view(Location.of(root, options), "orders").version == 1
        in_view = sql.query(root, 'SELECT partition, "offset", value FROM orders_view').to_pylist()
        expected_view = [(row[0], row[1], row[3]) for row in fetch_rows(root, "orders", READ_COMMITTED)]
        assert sorted((row["partition"], row["offset"], row["value"]) for row in in_view) == expected_view


def test_a_local_and_an_s3_root_in_one_application_with_executors_killed_mid_write_and_mid_read(cluster, request, tmp_path):
    """CI's cluster test (one application: its driver's and executors' start is most of the time). On the local
    root the executor of a write task is SIGKILLed mid-stage: the task runs again on the executor that replaces it,
    and the killed attempt's staged rows never commit. On S3 the executor of a read_committed read task is killed
    after it has handed Spark its first rows: the task runs again and the read has every committed record once and
    no aborted or open one. On S3 the root's settings reach the executors only as the job ships them (no AWS_*
    anywhere on the cluster)."""
    log = run_cases(
        cluster,
        request,
        tmp_path,
        # The view job on S3 only: there its files are written by tasks through lakelog's file IO (shipped settings);
        # the local root's view (Spark's own writer into a shared folder) runs in the release tier.
        [{"kind": "local", "hold": "kill"}, {"kind": "s3", "view": True, "hold": "kill-read"}],
        delta=False,
    )
    assert len({task.executor_id for task in log.tasks}) == 4, "no executor replaced each killed one"


def test_S10_2_S9_5_a_driver_killed_before_its_commit_is_finished_by_a_rerun_and_the_sweep_removes_its_files(
    cluster, request, tmp_path
):
    """The driver SIGKILLed after every write task staged its files and before its transaction: nothing of the write
    is visible (S4.4). The rerun (the same transactional.id and batch.id, S10.1) commits the unit once (S10.2) beside
    the dead write's staged files, which the sweep removes once they are past `staging.retention.ms` and not before
    (S9.5: tidiness on a clock, no safety)."""
    root, options = make_root(request, "local", tmp_path / "case-0")
    held = history(root)
    case = {"root": root, "storage": options, "source": "orders", "dest": "copied"}
    hold = tmp_path / "hold"
    hold.mkdir()
    runs = {}
    for run, mode in (("killed", "driver"), ("rerun", None)):
        runs[run] = tmp_path / run
        runs[run].mkdir()
        (runs[run] / "spec.json").write_text(json.dumps({"cases": [{**case, "hold": mode}], "hold": str(hold)}))

    def arguments(run: str) -> list[str]:
        return [str(runs[run] / "spec.json"), str(runs[run] / "result.json")]

    killed = submit(cluster, runs["killed"], "killed", TOPIC_JOB, arguments("killed"), delta=False)
    commit = json.loads(wait_for_file(hold / "commit-held", killed[0], cluster))
    staging = Location.of(root, options) / "_spark_staging"
    staged = {info.uri for info in staging.list(recursive=True) if not info.is_dir}
    assert {uri for uri, _ in commit["files"]} == staged and len(staged) >= 2, (commit, staged)
    committed = fetch_rows(root, "orders", READ_COMMITTED)
    assert sum(records for _, records in commit["files"]) == len(committed)
    print(f"killing the driver (spark-submit's process group {killed[0].pid}) before its commit of {len(staged)} files")
    os.killpg(killed[0].pid, signal.SIGKILL)
    killed[0].wait()
    with contextlib.suppress(ProcessLookupError):  # the commit's Python worker, if it outlived its JVM
        os.kill(commit["pid"], signal.SIGKILL)
    assert consumer_rows(root, "copied", READ_COMMITTED) == []

    _, log = finish(cluster, submit(cluster, runs["rerun"], "rerun", TOPIC_JOB, arguments("rerun"), delta=False))
    written = Counter(row[3] for row in consumer_rows(root, "copied", READ_COMMITTED))
    assert written == Counter(row[3] for row in committed) and max(written.values()) == 1
    assert not {row[3] for row in consumer_rows(root, "copied", READ_UNCOMMITTED)} & (held["aborted"] | held["open"])
    assert log.spread_over_two("0 write"), log.executors_by_stage("0 write")
    assert {info.uri for info in staging.list(recursive=True) if not info.is_dir} == staged  # the rerun's are gone

    assert Sweeper(root).spark_staging() == []  # minutes old: kept
    (removed,) = Sweeper(root).spark_staging(wall_clock_ms() + DAY_MS + 60_000)
    assert (staging / removed.write).uri == commit["staging"] and removed.files == len(staged)
    assert not staging.list(recursive=True)
    assert Counter(row[3] for row in consumer_rows(root, "copied", READ_COMMITTED)) == written


# The release tier: lakelog's JVM jars (Delta's reader; on S3 through S3A, set per read from the root's shipped
# settings) make the view job's reads a Spark job per partition, minutes on two cores.
@pytest.mark.release
@pytest.mark.parametrize(("kind", "hold"), [("local", None), ("s3", "kill")], ids=["local-delta", "s3-delta-kill"])
def test_one_root_with_delta_on_the_cluster(cluster, request, tmp_path, kind, hold):
    run_cases(cluster, request, tmp_path, [{"kind": kind, "hold": hold, "view": True}], delta=True)


@pytest.mark.release
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_the_pipelines_jobs_submitted_to_a_cluster(cluster, request, tmp_path, kind):
    """pipelines/*.py as users submit them, with lakelog's JVM jars (Delta's reader; S3A on S3, set per read from
    the root's shipped settings): the partition-status job (one task per partition over both executors), the
    committed-view job, and the streaming job (availableNow) into another topic, each committed record once."""
    root, options = make_root(request, kind, tmp_path)
    history(root)
    storage = storage_arguments(options)

    out, log = finish(
        cluster,
        submit(
            cluster,
            tmp_path,
            "status",
            PIPELINES / "partition_status.py",
            ["--root", root, "--topic", "orders", *storage],
            delta=True,
        ),
    )
    assert json.loads(out.strip().splitlines()[-1])["recomputed"] == list(range(PARTITIONS))
    assert any(len(executors) == 2 for executors in log.executors_by_stage().values()), log.executors_by_stage()
    status = catalog.open_status(Location.of(root, options), "orders")
    rows = [row for uri in status.data_paths() for row in status.io.read_parquet(uri).to_pylist()]
    logs = {p: open_partition(root, "orders", p) for p in range(PARTITIONS)}
    assert sorted((row["partition"], row["high_watermark"], row["last_stable_offset"]) for row in rows) == [
        (p, log.high_watermark(), log.last_stable_offset()) for p, log in logs.items()
    ]

    view_arguments = ["--root", root, "--topic", "orders", *storage]
    out, log = finish(
        cluster, submit(cluster, tmp_path, "view", PIPELINES / "materialize_committed_view.py", view_arguments, delta=True)
    )
    assert json.loads(out.strip().splitlines()[-1])["version"] == 1
    in_view = sql.query(root, 'SELECT partition, "offset", value FROM orders_view').to_pylist()
    committed = fetch_rows(root, "orders", READ_COMMITTED)
    assert sorted((row["partition"], row["offset"], row["value"]) for row in in_view) == [(r[0], r[1], r[3]) for r in committed]

    create_topic(root, "upper", 2)
    stream_arguments = ["--root", root, "--source", "orders", "--dest", "upper", "--checkpoint", str(tmp_path / "checkpoint")]
    out, log = finish(
        cluster,
        submit(
            cluster,
            tmp_path,
            "stream",
            PIPELINES / "stream_topic_to_topic.py",
            [*stream_arguments, "--available-now", *storage],
            delta=True,
        ),
    )
    assert json.loads(out.strip().splitlines()[-1])["records"] == len(committed)
    streamed = consumer_rows(root, "upper", READ_COMMITTED)
    sources = Counter(dict(row[4])["lakelog.source"] for row in streamed)
    assert sources == Counter(f"orders:{row[0]}:{row[1]}".encode() for row in committed)
    assert sorted(row[3] for row in streamed) == sorted(row[3].upper() for row in committed)


@pytest.mark.release
def test_speculative_copies_of_a_write_task_commit_nothing_twice(cluster, request, tmp_path):
    """spark.speculation on, one write task held until its speculative copy (on the other executor) has passed all
    its rows on: both attempts stage the same rows, and each record still lands once (S10.2)."""
    speculation = {
        "spark.speculation": "true",
        "spark.speculation.interval": "100ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.efficiency.enabled": "false",
    }
    log = run_cases(cluster, request, tmp_path, [{"kind": "local", "hold": "speculate"}], delta=False, **speculation)
    write_tasks = [task for task in log.tasks if task.stage_id in log.stages_by_job["0 write"]]
    print("write task attempts:", write_tasks)
    assert any(task.speculative and task.index == 0 for task in write_tasks), "no speculative copy ran"
    assert any(path.name.startswith("done-0-") for path in (tmp_path / "hold").iterdir())
