"""The views DAG (airflow/dags/lakelog_views.py) run for real, Spark through spark-submit: a manual run under
`airflow dags test`, an asset-triggered run under a real scheduler (tests/airflow/scheduler.py).

A local root: the Spark jobs' S3 path is the pipelines' own, tested on S3 in
tests/spark; the hook only hands them the connection's root and store settings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelog import AdminClient, NewTopic, Producer
from lakelog.catalog import list_status_tables, list_views, open_status
from lakelog.sql import snapshot_rows
from pipelines.demo_spark import verify_view
from tests.airflow.scheduler import Airflow

REPO = Path(__file__).resolve().parents[2]
COMMITTED_ROWS = 300
ABORTED_ROWS = 100
LOADED_ROWS = 200


def airflow(args: list[str], home: Path, dags: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **env,
    }
    airflow_cli = Path(sys.executable).with_name("airflow")
    return subprocess.run([str(airflow_cli), *args], env=environment, capture_output=True, text=True, timeout=600, cwd=home)


def make_topic(root: str, topic: str) -> None:
    """Two partitions: one committed transaction of COMMITTED_ROWS rows, then an aborted one of ABORTED_ROWS."""
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(topic, num_partitions=2)])
    producer = Producer({"lakelog.root": root, "transactional.id": f"{topic}-writer"})
    producer.init_transactions()
    for rows, commit in ((COMMITTED_ROWS, True), (ABORTED_ROWS, False)):
        producer.begin_transaction()
        for index in range(rows):
            producer.produce(topic, value=f"{'kept' if commit else 'dropped'}-{index}", partition=index % 2)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()


@pytest.mark.slow
def test_S5_2_S5_3_views_dag_writes_status_and_committed_view_of_every_topic(tmp_path):
    """A manual run (`airflow dags test`, a migrated SQLite DB) covers every user topic: the view holds exactly the
    committed rows (S5.2), the status table lists each partition's LSO and its aborted transaction (S5.1, S5.3)."""
    root = str(tmp_path / "root")
    make_topic(root, "orders")
    home, dags = tmp_path / "airflow-home", tmp_path / "dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(REPO / "airflow" / "dags" / "lakelog_views.py", dags)
    migrated = airflow(["db", "migrate"], home, dags, {})
    assert migrated.returncode == 0, migrated.stderr[-2000:]

    connection = json.dumps({"conn_type": "lakelog", "extra": {"root": root}})
    run = airflow(["dags", "test", "lakelog_views"], home, dags, {"AIRFLOW_CONN_LAKELOG_DEFAULT": connection})
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    assert "spark-submit of lakelog.pipelines.materialize_committed_view finished" in output, output[-4000:]

    assert verify_view(root, "orders") == COMMITTED_ROWS
    status = snapshot_rows(open_status(root, "orders")).to_pylist()
    assert sorted(row["partition"] for row in status) == [0, 1]
    for row in status:
        assert row["last_stable_offset"] == row["high_watermark"]
        assert row["open_transactions"] == []
        assert len(row["aborted_transactions"]) == 1


@pytest.mark.slow
@pytest.mark.xdist_group("airflow-standalone")
def test_S5_2_a_commit_to_one_topic_triggers_its_views_and_failed_jobs_fail_in_one_line(tmp_path):
    """Under a real scheduler: a load into `orders` emits its topic Asset event, which triggers lakelog_views for
    `orders` alone (`clicks` got no commit); the view then holds exactly the loaded rows (S5.2). Bad input in the
    same Airflow: a job raising a lakelog error (a topic that does not exist) and a JVM refusal (a bad master URL)
    each fail their task with one line naming the error; the lakelog error is not retried."""
    root = str(tmp_path / "root")
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("orders", num_partitions=2), NewTopic("clicks")])
    producer = Producer({"lakelog.root": root, "transactional.id": "clicks-writer"})
    producer.init_transactions()
    producer.begin_transaction()
    for index in range(50):
        producer.produce("clicks", value=f"click-{index}")
    producer.commit_transaction()
    source = tmp_path / "orders.parquet"
    orders = pa.table({"order": list(range(LOADED_ROWS)), "amount": [index * 3 for index in range(LOADED_ROWS)]})
    pq.write_table(orders, source)
    out = tmp_path / "out"
    out.mkdir()
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(REPO / "airflow" / "dags" / "lakelog_views.py", dags)
    shutil.copy(REPO / "tests" / "airflow" / "dags" / "lakelog_test_views.py", dags)
    airflow = Airflow(
        tmp_path / "airflow-home",
        dags,
        connections={"lakelog_default": {"conn_type": "lakelog", "extra": {"root": root}}},
        extra_env={"LAKELOG_TEST_SOURCE": str(source), "LAKELOG_TEST_OUT": str(out)},
    )
    try:
        airflow.start(["lakelog_views", "lakelog_test_orders_load", "lakelog_test_spark_submit"])
        airflow.trigger("lakelog_test_orders_load", "load-orders")
        airflow.trigger("lakelog_test_spark_submit", "failing-jobs")
        loads = airflow.wait_runs_done("lakelog_test_orders_load", 1, 300)
        assert [run["state"] for run in loads.values()] == ["success"], airflow.task_logs("lakelog_test_orders_load")
        views = airflow.wait_runs_done("lakelog_views", 1, 600)
        failing = airflow.wait_runs_done("lakelog_test_spark_submit", 1, 300)
        rendered = airflow.query(
            "SELECT task_id, map_index, rendered_map_index, state FROM task_instance WHERE dag_id = 'lakelog_views'"
        )
    finally:
        airflow.stop()

    (view_run,) = views.values()
    assert view_run["run_type"] == "asset_triggered" and view_run["state"] == "success", (views, rendered)
    assert sorted(rendered) == [
        ("committed_view", 0, "orders", "success"),
        ("partition_status", 0, "orders", "success"),
        ("topics_to_refresh", -1, None, "success"),
    ]
    assert verify_view(root, "orders") == LOADED_ROWS
    assert list_views(root) == list_status_tables(root) == ["orders"]

    assert [run["state"] for run in failing.values()] == ["failed"]
    missing = json.loads((out / "missing_topic.json").read_text())
    assert missing["type"] == "AirflowFailException"
    assert missing["message"] == (
        "spark-submit of pipelines.materialize_committed_view exited with code 1: "
        f"lakelog.errors.UnknownTopicOrPartition: topic missing does not exist under {root}"
    )
    bad_master = json.loads((out / "bad_master.json").read_text())
    assert bad_master["message"] == (
        "spark-submit of pipelines.partition_status exited with code 1: "
        "org.apache.spark.SparkException: Master must either be yarn or start with spark, k8s, or local"
    )


