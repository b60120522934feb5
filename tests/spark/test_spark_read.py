"""Spark reads topics exactly as lakelog's readers do (S4.8, S5.2, S5.4), through both Spark paths.

Each history mixes committed, aborted and still-open transactions of several
producers over several partitions, plain batches and markers. The `lakelog`
data source and `read_topic` (Spark's Parquet reader plus the plan as a filter
on local roots; Spark tasks reading through lakelog's file IO on S3 roots)
must return exactly the rows the Consumer returns, at both isolation levels,
and exactly what PartitionLog.fetch returns for any offset range. Every test
runs on a local root and on an S3 root (the emulator).
"""

from __future__ import annotations

import json
import random

import pytest
from spark_histories import (
    consumer_rows,
    fetch_rows,
    random_history,
    spark_rows,
    without_timestamps,
)

from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, create_topic, open_partition
from lakelog.log.partition_file import PARTITION_ORDER
from lakelog.log.scan import plan_scan
from lakelog.store import Location
from lakelog.store.upkeep.maintenance import compact
from pyspark_lakelog import read_topic, reads_natively, scan_dataframe

pytestmark = [pytest.mark.spark, pytest.mark.roots("local", "s3")]

SEEDS = (1, 2, 3)


def load(spark, root, topic, **options):
    reader = spark.read.format("lakelog").option("root", root).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.parametrize("seed", SEEDS)
def test_S5_2_random_histories_spark_reads_what_the_consumer_reads(spark, root, root_kind, seed):
    """Both isolation levels, both Spark paths, against the Consumer and against PartitionLog.fetch.

    On S3 roots the histories are shorter (each step is a commit or two on the emulator)."""
    rng = random.Random(seed)
    topic = f"history-{seed}"
    writer = random_history(root, topic, rng, partitions=3, steps=45 if root_kind == "local" else 25)
    if seed % 2:
        # Compaction merges files (transactions then span files); offsets and rows stay the same.
        for log in writer.logs:
            compact(log.table, PARTITION_ORDER, fan_in=2)
    for isolation_level in (READ_COMMITTED, READ_UNCOMMITTED):
        expected = fetch_rows(root, topic, isolation_level)
        assert without_timestamps(expected) == consumer_rows(root, topic, isolation_level)
        source = spark_rows(load(spark, root, topic, **{"isolation.level": isolation_level}))
        frame = spark_rows(read_topic(spark, root, topic, isolation_level))
        assert source == expected, isolation_level
        assert frame == expected, isolation_level
    committed = fetch_rows(root, topic, READ_COMMITTED)
    uncommitted = fetch_rows(root, topic, READ_UNCOMMITTED)
    assert set(committed) <= set(uncommitted)
    if writer.open:
        # Something is held back by the LSO in read_committed.
        assert len(committed) < len(uncommitted)


def test_S5_1_open_transaction_holds_every_later_row_back(spark, root):
    """Rows after the first offset of an open transaction are not read_committed yet, even committed ones."""
    writer = random_history(root, "held", random.Random(9), partitions=1, steps=0)
    writer.transactional_batch(11, 0, rows=2)
    writer.end(11, commit=True)
    writer.transactional_batch(12, 0, rows=3)  # stays open
    writer.transactional_batch(13, 0, rows=2)
    writer.end(13, commit=True)
    writer.plain_batch(0)
    rows = spark_rows(load(spark, root, "held"))
    assert [row[1] for row in rows] == [0, 1]
    writer.end(12, commit=False)
    rows = spark_rows(load(spark, root, "held"))
    assert [row[3] for row in rows] == [value for *_, value, _h in consumer_rows(root, "held", READ_COMMITTED)]
    assert not any(row[3].startswith(b"p12") for row in rows)
    assert any(row[3].startswith(b"p13") for row in rows)


def test_offset_ranges_follow_sparks_kafka_source(spark, root):
    """startingOffsets / endingOffsets JSON per partition (-2 earliest, -1 latest) read exactly fetch's rows."""
    random_history(root, "ranges", random.Random(5), partitions=3, steps=60)
    his = [open_partition(root, "ranges", p) for p in range(3)]
    lso = [log.last_stable_offset() for log in his]
    start = {0: min(3, lso[0]), 1: 0, 2: max(lso[2] - 4, 0)}
    end = {0: lso[0], 1: min(5, lso[1]), 2: lso[2]}
    options = {
        "startingOffsets": json.dumps({"ranges": {"0": start[0], "1": -2, "2": start[2]}}),
        "endingOffsets": json.dumps({"ranges": {"0": -1, "1": end[1], "2": -1}}),
    }
    expected = fetch_rows(root, "ranges", READ_COMMITTED, start, end)
    assert spark_rows(load(spark, root, "ranges", **options)) == expected
    scans = plan_scan(root, "ranges", READ_COMMITTED, start, {0: -1, 1: end[1], 2: -1})
    assert spark_rows(scan_dataframe(spark, scans)) == expected


