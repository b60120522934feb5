"""`spark.readStream.format("lakelog")` and `writeStream.format("lakelog")` on the shared session: offsets as
Spark's Kafka source checkpoints them, micro-batches cut at the LSO (S5.1), maxOffsetsPerTrigger, failOnDataLoss
both ways after delete_records, new partitions, a replayed micro-batch written once, quality gates on the sink.

The kill/restart and zombie runs in real processes are in test_spark_stream_processes.py.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from helpers import topic_rows

from lakelog import Producer, TopicPartition
from lakelog.admin import AdminClient, NewPartitions
from lakelog.jobs.batch_writer import TransactionalBatchWriter
from lakelog.log import create_topic, open_partition
from lakelog.quality import write_suite
from pyspark_lakelog.stream_options import derived_transactional_id
from tests.quality.conftest import ORDERS_SUITE

pytestmark = [pytest.mark.spark, pytest.mark.roots("local")]


def produce(
    root: str, topic: str, values: list[tuple[int, str]], transactional_id: str | None = None, outcome: str = "commit"
) -> None:
    """(partition, value) records; in one transaction of `transactional_id` ended by `outcome`, if given."""
    conf = {"lakelog.root": root, **({"transactional.id": transactional_id} if transactional_id else {})}
    producer = Producer(conf)
    if transactional_id:
        producer.init_transactions()
        producer.begin_transaction()
    for partition, value in values:
        producer.produce(topic, value=value, key=value, partition=partition)
    if transactional_id:
        producer.flush()  # the rows land before the transaction ends (an abort drops rows still queued)
        producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    producer.flush()
    producer.close()


def stream(spark, root: str, **options: str):
    reader = spark.readStream.format("lakelog").option("root", root)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def collect(spark, frame, checkpoint: Path) -> tuple[list, list[dict]]:
    """Run the stream until it has read everything available (processing-time triggers), each micro-batch collected
    in the driver (foreachBatch, which restarts from its checkpoint); returns the rows and the progress reports of
    the micro-batches that read something."""
    rows: list = []
    query = (
        frame.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    exception = query.exception()
    if exception is not None:
        raise exception
    return rows, [report for report in query.recentProgress if report["numInputRows"]]


def offsets(value) -> dict:
    """A progress report's offsets (pyspark's report gives the parsed JSON back as Python's text of it)."""
    return ast.literal_eval(value) if isinstance(value, str) else value


def values(rows) -> list[str]:
    return sorted(row.value.decode() for row in rows)


def test_offsets_are_kafka_json_starting_offsets_json_and_max_offsets_per_trigger_bound_each_batch(spark, root, tmp_path):
    create_topic(root, "t", 2)
    produce(root, "t", [(index % 2, f"v{index}") for index in range(60)])
    frame = stream(spark, root, subscribe="t", startingOffsets=json.dumps({"t": {"0": 5, "1": -2}}), maxOffsetsPerTrigger="20")
    rows, progress = collect(spark, frame, tmp_path / "checkpoint")
    # Partition 0 from offset 5 (its records v10, v12, ...), partition 1 from its start.
    assert values(rows) == sorted([f"v{2 * i}" for i in range(5, 30)] + [f"v{2 * i + 1}" for i in range(30)])
    assert [report["numInputRows"] for report in progress] == [20, 20, 15]
    ends = [offsets(report["sources"][0]["endOffset"]) for report in progress]
    # 20 offsets shared by lags 25 and 30 (from 5 and 0): 9 and 11.
    assert ends[0] == {"t": {"0": 14, "1": 11}}
    assert ends[-1] == {"t": {"0": 30, "1": 30}}
    # Spark's checkpoint holds the offsets as Spark's Kafka source writes them: topic -> partition -> offset.
    logged = [path for path in (tmp_path / "checkpoint" / "offsets").iterdir() if path.name.isdigit()]
    last_offsets = max(logged, key=lambda path: int(path.name))
    assert json.loads(last_offsets.read_text().splitlines()[-1]) == {"t": {"0": 30, "1": 30}}