@pytest.mark.slow
def test_on_kill_stops_the_whole_spark_submit_process_group(tmp_path):
    """on_kill (what Airflow's SIGTERM handler calls) ends spark-submit's JVM and its Python driver, and the task
    fails saying the job was killed."""
    pid_file = tmp_path / "driver.pid"
    application = tmp_path / "sleeper.py"
    application.write_text("import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(300)\n")
    from lakelog.airflow.hooks.spark_submit import SparkSubmitHook  # imports Airflow: when run, not when collected

    hook = SparkSubmitHook(lakelog_conn_id=None)
    failure: list[BaseException] = []

    def submit() -> None:
        try:
            hook.submit(str(application), [str(pid_file)])
        except BaseException as error:  # noqa: BLE001 - the thread hands its outcome to the test
            failure.append(error)

    thread = threading.Thread(target=submit)
    thread.start()
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert thread.is_alive() and time.monotonic() < deadline, failure
        time.sleep(0.2)
    driver = int(pid_file.read_text())
    hook.on_kill()
    thread.join(60)

    assert not thread.is_alive()
    assert len(failure) == 1 and "was stopped" in str(failure[0]), failure
    with pytest.raises(ProcessLookupError):
        os.kill(driver, 0)


WORKER_FAILURE = """\
26/11/23 15:15:09 ERROR Executor: Exception in task 0.0 in stage 0.0 (TID 0)
Traceback (most recent call last):
  File "/job.py", line 5, in <module>
    spark.sparkContext.parallelize([1, 2], 2).map(boom).collect()
py4j.protocol.Py4JJavaError: An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 1 times, most recent failure: Lost task 1.0 in stage 0.0 (TID 1) (192.0.2.2 executor driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/job.py", line 4, in boom
    raise ValueError(f"bad row {x}")
ValueError: bad row 2

\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:3000)
Driver stacktrace:
Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/job.py", line 4, in boom
    raise ValueError(f"bad row {x}")
ValueError: bad row 2

\t... 1 more
"""
JVM_CAUSE = """\
Traceback (most recent call last):
  File "/job.py", line 3, in <module>
    spark.range(3).write.parquet("/x")
py4j.protocol.Py4JJavaError: An error occurred while calling o42.parquet.
: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
"""


@pytest.mark.parametrize(
    ("output", "line"),
    [
        (WORKER_FAILURE, "ValueError: bad row 2"),
        (JVM_CAUSE, "java.io.IOException: No space left on device"),
        (
            'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n\tat x.y(Z.java:1)\n',
            "java.lang.OutOfMemoryError: Java heap space",
        ),
        (
            "26/11/23 15:14:24 WARN Utils: x\nError: Unrecognized option: --bogus\n\nUsage: spark-submit [options]\n",
            "Error: Unrecognized option: --bogus",
        ),
        ("Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n", None),
        (
            "demo: FAILED: view of payments has 9 rows\nUsing Spark's default log4j profile: x\n",
            "demo: FAILED: view of payments has 9 rows",
        ),
    ],
)
def test_last_error_line_names_the_cause_without_a_stack_trace(output, line):
    from lakelog.airflow.hooks.spark_submit import last_error_line  # imports Airflow: when run, not when collected

    assert last_error_line(output.splitlines()) == line
