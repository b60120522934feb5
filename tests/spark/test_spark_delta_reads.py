"""Spark-native reads: with Delta's connector in the session, `read_topic`, `read` and the jobs read partitions,
views and status tables through Delta's reader, pinned to the snapshot version lakelog planned on, and apply
read_committed as the data source does (the LSO cut, the aborted-transaction filter, S5.2/S5.3); on S3 roots through
S3A. Without it (forced here with `through_delta=False`), the same rows come from the paths without Delta.
"""

from __future__ import annotations

import random
import re

import pytest
from spark_histories import fetch_rows, random_history, spark_rows

from lakelog import AdminClient, TopicPartition
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, open_partition, payload_table
from lakelog.log.scan import plan_scan
from lakelog.store import Location
from pipelines.materialize_committed_view import materialize_committed_view
from pipelines.partition_status import partition_status
from pyspark_lakelog import read, read_table, read_topic, reads_through_delta, scan_dataframe

pytestmark = [pytest.mark.spark, pytest.mark.roots("local", "s3")]


def plan_of(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


def table_rows(frame) -> list[str]:
    return sorted(repr(tuple(row)) for row in frame.collect())


def source(spark, root, **options):
    return spark.read.format("lakelog").options(root=root, **options).load()


def test_S5_2_S5_3_topic_reads_go_through_deltas_reader_and_give_the_data_sources_rows(spark, root, root_kind):
    """Both isolation levels: read_topic and read(...) through Delta (a Delta file index in the plan, no Python
    tasks), the rows PartitionLog.fetch gives, and the same as format("lakelog") and the paths without Delta."""
    writer = random_history(root, "delta", random.Random(5), partitions=2, steps=30 if root_kind == "local" else 18)
    assert reads_through_delta(spark, Location.of(root))
    # The history has what the filter is for: an open transaction (the LSO cut) and aborted ones.
    assert writer.open and any(scan.aborted for scan in plan_scan(root, "delta"))
    for isolation_level in (READ_COMMITTED, READ_UNCOMMITTED):
        expected = fetch_rows(root, "delta", isolation_level)
        frame = read_topic(spark, root, "delta", isolation_level)
        plan = plan_of(frame)
        assert "DeltaFileIndex" in plan and "MapInArrow" not in plan, plan
        assert spark_rows(frame) == expected, isolation_level
        options = {"topic": "delta", "isolation.level": isolation_level}
        assert spark_rows(read(spark, root=root, **options)) == expected
        assert spark_rows(source(spark, root, **options)) == expected
        scans = plan_scan(root, "delta", isolation_level)
        without = scan_dataframe(spark, scans, through_delta=False)
        assert "DeltaFileIndex" not in plan_of(without)
        assert spark_rows(without) == expected
    # Many aborted transactions become an anti-join; the same rows through Delta.
    scans = plan_scan(root, "delta")
    assert spark_rows(scan_dataframe(spark, scans, max_inline_aborted=0)) == fetch_rows(root, "delta", READ_COMMITTED)


OFFSET_PREDICATE = re.compile(r"offset#\d+L? (>=|<) ")


def test_S5_2_a_whole_partition_is_read_without_offset_predicates_and_a_range_with_its_bounds(spark, root):
    """A read from the log start to the LSO (=LEO, no open transaction) filters no offsets: every file of the
    snapshot is inside the range, and a predicate would only cost Delta's file skipping and a check per row. A
    read of a range keeps the bound that cuts a file, and gives that range's rows."""
    writer = random_history(root, "whole", random.Random(3), partitions=1, steps=0)
    for _ in range(4):
        writer.plain_batch(0)
    whole = read_topic(spark, root, "whole")
    assert not OFFSET_PREDICATE.search(plan_of(whole)), plan_of(whole)
    assert spark_rows(whole) == fetch_rows(root, "whole", READ_COMMITTED)
    end = open_partition(root, "whole", 0).log_end_offset()
    middle = read_topic(spark, root, "whole", starting_offsets={0: 1}, ending_offsets={0: end - 1})
    assert {match.group(1) for match in OFFSET_PREDICATE.finditer(plan_of(middle))} == {">=", "<"}
    assert sorted(row.offset for row in middle.collect()) == list(range(1, end - 1))


def test_S5_2_a_planned_read_is_pinned_to_the_planned_version(spark, root):
    """Rows deleted (delete-records) after the plan was made are still read: the plan's version, not the latest.
    Without `versionAsOf`, the read would miss the files the deletion removed."""
    writer = random_history(root, "pinned", random.Random(9), partitions=1, steps=0)
    for _ in range(4):
        writer.plain_batch(0)
    expected = fetch_rows(root, "pinned", READ_COMMITTED)
    scans = plan_scan(root, "pinned")
    planned = scans[0].snapshot.version
    admin = AdminClient({"lakelog.root": root})
    high = open_partition(root, "pinned", 0).high_watermark()
    for future in admin.delete_records([TopicPartition("pinned", 0, high)]).values():
        future.result()
    log = open_partition(root, "pinned", 0)
    assert log.table.version > planned and not log.table.data_files(), "delete-records removed no file"
    assert spark_rows(scan_dataframe(spark, scans)) == expected
    assert read_topic(spark, root, "pinned").count() == 0


def test_jobs_and_read_give_views_and_status_tables_through_delta(spark, root):
    """The view job reads the topic through Delta; read_table and read(view=, status=) read the view and the
    status table through Delta at the table's version, with format("lakelog")'s rows."""
    writer = random_history(root, "jobs", random.Random(3), partitions=2, steps=16)
    for producer_id in sorted(writer.open):
        writer.end(producer_id, commit=True)
    materialize_committed_view(spark, root, "jobs")
    partition_status(spark, root, "jobs")
    for kind in ("view", "status"):
        expected = table_rows(source(spark, root, **{kind: "jobs"}))
        frame = read(spark, root=root, **{kind: "jobs"})
        assert "DeltaFileIndex" in plan_of(frame), kind
        assert table_rows(frame) == expected, kind
    view = spark_rows(read(spark, root=root, view="jobs"))
    assert view == fetch_rows(root, "jobs", READ_COMMITTED)
    from lakelog import catalog

    table = catalog.open_view(root, "jobs")
    assert table_rows(read_table(spark, table, through_delta=False)) == table_rows(read_table(spark, table))


def test_S5_2_S5_3_many_small_partitions_share_tasks_and_a_large_one_stays_a_delta_read(spark, root, root_kind):
    """Past MAX_SEPARATE_READS partitions, the small ones are read together by packed tasks (one MapInArrow, a few
    tasks, not one Delta read each), a partition above SMALL_SCAN_BYTES by Delta's reader; the rows are the ones
    PartitionLog.fetch gives at both isolation levels: the LSO cut and the aborted transactions hold on both paths."""
    from pyspark_lakelog.frames import MAX_SEPARATE_READS, SMALL_SCAN_BYTES

    partitions = 2 * MAX_SEPARATE_READS
    writer = random_history(root, "many", random.Random(11), partitions=partitions, steps=40 if root_kind == "local" else 24)
    for partition in range(partitions):
        writer.plain_batch(partition)  # every partition has rows to read
    assert writer.open and any(scan.aborted for scan in plan_scan(root, "many"))
    big = random.Random(1).randbytes(SMALL_SCAN_BYTES // 4)
    # Incompressible, to a partition no open transaction cuts: its files pass SMALL_SCAN_BYTES below the LSO too.
    large = next(p for p in range(partitions) if not any(p in written for written in writer.open.values()))
    writer.logs[large].append(payload_table([big] * 5))
    for isolation_level in (READ_COMMITTED, READ_UNCOMMITTED):
        scans = plan_scan(root, "many", isolation_level)
        assert sum(scan.end_offset > scan.start_offset for scan in scans) > MAX_SEPARATE_READS  # past the threshold
        assert [scan.partition for scan in scans if scan.size_bytes >= SMALL_SCAN_BYTES] == [large]
        frame = read_topic(spark, root, "many", isolation_level)
        plan = plan_of(frame)
        assert plan.count("MapInArrow") == 1 and "DeltaFileIndex" in plan, plan
        assert frame.rdd.getNumPartitions() < partitions, "small partitions were read one task each"
        assert spark_rows(frame) == fetch_rows(root, "many", isolation_level), isolation_level
