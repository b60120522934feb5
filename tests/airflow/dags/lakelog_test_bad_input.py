"""Bad input to LakelogLoadOperator, one task per case, for the scheduler tests: each fails at once, writes nothing.

$LAKELOG_TEST_SOURCE holds `good.parquet` and `bad.parquet` (CSV bytes under a Parquet name).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from lakelog.airflow import LakelogLoadOperator

SOURCE = os.environ.get("LAKELOG_TEST_SOURCE", "/nonexistent")

with DAG(
    dag_id="lakelog_test_bad_input",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    # Retries are allowed: bad input must fail without using them.
    default_args={"retries": 3, "retry_delay": timedelta(seconds=1)},
) as dag:
    LakelogLoadOperator(
        task_id="missing_connection", topic="days", source=SOURCE + "/good.parquet", unit="bad", lakelog_conn_id="lakelog_nowhere"
    )
    LakelogLoadOperator(task_id="no_match", topic="days", source=SOURCE + "/nothing-*.parquet", unit="bad")
    LakelogLoadOperator(task_id="wrong_format", topic="days", source=SOURCE + "/bad.parquet", unit="bad")
    LakelogLoadOperator(task_id="missing_topic", topic="absent", source=SOURCE + "/good.parquet", unit="bad")
