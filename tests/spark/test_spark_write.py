"""Exactly-once writes from Spark: one lakelog transaction per write, a retried batch is written once (S4.5, S4.8).

`df.write.format("lakelog")` stages rows on the executors and the driver appends
them as one transaction of the `transactional.id`; the transaction also records
`batch.id` in `__sink_batches`, so a retry of a committed batch writes nothing,
and a retry of a batch whose writer died mid-transaction writes it once.
"""

from __future__ import annotations

import multiprocessing
import signal

import pytest
from spark_histories import consumer_rows
from spark_workers import write_then_die

from lakelog.client.partitioner import partition_for
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.jobs.batch_writer import TransactionalBatchWriter
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, create_topic, open_partition

pytestmark = [pytest.mark.spark, pytest.mark.roots("local", "s3")]


def frame(spark, start: int, count: int, **columns):
    from pyspark.sql import functions as F

    frame = spark.range(start, start + count).select(
        F.concat(F.lit("k"), (F.col("id") % 13).cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
    )
    for name, column in columns.items():
        frame = frame.withColumn(name, column)
    return frame.repartition(3)


def write(data, root, topic, transactional_id, batch_id=None, **options):
    writer = data.write.format("lakelog").mode("append").option("root", root).option("topic", topic)
    writer = writer.option("transactional.id", transactional_id)
    if batch_id is not None:
        writer = writer.option("batch.id", str(batch_id))
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def values(root, topic, isolation_level=READ_COMMITTED):
    return sorted(row[3] for row in consumer_rows(root, topic, isolation_level))


def test_a_retried_batch_is_written_once(spark, root):
    """batch.id 0 twice, then 1, then 0 again: each batch's rows are in the topic exactly once."""
    create_topic(root, "out", 3)
    first = frame(spark, 0, 300)
    write(first, root, "out", "job-a", 0)
    write(first, root, "out", "job-a", 0)
    assert values(root, "out") == sorted(f"v{n}".encode() for n in range(300))
    write(frame(spark, 300, 200), root, "out", "job-a", 1)
    write(first, root, "out", "job-a", 0)
    assert values(root, "out") == sorted(f"v{n}".encode() for n in range(500))
    # Nothing was written twice even uncommitted: the skipped writes appended nothing at all.
    assert values(root, "out", READ_UNCOMMITTED) == values(root, "out")
    # Another transactional id is another writer: its batch 0 is its own.
    write(frame(spark, 500, 10), root, "out", "job-b", 0)
    assert len(values(root, "out")) == 510


def test_one_write_is_one_transaction_over_every_partition(spark, root):
    """Every partition's rows carry the same producer id and epoch and are closed by one COMMIT marker each;
    keyed rows land where the Producer would put them, a partition column is obeyed."""
    from pyspark.sql import functions as F

    create_topic(root, "atomic", 4)
    write(frame(spark, 0, 400), root, "atomic", "job-atomic", 0)
    write(frame(spark, 400, 40, partition=F.lit(2)), root, "atomic", "job-atomic", 1)
    identities, markers = set(), 0
    for partition in range(4):
        rows = open_partition(root, "atomic", partition).fetch(0, max_records=10_000).rows.to_pylist()
        data = [row for row in rows if row["control"] is None]
        markers += sum(row["control"] == "COMMIT" for row in rows)
        identities |= {(row["producer_id"], row["producer_epoch"], row["is_transactional"]) for row in data}
        for row in data:
            number = int(row["value"][1:])
            expected = 2 if number >= 400 else partition_for(row["key"], 4, "consistent_random")
            assert partition == expected, row
    assert markers == 4 + 1
    producer_ids = {producer_id for producer_id, _, _ in identities}
    assert len(producer_ids) == 1 and all(transactional for _, _, transactional in identities)
    described = TransactionCoordinator(root).describe("job-atomic")
    assert described.state.value == "CompleteCommit"


def test_a_writer_killed_mid_transaction_is_aborted_and_its_batch_written_once_by_the_retry(spark, root):
    """The writer of batch 3 is SIGKILLed with rows in the open transaction: the retry's init aborts them
    (S4.2), finds batch 3 not committed, and writes it; a second retry writes nothing."""
    create_topic(root, "crash", 2)
    TransactionalBatchWriter(root, "job-crash").write({}, 2)
    payload = [f"v{n}".encode() for n in range(50)]
    child = multiprocessing.get_context("spawn").Process(target=write_then_die, args=(root, "crash", "job-crash", 3, payload))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    left = open_partition(root, "crash", 0)
    assert left.high_watermark() == 50 and left.last_stable_offset() == 0
    retry = frame(spark, 0, 50).selectExpr("key", "value", "pmod(hash(value), 2) AS partition")
    write(retry, root, "crash", "job-crash", 3)
    write(retry, root, "crash", "job-crash", 3)
    assert values(root, "crash") == sorted(f"v{n}".encode() for n in range(50))
    # The killed attempt's 50 rows are in the log, aborted: read_uncommitted sees them, read_committed never.
    assert len(values(root, "crash", READ_UNCOMMITTED)) == 100
    assert TransactionalBatchWriter(root, "job-crash").last_committed_batch() == 3


def test_bad_write_options_fail_with_lakelog_errors(spark, root, tmp_path):
    create_topic(root, "t", 1)
    data = frame(spark, 0, 5)
    cases = [
        ({}, "InvalidConfig: lakelog writes are transactional: set option transactional.id"),
        (dict(**{"transactional.id": "x", "batch.id": "-1"}), "InvalidConfig: option batch.id must not be negative"),
        (
            dict(**{"transactional.id": "x", "topic": "missing", "allow.auto.create.topics": "false"}),
            "UnknownTopicOrPartition: topic missing does not exist",
        ),
        (
            dict(**{"transactional.id": "x", "allow.auto.create.topics": "maybe"}),
            "InvalidConfig: option allow.auto.create.topics",
        ),
        (dict(**{"transactional.id": "x", "root": str(tmp_path / "nowhere")}), "InvalidConfig: lakelog root"),
    ]
    for options, message in cases:
        writer = data.write.format("lakelog").mode("append").option("root", root).option("topic", "t")
        for key, value in options.items():
            writer = writer.option(key, value)
        with pytest.raises(Exception) as caught:
            writer.save()
        assert message in str(caught.value), str(caught.value)
    with pytest.raises(Exception, match="InvalidRequest: lakelog topics are append-only"):
        data.write.format("lakelog").mode("overwrite").option("root", root).option("topic", "t").option(
            "transactional.id", "x"
        ).save()
    assert values(root, "t", READ_UNCOMMITTED) == []


def test_a_topic_read_is_written_back_as_it_is_into_a_topic_created_on_first_write(spark, root):
    """As the Producer, a write creates its missing topic (allow.auto.create.topics, the root's
    auto.create.topics.enable; the root's num.partitions); as Spark's Kafka sink, columns a write does not take
    (offset, timestampType) are ignored, and the read's key, value, headers and timestamp are written."""
    create_topic(root, "source", 1)
    write(frame(spark, 0, 20), root, "source", "job-source")
    read = spark.read.format("lakelog").option("root", root).option("topic", "source").load()
    assert {"offset", "timestampType"} <= set(read.columns)
    write(read, root, "copy", "job-copy", 0)
    source, copy = consumer_rows(root, "source", READ_COMMITTED), consumer_rows(root, "copy", READ_COMMITTED)
    assert len(copy) == 20 and open_partition(root, "copy", 0).config.num_partitions == 1
    assert sorted(row[2:] for row in copy) == sorted(row[2:] for row in source)
