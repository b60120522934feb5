"""Quality gates on Spark writes (issue 13 item 2): `df.write.format("lakelog")` judges the staged rows of a gated
topic before the driver-side commit (S11.1-S11.3).

The commit runs in a Python worker without a SparkSession (pyspark.sql.worker.commit_data_source_write), so the
staged files are validated there through the batch writer's gate, with GX's pandas datasource.
"""

from __future__ import annotations

import json

import pytest
from helpers import table_fingerprint

from lakelog.jobs.batch_writer import TransactionalBatchWriter
from lakelog.log import READ_UNCOMMITTED, create_topic
from lakelog.quality import read_results, write_suite
from lakelog.quality.dead_letter import DLQ_HEADER, dlq_topic
from lakelog.quality.results import failed_expectations, outcome
from pyspark_lakelog.source import STAGING_DIR
from tests.helpers import topic_rows
from tests.quality.conftest import ORDERS_SUITE

pytestmark = [pytest.mark.spark, pytest.mark.roots("local")]

ROWS = 10_000
BAD_ROW = 4_321


def orders_frame(spark, *, bad: bool):
    """ROWS orders keyed by id, JSON values; with `bad`, one has amount_cents -5."""
    from pyspark.sql import functions as F

    amount = F.col("id") * 10
    if bad:
        amount = F.when(F.col("id") == BAD_ROW, F.lit(-5)).otherwise(amount)
    value = F.to_json(
        F.struct(F.concat(F.lit("c"), (F.col("id") % 97).cast("string")).alias("customer"), amount.alias("amount_cents"))
    )
    return (
        spark.range(0, ROWS)
        .select(F.concat(F.lit("o"), F.col("id").cast("string")).alias("key"), value.alias("value"))
        .repartition(3)
    )


def write(data, root, topic, transactional_id, batch_id):
    data.write.format("lakelog").mode("append").option("root", root).option("topic", topic).option(
        "transactional.id", transactional_id
    ).option("batch.id", str(batch_id)).save()


def test_S11_1_S8_3_a_spark_write_with_a_bad_row_is_refused_and_the_fixed_write_commits(spark, root):
    create_topic(root, "orders", 3)
    write_suite(root, "orders", json.dumps(ORDERS_SUITE))
    with pytest.raises(Exception) as caught:
        write(orders_frame(spark, bad=True), root, "orders", "orders-job", 0)
    message = str(caught.value)
    assert "PolicyViolation: suite orders failed on 10000 rows of orders" in message, message
    assert "expect_column_values_to_be_between on value.amount_cents" in message
    assert topic_rows(root, "orders") == []  # read_committed unchanged (S11.1)
    assert table_fingerprint(f"{root}/{STAGING_DIR}") == []  # the staged files are gone
    [row] = read_results(root, topic="orders").to_pylist()
    assert (row["success"], row["transactional_id"], row["load_unit"]) == (False, "orders-job", "orders-job:0")
    [failure] = failed_expectations(row)
    assert (failure["column"], failure["unexpected_values"]) == ("value.amount_cents", [-5])
    assert outcome(root, row) == "aborted"
    assert TransactionalBatchWriter(root, "orders-job").last_committed_batch() is None

    # Batch 0 was not committed: the fixed write of it validates again and commits.
    write(orders_frame(spark, bad=False), root, "orders", "orders-job", 0)
    assert len(topic_rows(root, "orders")) == ROWS
    passed = read_results(root, topic="orders").to_pylist()[0]
    assert passed["success"] and outcome(root, passed) == "committed"


def test_S11_3_a_spark_write_that_fails_a_dead_letter_suite_goes_to_the_dlq_with_its_result(spark, root):
    create_topic(root, "orders", 2)
    write_suite(root, "orders", json.dumps(ORDERS_SUITE), mode="dead-letter")
    write(orders_frame(spark, bad=True), root, "orders", "dl-job", 0)
    write(orders_frame(spark, bad=True), root, "orders", "dl-job", 0)  # a retry of the committed batch: skipped
    assert topic_rows(root, "orders", READ_UNCOMMITTED) == []  # held back: never appended to the good topic
    dead = topic_rows(root, dlq_topic("orders"))
    [row] = read_results(root, topic="orders").to_pylist()
    assert len(dead) == ROWS and (row["success"], row["mode"]) == (False, "dead-letter")
    assert {tuple((h["key"], h["value"]) for h in item["headers"]) for item in dead} == {
        ((DLQ_HEADER, row["validation_id"].encode()),)
    }
