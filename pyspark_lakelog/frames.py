"""Large scans as plain Spark DataFrames: the scan plan read by Delta's reader, or its files by Spark's Parquet reader.

The same plan as the `lakelog` data source (`plan_scan`: the snapshot, the
offsets [start, end) cut at the LSO, the aborted transactions of the range),
read with `spark.read.parquet` and the plan turned into a filter: data rows
only, offsets in the range, and no row of an aborted transaction (a
transactional row of producer P at an offset in [first offset, marker offset)
of one of P's aborted transactions, S5.3). It stays in the JVM, where the
Python data source ships every row from Python workers to it. On 4 M records
(bench/spark_scan.py, since a planned read no longer folds the whole
partition per task) the two are close: against a plain `spark.read.parquet`
of the same files, this path took 1.26 (JSON values) and 1.34 (random values)
of the time and 1.28 / 1.14 of the CPU, the data source 1.14 / 1.37 of the
time and 1.23 / 1.30 of the CPU. Jobs (pipelines/) read this way, for the
lower CPU on incompressible values; the data source serves SQL and small
reads. Both return the same rows (tests/spark).

Where the session has Delta Lake's Spark connector (lakelog's JVM jars;
pyspark_lakelog.delta_reads), each partition is read by Delta's reader pinned
to the planned snapshot (`versionAsOf`), on local roots and, through S3A, on S3
roots, with the same filter: Delta's data skipping on the offset range does
the plan's file pruning. Without it, local roots (`reads_natively`) are read
by Spark's Parquet reader from the plan's file list, and other roots by Spark
tasks through lakelog's file IO, with the data source's own reader code
(`read_scans`, `read_files`: one task per piece of about `maxPartitionBytes`, small partitions sharing one,
Arrow batches out, as `mapInArrow` returns them). The DataFrame is the same
every way.

`spark.read.format("lakelog")` stays lakelog's Python data source: a Python
data source yields Arrow batches from Python workers and cannot hand its scan
to a JVM reader. `read(spark, **options)` takes the data source's read options
and builds the same DataFrame from Delta's reads.

Each topic-partition is one Parquet scan with its partition number as a
literal, and the scans are unioned: deriving the partition from each row's file
path (`_metadata.file_path`) costs more than the whole scan.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakelog import catalog
from lakelog.log import READ_COMMITTED
from lakelog.log.partition_file import partition_files
from lakelog.log.records import PARTITION_SCHEMA
from lakelog.log.scan import EARLIEST, KAFKA_SCHEMA, LATEST, TIMESTAMP_TYPE_CREATE_TIME, OffsetSpec, PartitionScan, plan_scan
from lakelog.store import Location, Table
from pyspark_lakelog.delta_reads import read_delta, reads_through_delta
from pyspark_lakelog.options import DEFAULT_PARTITION_BYTES, ReadOptions
from pyspark_lakelog.source import OPEN_COST_BYTES, file_groups, pin_files, read_files, read_scans, scan_tasks

# Past this many partitions in one read, the small ones (below SMALL_SCAN_BYTES of files) share tasks read through
# lakelog's file IO instead of one Delta read each: a Delta read costs a file index, a plan and a task per partition
# (a view refresh of 100 partitions of 5 records took 58 s that way, 14x its figure at 10; bench/spark_partitions.py).
MAX_SEPARATE_READS = 8
# A partition this small costs less to read than a task of its own costs to open (Spark's open cost, as packed).
SMALL_SCAN_BYTES = OPEN_COST_BYTES
# Up to this many aborted transactions per partition become an inline filter; more become a broadcast anti-join.
MAX_INLINE_ABORTED = 64
# Spark lists more than 32 paths with a Spark job of its own (one task per path): seconds for nothing here.
_LISTING_CONF = "spark.sql.sources.parallelPartitionDiscovery.threshold"
# The plan prunes files itself; Parquet-level filtering on the offset filter cost up to 1.5x the scan (measured).
_PARQUET_OPTIONS = {
    "parquet.filter.dictionary.enabled": "false",
    "parquet.filter.columnindex.enabled": "false",
    "parquet.filter.stats.enabled": "false",
}
KAFKA_COLUMNS = KAFKA_SCHEMA.names

Task = TypeVar("Task")


def reads_natively(location: Location) -> bool:
    """Whether Spark's own Parquet reader can read files under `location` from a file list, in any session.

    Local roots only: Spark reads S3 through hadoop-aws's `s3a` filesystem, whose
    jars come from Maven and are not in pyspark's (a session with them reads S3
    through Delta's reader: `reads_through_delta`). Jobs write through Spark here.
    """
    return location.is_local


def read_topic(
    spark: SparkSession,
    root: str | Location,
    topic: str,
    isolation_level: str = READ_COMMITTED,
    starting_offsets: OffsetSpec = EARLIEST,
    ending_offsets: OffsetSpec = LATEST,
    through_delta: bool | None = None,
) -> DataFrame:
    """A topic in Spark's Kafka-source columns, as `spark.read.format("lakelog")` reads it, for large scans
    (`through_delta` as `scan_dataframe` takes it: None uses Delta's reader where the session has it)."""
    scans = plan_scan(root, topic, isolation_level, starting_offsets, ending_offsets)
    return scan_dataframe(spark, scans, through_delta=through_delta)


def read(spark: SparkSession, options: Mapping[str, str] | None = None, **more: str) -> DataFrame:
    """What `spark.read.format("lakelog").options(...).load()` reads, with the same options, as a DataFrame built
    from Delta's reads where the session has Delta's connector (a topic read_committed or read_uncommitted, a view,
    a status table); the data source itself where it has not, and for `quality`."""
    given = {**(options or {}), **more}
    parsed = ReadOptions.parse(given)
    if parsed.kind == "quality" or not reads_through_delta(spark, parsed.root):
        return spark.read.format("lakelog").options(**given).load()
    if parsed.kind in ("view", "status"):
        (name,) = parsed.names
        table = catalog.open_view(parsed.root, name) if parsed.kind == "view" else catalog.open_status(parsed.root, name)
        return read_table(spark, table, parsed.max_partition_bytes)
    scans = parsed.plan()
    return scan_dataframe(spark, scans, max_partition_bytes=parsed.max_partition_bytes)


def scan_dataframe(
    spark: SparkSession,
    scans: list[PartitionScan],
    max_inline_aborted: int = MAX_INLINE_ABORTED,
    max_partition_bytes: int = DEFAULT_PARTITION_BYTES,
    through_delta: bool | None = None,
) -> DataFrame:
    """The rows of planned partition scans, in the Kafka source's columns.

    Through Delta's reader at each scan's snapshot version where the session has it (`through_delta`: None asks the
    session, False forces the paths without it), else through Spark's Parquet reader where it reads the root
    natively, else by Spark tasks through lakelog's file IO (pieces of about `max_partition_bytes`). A read of more
    than MAX_SEPARATE_READS partitions reads its small ones by file IO tasks whatever the session, packed together.
    """
    scans = [scan for scan in scans if scan.end_offset > scan.start_offset]
    if not scans:
        return spark.createDataFrame([], from_arrow_schema(KAFKA_SCHEMA))
    if through_delta is None:
        through_delta = all(reads_through_delta(spark, scan.snapshot.location) for scan in scans)
    if not through_delta and not all(reads_natively(scan.snapshot.location) for scan in scans):
        return arrow_tasks_frame(spark, scan_tasks(scans, max_partition_bytes), read_scans, KAFKA_SCHEMA)
    frames: list[DataFrame] = []
    if len(scans) > MAX_SEPARATE_READS:
        # Each scan's size once: it sums the scan's files of its snapshot.
        is_small = [scan.size_bytes < SMALL_SCAN_BYTES for scan in scans]
        small = [scan for scan, flag in zip(scans, is_small, strict=True) if flag]
        if len(small) > 1:
            # The same plan, the same rows: read_scans applies the offset range and the aborted transactions (S5.2, S5.3).
            frames.append(arrow_tasks_frame(spark, scan_tasks(small, max_partition_bytes), read_scans, KAFKA_SCHEMA))
            scans = [scan for scan, flag in zip(scans, is_small, strict=True) if not flag]
    frames += [_partition_frame(spark, scan, max_inline_aborted, through_delta) for scan in scans]
    return functools.reduce(DataFrame.unionByName, frames)


def read_table(
    spark: SparkSession, table: Table, max_partition_bytes: int = DEFAULT_PARTITION_BYTES, through_delta: bool | None = None
) -> DataFrame:
    """A Delta snapshot (a view or a status table) at the table's version: Delta's reader, Spark's Parquet reader
    of its active files, or file IO tasks (as `scan_dataframe` chooses)."""
    schema = from_arrow_schema(table.schema)
    if through_delta is None:
        through_delta = reads_through_delta(spark, table.location)
    if through_delta:
        return read_delta(spark, table.location, table.version)
    if not reads_natively(table.location):
        snapshot = pin_files(table)
        if not snapshot.data_files():
            return spark.createDataFrame([], schema)
        groups = file_groups(snapshot.data_files(), max_partition_bytes)
        return arrow_tasks_frame(spark, groups, functools.partial(read_files, snapshot), table.schema)
    paths = table.data_paths()
    if not paths:
        return spark.createDataFrame([], schema)
    with _no_listing_job(spark):
        return spark.read.schema(schema).parquet(*paths)


def arrow_tasks_frame(
    spark: SparkSession,
    tasks: Sequence[Task],
    read: Callable[[Task], Iterator[pa.RecordBatch]],
    schema: pa.Schema,
) -> DataFrame:
    """A DataFrame of `read(task)` for every task, one Spark task each, in Arrow batches of `schema`.

    The tasks travel with the function (pickled, as the data source's input
    partitions do); the rows go from the Python workers to the JVM as Arrow.
    """
    tasks = list(tasks)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                for rows in read(tasks[index]):
                    yield rows.cast(schema) if rows.schema != schema else rows

    return spark.range(0, len(tasks), 1, numPartitions=max(1, len(tasks))).mapInArrow(run, from_arrow_schema(schema))


def _partition_frame(spark: SparkSession, scan: PartitionScan, max_inline_aborted: int, through_delta: bool) -> DataFrame:
    if through_delta:
        # The planned snapshot, not the latest: the LSO and the aborted transactions below are that snapshot's.
        rows = read_delta(spark, scan.snapshot.location, scan.snapshot.version, _PARQUET_OPTIONS)
    else:
        paths = [scan.snapshot.file_path(entry) for entry in scan.files]
        with _no_listing_job(spark):
            rows = spark.read.options(**_PARQUET_OPTIONS).schema(from_arrow_schema(PARTITION_SCHEMA)).parquet(*paths)
    offset = F.col("offset")
    rows = rows.where(F.col("control").isNull() & _offset_range(scan))
    if scan.aborted and len(scan.aborted) <= max_inline_aborted:
        rows = rows.where(~(F.col("is_transactional") & _any_aborted(scan)))
    elif scan.aborted:
        ranges = spark.createDataFrame(
            [(txn.producer_id, txn.first_offset, txn.marker_offset) for txn in scan.aborted],
            "aborted_producer_id long, aborted_first_offset long, aborted_marker_offset long",
        )
        rows = rows.join(
            F.broadcast(ranges),
            (F.col("producer_id") == F.col("aborted_producer_id"))
            & F.col("is_transactional")
            & (offset >= F.col("aborted_first_offset"))
            & (offset < F.col("aborted_marker_offset")),
            "left_anti",
        )
    return rows.select(
        "key",
        "value",
        F.lit(scan.topic).alias("topic"),
        F.lit(scan.partition).cast("int").alias("partition"),
        "offset",
        "timestamp",
        F.lit(TIMESTAMP_TYPE_CREATE_TIME).cast("int").alias("timestampType"),
        "headers",
    )


def _offset_range(scan: PartitionScan) -> Column:
    """The scan's offset range as a filter, without the bounds every file of its snapshot already keeps.

    A read of a whole partition (the usual read: from the log start to the LSO, which is the LEO when no
    transaction is open) then has no offset predicate, which Delta's reader would otherwise check against each
    file's statistics and Spark against each row.
    """
    files = partition_files(scan.snapshot)
    offset = F.col("offset")
    bounds = F.lit(True)
    if any(entry.min_offset < scan.start_offset for entry in files):
        bounds = bounds & (offset >= scan.start_offset)
    if any(entry.max_offset >= scan.end_offset for entry in files):
        bounds = bounds & (offset < scan.end_offset)
    return bounds


def _any_aborted(scan: PartitionScan) -> Column:
    terms = [
        (F.col("producer_id") == txn.producer_id) & (F.col("offset") >= txn.first_offset) & (F.col("offset") < txn.marker_offset)
        for txn in scan.aborted
    ]
    # A balanced tree: a chain of many ORs is deep enough to strain the optimizer's recursion.
    while len(terms) > 1:
        terms = [terms[i] | terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


@contextlib.contextmanager
def _no_listing_job(spark: SparkSession) -> Iterator[None]:
    """Paths are listed when the DataFrame is made; list them in the driver, whatever their number."""
    previous = spark.conf.get(_LISTING_CONF, None)
    spark.conf.set(_LISTING_CONF, str(1 << 30))
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(_LISTING_CONF)
        else:
            spark.conf.set(_LISTING_CONF, previous)


__all__ = ["MAX_INLINE_ABORTED", "arrow_tasks_frame", "read", "read_table", "read_topic", "reads_natively", "scan_dataframe"]
