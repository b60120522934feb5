"""Spark's Kafka-source batch options on `spark.read.format("lakelog")`: subscribe, subscribePattern, assign,
startingOffsets/endingOffsets (earliest, latest, JSON with -2/-1) and the timestamp forms, parsed as the streaming
source parses them (pyspark_lakelog.subscription); bad input is a lakelog error (InvalidConfig, OffsetOutOfRange,
UnknownTopicOrPartition) as the first line Spark shows. One small root for the module, on the shared session.
"""

from __future__ import annotations

import json

import pytest

from lakelog.log import create_topic, open_partition, payload_table

pytestmark = pytest.mark.spark

# Per partition of topic "orders": values and their timestamps (ms).
ORDERS = {0: [(b"a0", 1000), (b"a1", 2000), (b"a2", 3000)], 1: [(b"b0", 1500), (b"b1", 2500)]}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("batch-options") / "root")
    create_topic(root, "orders", 2)
    create_topic(root, "order-returns", 1)
    create_topic(root, "payments", 1)
    for partition, rows in ORDERS.items():
        values, stamps = zip(*rows, strict=True)
        open_partition(root, "orders", partition).append(payload_table(list(values), timestamps_ms=list(stamps)))
    open_partition(root, "order-returns", 0).append(payload_table([b"r0"]))
    open_partition(root, "payments", 0).append(payload_table([b"p0"]))
    return root


def read(spark, root, **options) -> list[tuple[str, int, int, bytes]]:
    frame = spark.read.format("lakelog").options(root=root, **options).load()
    rows = frame.select("topic", "partition", "offset", "value").collect()
    return sorted((row.topic, row.partition, row.offset, bytes(row.value)) for row in rows)


def test_subscriptions_and_offsets_as_sparks_kafka_source_takes_them(spark, lake):
    assert [row[3] for row in read(spark, lake, subscribe="orders,payments")] == [b"a0", b"a1", b"a2", b"b0", b"b1", b"p0"]
    # A pattern matches whole names: "order-returns" and "orders", not "payments".
    assert {row[0] for row in read(spark, lake, subscribePattern="order.*")} == {"orders", "order-returns"}
    assert read(spark, lake, assign=json.dumps({"orders": [1]})) == [("orders", 1, 0, b"b0"), ("orders", 1, 1, b"b1")]
    # JSON offsets under assign name the assigned partitions; -2 is earliest, -1 latest.
    assert read(
        spark,
        lake,
        assign=json.dumps({"orders": [0]}),
        startingOffsets=json.dumps({"orders": {"0": 1}}),
        endingOffsets=json.dumps({"orders": {"0": -1}}),
    ) == [("orders", 0, 1, b"a1"), ("orders", 0, 2, b"a2")]
    assert read(spark, lake, subscribe="orders", startingOffsets=json.dumps({"orders": {"0": -2, "1": 1}})) == [
        ("orders", 0, 0, b"a0"),
        ("orders", 0, 1, b"a1"),
        ("orders", 0, 2, b"a2"),
        ("orders", 1, 1, b"b1"),
    ]
    # By time: the first offset at or after the time, per partition; a time past the last record ends at latest.
    assert [row[3] for row in read(spark, lake, subscribe="orders", startingTimestamp="2000")] == [b"a1", b"a2", b"b1"]
    by_time = {"orders": {"0": 3000, "1": 0}}
    assert [row[3] for row in read(spark, lake, subscribe="orders", startingOffsetsByTimestamp=json.dumps(by_time))] == [
        b"a2",
        b"b0",
        b"b1",
    ]
    ending = json.dumps({"orders": {"0": 2500, "1": 9999}})
    assert [row[3] for row in read(spark, lake, subscribe="orders", endingOffsetsByTimestamp=ending)] == [
        b"a0",
        b"a1",
        b"b0",
        b"b1",
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "orders", "topic": "orders"}, "InvalidConfig: a lakelog read needs exactly one of the options subscribe"),
        ({"subscribePattern": "(orders"}, "InvalidConfig: subscribePattern '(orders' is no regular expression"),
        ({"assign": "[0]"}, "InvalidConfig: assign must be a JSON object"),
        ({"assign": '{"orders": [5]}'}, "UnknownTopicOrPartition: assign names partitions [5] that orders has not (0-1)"),
        (
            {"assign": '{"orders": [0]}', "startingOffsets": '{"orders": {"0": 0, "1": 0}}'},
            "UnknownTopicOrPartition: startingOffsets for orders must name the assigned partitions [0]",
        ),
        ({"subscribe": "orders", "startingTimestamp": "soon"}, "InvalidConfig: option startingTimestamp must be a time in ms"),
        (
            {"subscribe": "orders", "startingTimestamp": "9999"},
            "OffsetOutOfRange: orders-0: no record at or after timestamp 9999",
        ),
        ({"view": "orders", "startingTimestamp": "1"}, "InvalidConfig: option startingtimestamp applies to topic reads"),
    ],
)
def test_bad_batch_options_are_lakelog_errors(spark, lake, options, message):
    with pytest.raises(Exception) as caught:
        spark.read.format("lakelog").options(root=lake, **options).load().collect()
    first_line = str(caught.value).splitlines()[0]
    assert "lakelog.errors." in first_line and message in first_line, str(caught.value)
