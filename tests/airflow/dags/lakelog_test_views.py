"""Test DAGs for tests/airflow/test_views_dag.py.

- `lakelog_test_orders_load`: loads $LAKELOG_TEST_SOURCE into topic `orders`; its
  commit emits the topic's Asset event, which triggers `lakelog_views`.
- `lakelog_test_spark_submit`: spark-submit jobs that fail; each must fail its
  task with one line. Each failed task writes `<task_id>.json` ({"type",
  "message"}: its exception) into $LAKELOG_TEST_OUT, from Airflow's own
  on_failure_callback.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from lakelog.airflow import LakelogLoadOperator, LakelogSparkSubmitOperator

OUT = Path(os.environ.get("LAKELOG_TEST_OUT", "/nonexistent"))
SOURCE = os.environ.get("LAKELOG_TEST_SOURCE", "/nonexistent")


def record_failure(context) -> None:
    error = context.get("exception")
    outcome = {"type": type(error).__name__, "message": str(error)}
    (OUT / f"{context['ti'].task_id}.json").write_text(json.dumps(outcome))


with DAG(dag_id="lakelog_test_orders_load", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    LakelogLoadOperator(
        task_id="load_orders", topic="orders", source=SOURCE, unit="orders-batch-1", retries=2, retry_delay=timedelta(seconds=5)
    )


with DAG(
    dag_id="lakelog_test_spark_submit",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"retries": 0, "on_failure_callback": record_failure},
):
    # A lakelog error in the Python driver: the topic does not exist (not retriable).
    LakelogSparkSubmitOperator(
        task_id="missing_topic",
        application="pipelines.materialize_committed_view",
        application_args=["--topic", "missing"],
    )
    # A JVM error before any Python runs: spark-submit refuses the master URL.
    LakelogSparkSubmitOperator(
        task_id="bad_master",
        application="pipelines.partition_status",
        application_args=["--topic", "orders"],
        master="bogus://nowhere",
    )
