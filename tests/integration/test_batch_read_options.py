"""Spark's Kafka-source batch options as the `lakelog` data source plans them, without Spark: what each reads
(pyspark_lakelog.options.ReadOptions.plan, the plan the source and `pyspark_lakelog.read` run), and bad input as
lakelog errors on the driver. The same options through Spark: tests/spark/test_spark_kafka_batch_options.py.
"""

from __future__ import annotations

import json

import pytest
from batch_read_lake import make_lake

from lakelog.errors import InvalidConfig, OffsetOutOfRange, UnknownTopicOrPartition
from pyspark_lakelog.options import ReadOptions


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    return make_lake(str(tmp_path_factory.mktemp("batch-plan") / "root"))


def planned(root: str, **options: str) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start, end) of every partition scan a read plans."""
    scans = ReadOptions.parse({"root": root, **options}).plan()
    return [(scan.topic, scan.partition, scan.start_offset, scan.end_offset) for scan in scans]


def test_subscriptions_name_topics_and_partitions(lake):
    assert planned(lake, subscribe="orders, payments") == [("orders", 0, 0, 3), ("orders", 1, 0, 2), ("payments", 0, 0, 1)]
    assert planned(lake, topic="payments") == [("payments", 0, 0, 1)]
    assert {scan[0] for scan in planned(lake, subscribePattern="order.*")} == {"orders", "order-returns"}
    assert planned(lake, subscribePattern="nothing.*") == []
    assert planned(lake, assign=json.dumps({"orders": [1], "payments": [0]})) == [("orders", 1, 0, 2), ("payments", 0, 0, 1)]


def test_offsets_json_with_earliest_and_latest_and_times(lake):
    starting = json.dumps({"orders": {"0": -2, "1": 1}})
    assert planned(lake, subscribe="orders", startingOffsets=starting) == [("orders", 0, 0, 3), ("orders", 1, 1, 2)]
    ending = json.dumps({"orders": {"0": 2, "1": -1}})
    assert planned(lake, subscribe="orders", endingOffsets=ending) == [("orders", 0, 0, 2), ("orders", 1, 0, 2)]
    assert planned(lake, assign='{"orders": [0]}', startingOffsets='{"orders": {"0": 1}}') == [("orders", 0, 1, 3)]
    # The first offset at or after the time, per partition; times win over startingOffsets, as in Spark.
    assert planned(lake, subscribe="orders", startingTimestamp="2000", startingOffsets="earliest") == [
        ("orders", 0, 1, 3),
        ("orders", 1, 1, 2),
    ]
    by_time = json.dumps({"orders": {"0": 3000, "1": 0}})
    assert planned(lake, subscribe="orders", startingOffsetsByTimestamp=by_time) == [("orders", 0, 2, 3), ("orders", 1, 0, 2)]
    # An end time with no record at or after it ends the partition at its latest.
    ending_by_time = json.dumps({"orders": {"0": 2500, "1": 9999}})
    assert planned(lake, subscribe="orders", endingOffsetsByTimestamp=ending_by_time) == [
        ("orders", 0, 0, 2),
        ("orders", 1, 0, 2),
    ]
    assert planned(lake, subscribe="orders", endingTimestamp="1500") == [("orders", 0, 0, 1), ("orders", 1, 0, 0)]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"subscribe": "orders", "topic": "orders"}, InvalidConfig, "a lakelog read needs exactly one of the options subscribe"),
        ({"subscribe": "orders", "view": "orders"}, InvalidConfig, "lakelog reads need exactly one of the options"),
        ({"subscribe": " , "}, InvalidConfig, "option subscribe names no topic"),
        ({"subscribePattern": "(orders"}, InvalidConfig, "subscribePattern '(orders' is no regular expression"),
        ({"assign": "[0]"}, InvalidConfig, "assign must be a JSON object"),
        ({"assign": '{"orders": "0"}'}, InvalidConfig, "assign for orders must be a list of partition numbers"),
        ({"assign": '{"orders": [5]}'}, UnknownTopicOrPartition, "assign names partitions [5] that orders has not (0-1)"),
        ({"subscribe": "nope"}, UnknownTopicOrPartition, "topic nope does not exist"),
        (
            {"assign": '{"orders": [0]}', "startingOffsets": '{"orders": {"0": 0, "1": 0}}'},
            UnknownTopicOrPartition,
            "startingOffsets for orders must name the assigned partitions [0]",
        ),
        ({"subscribe": "orders", "startingTimestamp": "soon"}, InvalidConfig, "option startingTimestamp must be a time in ms"),
        (
            {"subscribe": "orders", "startingOffsetsByTimestamp": '{"orders": {"0": 1}}'},
            UnknownTopicOrPartition,
            "startingOffsetsByTimestamp for orders must name partitions [0, 1]",
        ),
        (
            {"subscribe": "orders", "startingOffsetsByTimestamp": '{"payments": {"0": 1}}'},
            UnknownTopicOrPartition,
            "must name exactly the topics read",
        ),
        ({"subscribe": "orders", "endingOffsetsByTimestamp": "[1]"}, InvalidConfig, "endingOffsetsByTimestamp must be JSON"),
        (
            {"subscribe": "orders", "startingTimestamp": "9999"},
            OffsetOutOfRange,
            "orders-0: no record at or after timestamp 9999",
        ),
        ({"view": "orders", "startingTimestamp": "1"}, InvalidConfig, "option startingtimestamp applies to topic reads"),
    ],
)
def test_bad_batch_options_are_lakelog_errors(lake, options, error, message):
    with pytest.raises(error, match=None) as raised:
        ReadOptions.parse({"root": lake, **options}).plan()
    assert message in str(raised.value), str(raised.value)
