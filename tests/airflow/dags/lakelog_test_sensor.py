"""LakelogCommittedSensor, three ways, for the scheduler tests: deferred without offsets, deferred with offsets, poking.

A run's conf names the topic (`{"topic": "events"}`) and, for `wait_offsets`,
the offsets to wait for (`{"offsets": {"0": 1}}`); the connection is `lakelog_default`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from lakelog.airflow import LakelogCommittedSensor

with DAG(
    dag_id="lakelog_test_sensor",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    # A retry is allowed: a missing topic must fail without using it.
    default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
) as dag:
    topic = "{{ dag_run.conf['topic'] }}"
    LakelogCommittedSensor(task_id="wait_stable", topic=topic, poke_interval=1, timeout=600)
    LakelogCommittedSensor(
        task_id="wait_offsets", topic=topic, offsets="{{ dag_run.conf.get('offsets') }}", poke_interval=1, timeout=600
    )
    LakelogCommittedSensor(task_id="wait_poke", topic=topic, deferrable=False, poke_interval=1, timeout=600)
