"""Airflow DAG: the coordinator sweep of one lakelog root, every minute (S4.7, S6.5, S8.2).

Aborts transactions past their transaction.timeout.ms (so partitions' LSO moves on
when a producer died), finishes decided transactions whose producer died before
writing every marker, expires idle transactional ids, and removes group members
past their session or rebalance timeout. The sweep is idempotent and safe beside
clients and other sweeps, so overlapping or retried runs do no harm; it is cheap
when there is nothing to do.

The root comes from the Airflow Variable `lakelog_root`, else $LAKELOG_ROOT.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, Variable, task


def lakelog_root() -> str:
    root = Variable.get("lakelog_root", default=None) or os.environ.get("LAKELOG_ROOT")
    if not root:
        raise ValueError("set the Airflow Variable lakelog_root or $LAKELOG_ROOT to the lakelog root")
    return root


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

    @task
    def sweep_transactions() -> dict:
        from dataclasses import asdict

        from lakelog.coordinator.transaction_coordinator import TransactionCoordinator

        report = TransactionCoordinator(lakelog_root()).sweep()
        print(f"transaction sweep: {asdict(report)}")
        return asdict(report)

    @task
    def sweep_groups() -> list:
        from lakelog.coordinator.group_coordinator import GroupCoordinator

        removed = GroupCoordinator(lakelog_root()).sweep()
        print(f"group sweep: removed members {removed}")
        return [list(pair) for pair in removed]

    sweep_transactions() >> sweep_groups()
