"""LakelogSinkOperator into the DuckDB file $LAKELOG_TEST_DATABASE, for tests/airflow/test_sink_operator.py:
`orders` (JSON values) loads; `raw` (values that are not JSON) must fail at once, with retries left unused."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from lakelog.airflow import LakelogSinkOperator

DATABASE = os.environ.get("LAKELOG_TEST_DATABASE", "/nonexistent/sink.duckdb")
COLUMNS = "id:bigint,name:text"

for dag_id, topic in (("lakelog_test_sink", "orders"), ("lakelog_test_sink_bad", "raw")):
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        default_args={"retries": 2, "retry_delay": timedelta(seconds=1)},
    ):
        LakelogSinkOperator(
            task_id="sink", topic=topic, database="duckdb", target=DATABASE, table=topic, columns=COLUMNS, offset_columns=True
        )