def test_S5_1_a_batch_stops_at_the_lso_an_open_transaction_holds_back_its_partition_only(spark, root, tmp_path):
    create_topic(root, "t", 2)
    produce(root, "t", [(0, "c0"), (1, "c1")], "w")
    produce(root, "t", [(0, "a0"), (1, "a1")], "w", outcome="abort")
    late = Producer({"lakelog.root": root, "transactional.id": "late"})
    late.init_transactions()
    late.begin_transaction()
    late.produce("t", value="late", partition=0)
    late.flush()
    produce(root, "t", [(0, "after0"), (1, "after1")], "w")  # partition 0: behind the open transaction
    rows, _ = collect(spark, stream(spark, root, subscribe="t"), tmp_path / "committed")
    assert values(rows) == ["after1", "c0", "c1"]
    rows, _ = collect(spark, stream(spark, root, topic="t", **{"isolation.level": "read_uncommitted"}), tmp_path / "u")
    assert values(rows) == ["a0", "a1", "after0", "after1", "c0", "c1", "late"]
    late.commit_transaction()
    late.close()
    # The same query, restarted from its checkpoint, reads what the commit released: once.
    rows, _ = collect(spark, stream(spark, root, subscribe="t"), tmp_path / "committed")
    assert values(rows) == ["after0", "late"]


def test_fail_on_data_loss_both_ways_after_delete_records(spark, root, tmp_path):
    create_topic(root, "t", 1)
    produce(root, "t", [(0, f"v{index:02d}") for index in range(10)])
    checkpoint = tmp_path / "checkpoint"
    rows, _ = collect(spark, stream(spark, root, subscribe="t", maxOffsetsPerTrigger="4"), checkpoint)
    assert len(rows) == 10
    produce(root, "t", [(0, f"v{index:02d}") for index in range(10, 20)])
    # Offsets 10-14 are deleted before the query read them.
    AdminClient({"lakelog.root": root}).delete_records([TopicPartition("t", 0, 15)])[TopicPartition("t", 0, 15)].result()
    assert open_partition(root, "t", 0).log_start_offset() == 15
    with pytest.raises(Exception, match=r"OffsetOutOfRange.*t-0: offsets 10-14 are gone"):
        collect(spark, stream(spark, root, subscribe="t"), checkpoint)
    rows, _ = collect(spark, stream(spark, root, subscribe="t", failOnDataLoss="false"), checkpoint)
    assert values(rows) == [f"v{index}" for index in range(15, 20)]


def test_partitions_added_to_a_subscribed_topic_and_topics_matching_a_pattern_are_read(spark, root, tmp_path):
    create_topic(root, "orders-a", 1)
    produce(root, "orders-a", [(0, "a0")])
    checkpoint = tmp_path / "checkpoint"
    rows, _ = collect(spark, stream(spark, root, subscribePattern="orders-.*"), checkpoint)
    assert values(rows) == ["a0"]
    AdminClient({"lakelog.root": root}).create_partitions([NewPartitions("orders-a", 2)])["orders-a"].result()
    create_topic(root, "orders-b", 1)
    create_topic(root, "other", 1)
    produce(root, "orders-a", [(1, "a1")])
    produce(root, "orders-b", [(0, "b0")])
    produce(root, "other", [(0, "x")])
    rows, _ = collect(spark, stream(spark, root, subscribePattern="orders-.*"), checkpoint)
    assert values(rows) == ["a1", "b0"]


