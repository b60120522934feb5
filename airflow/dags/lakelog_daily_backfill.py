"""lakelog_daily_backfill: a template to copy. Load each day's files into a topic exactly once, then refresh its views.

Copy this file into your DAGs folder and set the three names below. The
connection `lakelog_default` names the root (type `lakelog`, extra
`{"root": "s3://bucket/lake"}`); the Airflow Variable `lakelog_landing` names
the folder of daily landing folders (`<landing>/<YYYY-MM-DD>/*.parquet`, local
or on the root's object store).

Each run loads the files of its own day as one unit: the unit is
(dag, task, map index, data interval), so it does not depend on which attempt
or which run type (scheduled, backfill, manual with a data interval) does the
work. What happens to Airflow's repeats:

- a try that fails or is killed halfway: its open transaction is aborted by the
  retry, which loads the day once (S4.2);
- a retry, a clear, or `airflow backfill create --reprocess-behavior completed`
  of a loaded day: the task finds the day's record, appends nothing, logs where
  the day's rows are, and succeeds (S2.4);
- a try that missed its heartbeat and resumes beside its retry: it is fenced at
  its next write (S4.1), or, if it had not started writing, finds the day loaded;
- days backfilled out of order and several at a time (`--run-backwards`,
  `--max-active-runs N`): each day is its own transactional id, so nothing orders them.

Then the committed view and the partition status of the topic are refreshed with
Spark (`spark-submit`, local[2] by default). Both jobs are idempotent: each commits
once, on the snapshot it read. They run one at a time (`max_active_tis_per_dag=1`),
so a backfill of many days does not start many Spark drivers.

Backfill a quarter, newest first, four days at a time:

    airflow backfill create --dag-id lakelog_daily_backfill --from-date 2026-01-01 --to-date 2026-03-31 \\
        --max-active-runs 4 --run-backwards
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from lakelog.airflow import LakelogLoadOperator, LakelogSparkSubmitOperator

# Set these three when you copy the template.
TOPIC = "events"  # created beforehand: `lakelog topics create --topic events --partitions 4 --root ...`
KEY_COLUMN = None  # a column whose value keys each record (partitioning by key), or None
START = datetime(2026, 1, 1)

with DAG(
    dag_id="lakelog_daily_backfill",
    description=f"load each day's files into {TOPIC} exactly once, then refresh its committed view",
    schedule="@daily",
    start_date=START,
    catchup=False,
    max_active_runs=4,
    default_args={"retries": 3, "retry_delay": timedelta(minutes=1)},
    tags=["lakelog", "template"],
) as dag:
    load_day = LakelogLoadOperator(
        task_id="load_day",
        topic=TOPIC,
        source="{{ var.value.get('lakelog_landing', '/data/landing') }}/{{ data_interval_start | ds }}/*.parquet",
        key_column=KEY_COLUMN,
    )
    committed_view = LakelogSparkSubmitOperator(
        task_id="committed_view",
        application="lakelog.pipelines.materialize_committed_view",
        application_args=["--topic", TOPIC],
        max_active_tis_per_dag=1,
    )
    partition_status = LakelogSparkSubmitOperator(
        task_id="partition_status",
        application="lakelog.pipelines.partition_status",
        application_args=["--topic", TOPIC],
        max_active_tis_per_dag=1,
    )
    load_day >> [committed_view, partition_status]
