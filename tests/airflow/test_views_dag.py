"""The views DAG (airflow/dags/lakelog_views.py) under a real `airflow dags test`, Spark through spark-submit.

A local root: the Spark jobs' S3 path is the pipelines' own, tested on S3 in
tests/spark; the hook only hands them the connection's root and store settings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lakelog import AdminClient, NewTopic, Producer
from lakelog.airflow.hooks.spark_submit import last_error_line
from lakelog.catalog import open_status
from lakelog.sql import snapshot_rows
from pipelines.demo_spark import verify_view

REPO = Path(__file__).resolve().parents[2]
COMMITTED_ROWS = 300
ABORTED_ROWS = 100


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


@pytest.fixture
def airflow_home(tmp_path: Path) -> tuple[Path, Path]:
    """A migrated SQLite AIRFLOW_HOME and a DAGs folder holding the views DAG and the failing test DAG."""
    home, dags = tmp_path / "airflow-home", tmp_path / "dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(REPO / "airflow" / "dags" / "lakelog_views.py", dags)
    shutil.copy(REPO / "tests" / "airflow" / "dags" / "lakelog_test_spark_submit.py", dags)
    migrated = airflow(["db", "migrate"], home, dags, {})
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    return home, dags


def connection_env(root: str) -> dict[str, str]:
    return {"AIRFLOW_CONN_LAKELOG_DEFAULT": json.dumps({"conn_type": "lakelog", "extra": {"root": root}})}


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
def test_S5_2_S5_3_views_dag_writes_status_and_committed_view_of_every_topic(tmp_path, airflow_home):
    """A manual run covers every user topic: the view holds exactly the committed rows (S5.2), the status table
    lists each partition's LSO and its aborted transaction (S5.1, S5.3)."""
    home, dags = airflow_home
    root = str(tmp_path / "root")
    make_topic(root, "orders")

    run = airflow(["dags", "test", "lakelog_views"], home, dags, connection_env(root))
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    assert "spark-submit of pipelines.materialize_committed_view finished" in output, output[-4000:]

    assert verify_view(root, "orders") == COMMITTED_ROWS
    status = snapshot_rows(open_status(root, "orders")).to_pylist()
    assert sorted(row["partition"] for row in status) == [0, 1]
    for row in status:
        assert row["last_stable_offset"] == row["high_watermark"]
        assert row["open_transactions"] == []
        assert len(row["aborted_transactions"]) == 1


@pytest.mark.slow
def test_failed_spark_submit_fails_its_task_in_one_line(tmp_path, airflow_home):
    """Bad input: a job raising a lakelog error (a topic that does not exist) and a JVM refusal (a bad master URL)
    each fail their task with one line naming the error; the lakelog error is not retried."""
    home, dags = airflow_home
    root = str(tmp_path / "root")
    out = tmp_path / "out"
    out.mkdir()
    run = airflow(["dags", "test", "lakelog_test_spark_submit"], home, dags, {**connection_env(root), "LAKELOG_TEST_OUT": str(out)})
    output = run.stdout + run.stderr

    missing = json.loads((out / "missing_topic.json").read_text())
    assert missing["type"] == "AirflowFailException", output[-4000:]
    assert "\n" not in missing["message"]
    assert missing["message"].startswith("spark-submit of pipelines.materialize_committed_view exited with code 1: ")
    assert missing["message"].endswith("lakelog.errors.UnknownTopicOrPartition: topic missing does not exist under " + root)

    bad_master = json.loads((out / "bad_master.json").read_text())
    assert "\n" not in bad_master["message"]
    assert bad_master["message"].endswith("org.apache.spark.SparkException: Master must either be yarn or start with spark, k8s, or local")
    assert "\tat " not in bad_master["message"]


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
        ('Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n\tat x.y(Z.java:1)\n', "java.lang.OutOfMemoryError: Java heap space"),
        ("26/11/23 15:14:24 WARN Utils: something\nError: Unrecognized option: --bogus\n\nUsage: spark-submit [options]\n", "Error: Unrecognized option: --bogus"),
    ],
)
def test_last_error_line_names_the_cause_without_a_stack_trace(output, line):
    assert last_error_line(output.splitlines()) == line