def write_stream(frame, root: str, topic: str, checkpoint: Path):
    query = (
        frame.selectExpr("key", "value")
        .writeStream.format("lakelog")
        .option("root", root)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


def test_a_micro_batch_spark_runs_again_is_written_once(spark, root, tmp_path):
    """Batch 0's commit is removed from the checkpoint, so Spark runs batch 0 again: the sink skips it (its
    transaction is recorded as committed under the query's transactional.id), and batch 1 writes the rest."""
    create_topic(root, "in", 2)
    create_topic(root, "out", 2)
    produce(root, "in", [(index % 2, f"v{index}") for index in range(20)], "w")
    checkpoint = tmp_path / "checkpoint"
    write_stream(stream(spark, root, subscribe="in"), root, "out", checkpoint)
    assert len(topic_rows(root, "out")) == 20
    for name in ("0", ".0.crc"):  # the local filesystem's checksum file too
        (checkpoint / "commits" / name).unlink()
    query = write_stream(stream(spark, root, subscribe="in"), root, "out", checkpoint)
    assert [report["batchId"] for report in query.recentProgress] == [0]
    assert len(topic_rows(root, "out")) == 20
    writer = TransactionalBatchWriter(root, derived_transactional_id(str(checkpoint)))
    assert writer.last_committed_batch() == 0
    produce(root, "in", [(0, "more")], "w")
    write_stream(stream(spark, root, subscribe="in"), root, "out", checkpoint)
    assert sorted(value.decode() for value in (row["value"] for row in topic_rows(root, "out"))).count("v3") == 1
    assert len(topic_rows(root, "out")) == 21
    assert writer.last_committed_batch() == 1


def test_S11_1_a_gated_topic_refuses_a_micro_batch_with_a_bad_row(spark, root, tmp_path):
    create_topic(root, "raw", 1)
    create_topic(root, "orders", 1)
    write_suite(root, "orders", json.dumps(ORDERS_SUITE))
    good = [(0, json.dumps({"customer": "c1", "amount_cents": 5}))]
    produce(root, "raw", good, "w")
    checkpoint = tmp_path / "checkpoint"
    write_stream(stream(spark, root, subscribe="raw"), root, "orders", checkpoint)
    assert len(topic_rows(root, "orders")) == 1
    produce(root, "raw", [(0, json.dumps({"customer": "c2", "amount_cents": -5}))], "w")
    with pytest.raises(Exception, match="PolicyViolation: suite orders failed"):
        write_stream(stream(spark, root, subscribe="raw"), root, "orders", checkpoint)
    assert len(topic_rows(root, "orders")) == 1  # the refused micro-batch's transaction aborted (S11.1)


def test_a_deleted_topic_fails_the_query_or_is_skipped_without_fail_on_data_loss(spark, root, tmp_path):
    create_topic(root, "kept", 1)
    create_topic(root, "dropped", 1)
    produce(root, "kept", [(0, "k0")])
    produce(root, "dropped", [(0, "d0")])
    checkpoint = tmp_path / "checkpoint"
    rows, _ = collect(spark, stream(spark, root, subscribe="kept,dropped"), checkpoint)
    assert values(rows) == ["d0", "k0"]
    AdminClient({"lakelog.root": root}).delete_topics(["dropped"])["dropped"].result()
    produce(root, "kept", [(0, "k1")])
    with pytest.raises(Exception, match="UnknownTopicOrPartition.*dropped was deleted"):
        collect(spark, stream(spark, root, subscribe="kept,dropped"), checkpoint)
    rows, _ = collect(spark, stream(spark, root, subscribe="kept,dropped", failOnDataLoss="false"), checkpoint)
    assert values(rows) == ["k1"]


def test_assign_reads_only_its_partitions_and_include_headers_false_drops_the_column(spark, root, tmp_path):
    create_topic(root, "t", 3)
    produce(root, "t", [(index % 3, f"v{index}") for index in range(9)])
    frame = stream(spark, root, assign=json.dumps({"t": [1]}), includeHeaders="false")
    assert frame.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows, _ = collect(spark, frame, tmp_path / "checkpoint")
    assert values(rows) == ["v1", "v4", "v7"]
    assert {row.partition for row in rows} == {1}


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"subscribe": "t", "topic": "t"}, "exactly one of the options subscribe, subscribePattern, assign or topic"),
        ({}, "exactly one of the options"),
        ({"subscribe": "t", "endingOffsets": "latest"}, r"unknown option\(s\) \['endingoffsets'\]"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be positive"),
        ({"subscribe": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
        ({"assign": '{"t": "0"}'}, "assign for t must be a list of partition numbers"),
        ({"subscribePattern": "("}, "is no regular expression"),
        ({"subscribe": "t", "startingOffsets": "[1]"}, "startingOffsets must be JSON like"),
    ],
)
def test_stream_options_are_checked_with_lakelog_errors(root, options, complaint):
    from lakelog.errors import InvalidConfig
    from pyspark_lakelog.stream_options import StreamReadOptions

    with pytest.raises(InvalidConfig, match=complaint):
        StreamReadOptions.parse({"root": root, **options})


def test_a_stream_write_needs_a_checkpoint_or_a_transactional_id(root, topic):
    from lakelog.errors import InvalidConfig
    from pyspark_lakelog.stream_options import stream_write_options

    name = topic()
    with pytest.raises(InvalidConfig, match="needs option checkpointLocation"):
        stream_write_options({"root": root, "topic": name})
    with pytest.raises(InvalidConfig, match="takes its batch.id from Spark"):
        stream_write_options({"root": root, "topic": name, "checkpointLocation": "c", "batch.id": "3"})
    derived = stream_write_options({"root": root, "topic": name, "checkpointLocation": "/q/c/", "queryName": "q"})
    assert derived.transactional_id == "spark-stream:file:///q/c"
    given = stream_write_options({"root": root, "topic": name, "checkpointLocation": "/q/c", "transactional.id": "mine"})
    assert given.transactional_id == "mine"
