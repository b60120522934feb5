"""Airflow DAG: transform one topic into another, exactly once per run (KIP-447, S4.1, S4.2, S7.1).

Copy it and change `enrich` (and the defaults below). Each run reads what the
group has not consumed yet, up to the input's last stable offset when the run
starts, and commits the enriched rows together with the input offsets, in
transactions of `max_records_per_transaction` records. A retry, a cleared task,
or an attempt that stalled and resumed beside its retry never writes a row
twice: the task's transactional id (`lakelog.transform.lakelog_transform.enrich.-1`)
fences earlier attempts and aborts what they left open, and a row's output
commits with its offset or not at all.

Setup (the topics must exist; the group is this DAG's own, no consumer may join it):

    lakelog topics create --topic orders --partitions 3 --root <root>
    lakelog topics create --topic orders-enriched --partitions 3 --root <root>
    AIRFLOW_CONN_LAKELOG_DEFAULT='{"conn_type": "lakelog", "extra": {"root": "<root>"}}'

Params (defaults below; override them for a manual run): `input_topic`,
`output_topic`, `group_id`. Runs of one DAG share the transactional id, so
`max_active_runs=1`: a second run beside the first would fence it.

Schedule: a cron, every 10 minutes, not the input topic's Asset. The Asset only
gets an event when an Airflow task commits to the topic (LakelogLoadOperator);
most input topics are written by applications, which tell Airflow nothing. A
run with nothing new reads the group's offsets, writes nothing and ends, so a
frequent cron costs little, and exactly-once does not depend on when runs
happen. If the input is loaded by Airflow, schedule on its Asset instead:
`schedule=[topic_asset("orders")]` (from lakelog.airflow).

Outlets: the output topic's Asset (`lakelog://<root>/<output topic>`), named at
run time through the alias `lakelog_transform.output` since the topic is a
param; downstream DAGs can schedule on either.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pyarrow as pa
from airflow.sdk import DAG, AssetAlias, Param

from lakelog.airflow import LakelogTransformOperator

LARGE_ORDER = 1000


def enrich(batch: pa.Table) -> pa.Table:
    """Orders in (JSON objects), orders out: keep order_id, customer and amount; add amount_band and source.

    `batch` holds one input partition's rows (key, value, topic, partition, offset, timestamp, ...). The output
    is keyed by customer, so one customer's orders land on one output partition, and keeps each input row's
    timestamp. A value that is not a JSON object is passed on as {"unparsed": ...} rather than dropped.
    """
    keys, values = [], []
    columns = batch.select(["value", "topic", "partition", "offset"]).to_pydict()
    for value, topic, partition, offset in zip(
        columns["value"], columns["topic"], columns["partition"], columns["offset"], strict=True
    ):
        source = f"{topic}-{partition}@{offset}"
        try:
            order = json.loads(value) if value is not None else None
        except ValueError:
            order = None
        if not isinstance(order, dict):
            keys.append(None)
            values.append(json.dumps({"unparsed": None if value is None else value.decode(errors="replace"), "source": source}))
            continue
        amount = order.get("amount")
        band = None
        if isinstance(amount, (int, float)) and not isinstance(amount, bool):
            band = "large" if amount >= LARGE_ORDER else "small"
        customer = order.get("customer")
        keys.append(None if customer is None else str(customer))
        values.append(
            json.dumps(
                {
                    "order_id": order.get("order_id"),
                    "customer": customer,
                    "amount": amount,
                    "amount_band": band,
                    "source": source,
                }
            )
        )
    return pa.table(
        {"key": pa.array(keys, pa.string()), "value": pa.array(values, pa.string()), "timestamp": batch.column("timestamp")}
    )


with DAG(
    dag_id="lakelog_transform",
    description="lakelog: enrich a topic into another, exactly once per run",
    schedule="*/10 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    params={
        "input_topic": Param("orders", type="string", description="the topic to read"),
        "output_topic": Param("orders-enriched", type="string", description="the topic to write (it must exist)"),
        "group_id": Param("lakelog-transform-orders", type="string", description="this DAG's own consumer group"),
    },
    default_args={"retries": 3, "retry_delay": timedelta(minutes=1)},
    tags=["lakelog"],
) as dag:
    LakelogTransformOperator(
        task_id="enrich",
        input_topic="{{ params.input_topic }}",
        output_topic="{{ params.output_topic }}",
        group_id="{{ params.group_id }}",
        transform=enrich,
        max_records_per_transaction=10_000,
        lakelog_conn_id="lakelog_default",
        outlets=[AssetAlias("lakelog_transform.output")],
    )