def test_large_partitions_are_split_by_file_and_many_aborts_become_a_join(spark, root):
    """Input partitions cut at file boundaries, and the anti-join path for aborted ranges, read the same rows."""
    writer = random_history(root, "split", random.Random(7), partitions=2, steps=0)
    for n in range(12):
        producer_id = 11 + n % 3
        writer.transactional_batch(producer_id, n % 2, rows=3)
        writer.plain_batch(n % 2)
        writer.end(producer_id, commit=n % 3 != 0)
    expected = fetch_rows(root, "split", READ_COMMITTED)
    scans = plan_scan(root, "split")
    assert sum(len(scan.aborted) for scan in scans) == 4
    assert len(scans[0].split(1)) == len(scans[0].files)
    piece = max(scan.size_bytes for scan in scans) // 3
    pieces = [split for scan in scans for split in scan.split(piece)]
    assert len(pieces) >= 5
    for scan in scans:
        bounds = [(split.start_offset, split.end_offset) for split in scan.split(piece)]
        assert bounds[0][0] == scan.start_offset and bounds[-1][1] == scan.end_offset
        assert all(before[1] == after[0] for before, after in zip(bounds, bounds[1:], strict=False))
    frame = load(spark, root, "split", maxPartitionBytes=str(piece))
    assert frame.rdd.getNumPartitions() == len(pieces)
    assert spark_rows(frame) == expected
    assert spark_rows(scan_dataframe(spark, scans, max_inline_aborted=0)) == expected


def test_several_topics_and_empty_ones(spark, root):
    """A comma-separated topic list reads each topic; an empty topic reads no rows."""
    random_history(root, "one", random.Random(11), partitions=2, steps=20)
    create_topic(root, "empty", 2)
    both = spark_rows(load(spark, root, "one,empty"))
    assert both == fetch_rows(root, "one", READ_COMMITTED)
    assert load(spark, root, "empty").count() == 0
    assert read_topic(spark, root, "empty").count() == 0
    assert load(spark, root, "one").schema.simpleString() == read_topic(spark, root, "one").schema.simpleString()


def test_the_schema_is_sparks_kafka_source_schema(spark, root):
    """Column names and types as Spark's own Kafka source gives them, so Kafka jobs port by changing the format."""
    create_topic(root, "schema", 1)
    kafka_source = (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert load(spark, root, "schema").schema.simpleString() == kafka_source
    assert read_topic(spark, root, "schema").schema.simpleString() == kafka_source


def test_each_root_kind_is_read_by_its_own_path(spark, root, root_kind):
    """read_topic: Delta's reader on both roots where the session has Delta's connector (S3 through S3A). Without
    it (`through_delta=False`, as in a session without lakelog's jars): Spark's Parquet reader on local roots (a
    FileScan in the plan), Spark tasks reading through lakelog's file IO on S3 roots (MapInArrow). The data source
    is the Python data source on both."""
    random_history(root, "paths", random.Random(13), partitions=2, steps=6)
    assert reads_natively(Location.of(root)) == (root_kind == "local")
    plan = read_topic(spark, root, "paths")._jdf.queryExecution().executedPlan().toString()
    assert "DeltaFileIndex" in plan and "MapInArrow" not in plan, plan
    without = scan_dataframe(spark, plan_scan(root, "paths"), through_delta=False)
    plan = without._jdf.queryExecution().executedPlan().toString()
    if root_kind == "local":
        assert "FileScan parquet" in plan and "MapInArrow" not in plan and "DeltaFileIndex" not in plan, plan
    else:
        assert "MapInArrow" in plan and "FileScan" not in plan, plan
    source = load(spark, root, "paths")._jdf.queryExecution().executedPlan().toString()
    assert "BatchScan" in source and "FileScan" not in source, source


def test_S11_2_quality_results_are_the_results_logs_read_committed_rows(spark, root):
    """`quality=results` reads the results log __quality_results read_committed, decoded (issue 13 item 3): a
    result appended in a transaction that aborted is not read (S11.2), results recorded outside one are."""
    from lakelog.log import BatchHeader, ControlType
    from lakelog.log.verification import _UNVERIFIED
    from lakelog.quality import open_results_log, record_result, result_payload
    from lakelog.quality.validate import ValidationResult

    passed = ValidationResult("orders.suite", "orders", "enforce", True, 3, {"evaluated_expectations": 1}, (), {})
    record_result(root, passed, load_unit="u1", now_ms=1_000)
    log = open_results_log(root)
    log.append(
        result_payload(passed, validation_id="ghost", load_unit="ghost", now_ms=1_500),
        BatchHeader(31, 0, 0, is_transactional=True),
        transaction=_UNVERIFIED,
    )
    log.append_marker(31, 1, ControlType.ABORT)
    record_result(root, passed, load_unit="u2", now_ms=2_000)
    frame = load_quality(spark, root)
    assert "validation_id" in frame.columns and "offset_ranges" in frame.columns
    units = sorted(row.load_unit for row in frame.collect())
    assert units == ["u1", "u2"]


def load_quality(spark, root):
    return spark.read.format("lakelog").option("root", root).option("quality", "results").load()
