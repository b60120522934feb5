"""Spark's Kafka-source batch options through `spark.read.format("lakelog")` itself: subscribe, assign with JSON
offsets and a time, and a bad option as a lakelog error on Spark's first line. Every case of the options
(subscribePattern, the timestamp forms, every bad input) is checked on the same plan without Spark, where a case
costs milliseconds, not a Spark job (tests/integration/test_batch_read_options.py).
"""

from __future__ import annotations

import json

import pytest
from batch_read_lake import make_lake

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    return make_lake(str(tmp_path_factory.mktemp("batch-options") / "root"))


def read(spark, root, **options) -> list[tuple[str, int, int, bytes]]:
    frame = spark.read.format("lakelog").options(root=root, **options).load()
    rows = frame.select("topic", "partition", "offset", "value").collect()
    return sorted((row.topic, row.partition, row.offset, bytes(row.value)) for row in rows)


def test_subscriptions_offsets_and_times_as_sparks_kafka_source_takes_them(spark, lake):
    assert [row[3] for row in read(spark, lake, subscribe="orders,payments")] == [b"a0", b"a1", b"a2", b"b0", b"b1", b"p0"]
    # Under assign, JSON offsets name the assigned partitions (-1 latest); a time wins over startingOffsets.
    assert read(
        spark,
        lake,
        assign=json.dumps({"orders": [0]}),
        startingOffsets=json.dumps({"orders": {"0": 0}}),
        startingTimestamp="2000",
        endingOffsets=json.dumps({"orders": {"0": -1}}),
    ) == [("orders", 0, 1, b"a1"), ("orders", 0, 2, b"a2")]


def test_a_bad_batch_option_is_a_lakelog_error_on_sparks_first_line(spark, lake):
    with pytest.raises(Exception) as caught:
        spark.read.format("lakelog").options(root=lake, assign='{"orders": [5]}').load().collect()
    first_line = str(caught.value).splitlines()[0]
    assert "lakelog.errors.UnknownTopicOrPartition: assign names partitions [5] that orders has not (0-1)" in first_line
