"""Airflow DAG: the coordinator sweep of one lakelog root, every minute (S4.7, S6.5, S8.2).

Aborts transactions past their transaction.timeout.ms (so partitions' LSO moves on
when a producer died), finishes decided transactions whose producer died before
writing every marker, expires idle transactional ids, and removes group members
past their session or rebalance timeout. The sweep is idempotent and safe beside
clients and other sweeps, so overlapping or retried runs do no harm; it is cheap
when there is nothing to do.

The root comes from the Airflow connection `lakelog_default` (type lakelog), e.g.

    AIRFLOW_CONN_LAKELOG_DEFAULT='{"conn_type": "lakelog", "extra": {"root": "s3://bucket/lake"}}'
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from lakelog.airflow import LakelogSweepOperator

with DAG(
    dag_id="lakelog_sweep",
    description="lakelog coordinator sweep: abort timed-out transactions, expire dead group members",
    schedule=timedelta(minutes=1),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["lakelog"],
) as dag:
    LakelogSweepOperator(task_id="sweep")
