"""Airflow DAG: partition status and committed views of every topic, when new data commits to it.

For each topic the run covers, two Spark jobs run with spark-submit
(`LakelogSparkSubmitOperator`, mapped over the topics):

- `partition_status` (pipelines/partition_status.py): each partition's HW, LSO,
  open transactions and aborted ranges into `<root>/status/<topic>`;
- `committed_view` (pipelines/materialize_committed_view.py): the rows
  committed since the last run appended to the read_committed view
  `<root>/views/<topic>`, exactly once (S5.1, S5.3).

Which topics a run covers: the first task lists them. A run triggered by topic
Assets covers the topics whose Asset events triggered it (those an operator
committed to); a manual run covers every topic of the root. Internal topics
(`__*`) are left out.

Scheduling: the DAG runs when any topic Asset of the root gets an event
(`lakelog://<root>/<topic>`, emitted by lakelog's operators when their
transaction commits). The Assets are those of the topics that exist when the
file is parsed (the `lakelog_default` connection must resolve then): a topic
created later joins the schedule at the next parse. If the connection does not
resolve at parse time, or the root has no topics, the DAG still parses and runs
only when triggered by hand.

Both jobs are safe to retry and to overlap: each commits once, decided on the
snapshot it read. Spark runs through spark-submit, not
apache-airflow-providers-apache-spark, whose pyspark-client overwrites
pyspark's own files (see lakelog.airflow.hooks.spark_submit).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, AssetAny, task

from lakelog.airflow import DEFAULT_CONN_ID, LakelogHook, LakelogSparkSubmitOperator, topic_asset
from lakelog.airflow.operators._errors import task_errors
from lakelog.catalog import user_topics

log = logging.getLogger(__name__)

LAKELOG_CONN_ID = DEFAULT_CONN_ID
# The Spark jobs run for each topic: task id -> application.
JOBS = {
    "partition_status": "lakelog.pipelines.partition_status",
    "committed_view": "lakelog.pipelines.materialize_committed_view",
}


def parse_time_topics(conn_id: str) -> tuple[Any, list[str]]:
    """The root and its user topics if the connection resolves now, else (None, []) with a warning."""
    try:
        root = LakelogHook(conn_id).location()
        return root, user_topics(root)
    except Exception as error:  # a DAG must parse without its connection, or with its store unreachable
        log.warning("lakelog_views: no topic Assets to schedule on, connection %s does not resolve: %s", conn_id, error)
        return None, []


def topic_arguments(topic: str) -> list[str]:
    """A job's arguments for one topic (the operator adds --root)."""
    return ["--topic", topic]


_root, _topics = parse_time_topics(LAKELOG_CONN_ID)
_assets = [topic_asset(topic, _root) for topic in _topics]

with DAG(
    dag_id="lakelog_views",
    description="lakelog: partition status and read_committed views of the topics that got new commits",
    schedule=AssetAny(*_assets) if _assets else None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    # Two Spark jobs at a time, local[2] each.
    max_active_tasks=2,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    tags=["lakelog", "spark"],
) as dag:

    @task
    def topics_to_refresh(triggering_asset_events: Any = None) -> list[str]:
        """The topics whose Asset events triggered this run, or every user topic of the root for a manual run."""
        # Bad connection: fails at once; store unreachable: retried.
        with task_errors("listing the topics"):
            root = LakelogHook(LAKELOG_CONN_ID).location()
            topics = user_topics(root)
        if triggering_asset_events:
            uris = {asset.uri for asset in triggering_asset_events}
            topics = [topic for topic in topics if topic_asset(topic, root).uri in uris]
            log.info("asset-triggered run: topics %s", topics)
        else:
            log.info("manual run: every topic of %s: %s", root, topics)
        return topics

    topic_args = topics_to_refresh().map(topic_arguments)

    for task_id, application in JOBS.items():
        LakelogSparkSubmitOperator.partial(
            task_id=task_id,
            application=application,
            lakelog_conn_id=LAKELOG_CONN_ID,
            map_index_template="{{ task.application_args[-1] }}",
        ).expand(application_args=topic_args)
