"""The `lakelog` Python data source: topics, views and status tables as Spark tables; exactly-once writes.

Reads resolve their snapshot on the driver when the DataFrame is planned
(`lakelog.log.scan.plan_scan`) and ship each topic-partition's pinned snapshot
to the executors, one input partition per topic-partition (cut at file
boundaries into pieces of about `maxPartitionBytes`). Executors read through
`PartitionLog.fetch`, so LSO and aborted transactions are applied by the log's
own code. Views and status tables are read file by file
(`Table.read_data_file`). Every byte goes through lakelog's file IO
(`lakelog.store.io.fileio`), so this is also how Spark reads roots its own
Parquet reader cannot (S3 here: no hadoop-aws jars).

Writes stage Parquet files under `<root>/_spark_staging/<write>/` on the
executors, through the root's FileIO; the driver's commit appends them all as
one lakelog transaction (lakelog.jobs.batch_writer) and deletes the staging
folder. A folder a killed driver left behind is removed by the sweep
(lakelog.jobs.spark_staging).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from lakelog import catalog, config
from lakelog.errors import InvalidConfig, InvalidRequest, UnknownTopicOrPartition
from lakelog.jobs.spark_staging import SPARK_STAGING_DIR as STAGING_DIR
from lakelog.log.records import PAYLOAD_SCHEMA
from lakelog.log.scan import KAFKA_SCHEMA, PartitionScan
from lakelog.store import DataFile, FileIO, Location, PinnedSnapshot, Table
from lakelog.store.io.fileio import one_line
from pyspark_lakelog.options import DEFAULT_PARTITION_BYTES, ReadOptions, WriteOptions, write_partition_count

# What opening a piece of a partition costs a task, in bytes of reading: Spark's spark.sql.files.openCostInBytes.
OPEN_COST_BYTES = 4 << 20
# Tasks a read is packed into at least, wherever it has that many pieces (Spark's minimum is its default
# parallelism, which the data source cannot see): `minPartitions` sets it.
MIN_TASKS = 2
# Rows per lakelog batch (one Parquet file, one commit) when the driver appends staged rows.
WRITE_BATCH_RECORDS = 500_000
# Columns a write takes (Spark's Kafka sink's, plus a record timestamp); value is required. Any other column is
# ignored, as Spark's Kafka sink ignores it (KafkaWriter.validateQuery checks only these), so a DataFrame read from
# a topic (offset, timestampType) can be written back as it is.
WRITE_COLUMNS = ("key", "value", "topic", "partition", "headers", "timestamp")

logger = logging.getLogger(__name__)


class LakelogDataSource(DataSource):
    """`spark.read.format("lakelog")` / `df.write.format("lakelog")`; options in pyspark_lakelog.options."""

    @classmethod
    def name(cls) -> str:
        return "lakelog"

    def schema(self) -> StructType:
        values = {key.lower(): value for key, value in self.options.items()}
        if values.get("view") or values.get("status") or values.get("quality"):
            return from_arrow_schema(_table_reader(ReadOptions.parse(self.options)).arrow_schema)
        if str(values.get("includeheaders", "true")).lower() == "false":  # a stream's option (stream_options)
            return from_arrow_schema(KAFKA_SCHEMA.remove(KAFKA_SCHEMA.get_field_index("headers")))
        return from_arrow_schema(KAFKA_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = ReadOptions.parse(self.options)
        if options.kind == "topic":
            return TopicReader(options)
        return _table_reader(options)

    def writer(self, schema: StructType, overwrite: bool) -> TopicWriter:
        if overwrite:
            raise InvalidRequest("lakelog topics are append-only: write with mode('append')")
        return TopicWriter(WriteOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """`spark.readStream.format("lakelog")`: pyspark_lakelog.stream_source."""
        from pyspark_lakelog.stream_options import StreamReadOptions
        from pyspark_lakelog.stream_source import TopicStreamReader

        return TopicStreamReader(StreamReadOptions.parse(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """`df.writeStream.format("lakelog")`: pyspark_lakelog.stream_sink (append mode only)."""
        from pyspark_lakelog.stream_options import stream_write_options
        from pyspark_lakelog.stream_sink import TopicStreamWriter

        if overwrite:
            raise InvalidRequest("lakelog topics are append-only: write the stream with outputMode('append')")
        return TopicStreamWriter(stream_write_options(self.options), schema)


# -- reading -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanPartition(InputPartition):
    """One input partition: ranges of one or more topic-partitions' pinned snapshots, read in turn by one task."""

    scans: tuple[PartitionScan, ...]


class TopicReader(DataSourceReader):
    """Topic rows in the Kafka source's columns, read_committed or read_uncommitted.

    The plan is made in `partitions()`, not here: Spark pickles the reader into every task before it asks for
    the partitions, so a reader holding every partition's pinned snapshot would ship all of them to each task
    (a cost of partitions x tasks); each task gets only its own scans, in its input partition.
    """

    def __init__(self, options: ReadOptions) -> None:
        assert options.bounds is not None
        self.options = options

    def partitions(self) -> list[InputPartition]:
        options = self.options
        scans = options.plan()
        tasks = scan_tasks(scans, options.max_partition_bytes, options.min_partitions)
        return [ScanPartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ScanPartition)
        yield from read_scans(partition.scans)


def scan_tasks(
    scans: list[PartitionScan], max_partition_bytes: int, min_partitions: int | None = None
) -> list[tuple[PartitionScan, ...]]:
    """The scans cut at file boundaries into pieces of about `max_partition_bytes`, and the pieces packed into
    tasks as Spark packs files into its read tasks (FilePartition): each piece costs its bytes plus
    `OPEN_COST_BYTES`, and a task takes pieces in order up to `min(max_partition_bytes, max(OPEN_COST_BYTES,
    total / min_partitions))`. So small partitions share a task, while pieces of like size make at least
    `min_partitions` tasks (Kafka's source option, default MIN_TASKS) wherever there are that many. At least one
    task (Spark wants one): nothing to read is one task reading an empty range.
    """
    pieces = [piece for scan in scans if scan.end_offset > scan.start_offset for piece in scan.split(max_partition_bytes)]
    if not pieces:
        return [tuple(scans[:1])]
    tasks = pack([piece.size_bytes + OPEN_COST_BYTES for piece in pieces], max_partition_bytes, min_partitions or MIN_TASKS)
    return [tuple(pieces[i] for i in task) for task in tasks]


def pack(costs: list[int], max_bytes: int, wanted: int) -> list[range]:
    """Pieces of these costs packed in order into tasks (ranges of their indexes): a task takes pieces while it stays
    within `min(max_bytes, max(OPEN_COST_BYTES, sum(costs) / wanted))`, and always takes at least one."""
    limit = min(max_bytes, max(OPEN_COST_BYTES, sum(costs) // max(wanted, 1)))
    tasks: list[range] = []
    start, size = 0, 0
    for index, cost in enumerate(costs):
        if index > start and size + cost > limit:
            tasks.append(range(start, index))
            start, size = index, 0
        size += cost
    if costs:
        tasks.append(range(start, len(costs)))
    return tasks


def read_scans(scans: tuple[PartitionScan, ...]) -> Iterator[pa.RecordBatch]:
    """Planned scans' rows, one after another, in the Kafka source's columns (runs in Spark tasks)."""
    for scan in scans:
        yield from read_scan(scan)


def read_scan(scan: PartitionScan) -> Iterator[pa.RecordBatch]:
    """A planned scan's rows in the Kafka source's columns, read through the root's file IO (runs in Spark tasks)."""
    for rows in scan.read_kafka_rows():
        yield from rows.to_batches()


@dataclass(frozen=True)
class FilesPartition(InputPartition):
    entries: tuple[DataFile, ...]


def pin_files(table: Table) -> PinnedSnapshot:
    """The table's snapshot as a picklable PinnedSnapshot of its data files (tables of any schema)."""
    return PinnedSnapshot(
        table.location,
        version=table.version,
        table_id=table.table_id,
        files=tuple(table.data_files()),
        app_versions={},
        schema=table.schema,
        configuration=table.configuration,
    )


def file_groups(entries: list[DataFile], max_bytes: int) -> list[tuple[DataFile, ...]]:
    """Data files in order, grouped into runs of about `max_bytes` (by their sizes in the Delta log); at least one group."""
    groups: list[list[DataFile]] = [[]]
    size = 0
    for entry in entries:
        if groups[-1] and size >= max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(entry)
        size += entry.size_bytes
    return [tuple(group) for group in groups]


def read_files(snapshot: PinnedSnapshot, entries: tuple[DataFile, ...]) -> Iterator[pa.RecordBatch]:
    """Data files of a pinned snapshot in its schema, through the root's file IO (runs in Spark tasks)."""
    for entry in entries:
        yield from snapshot.read_data_file(entry).to_batches()


class TableReader(DataSourceReader):
    """The active files of one Delta snapshot (a materialized view or a status table)."""

    def __init__(self, snapshot: PinnedSnapshot, max_partition_bytes: int = DEFAULT_PARTITION_BYTES) -> None:
        self.snapshot = snapshot
        self.arrow_schema = snapshot.schema
        self.max_partition_bytes = max_partition_bytes

    def partitions(self) -> list[InputPartition]:
        return [FilesPartition(group) for group in file_groups(self.snapshot.data_files(), self.max_partition_bytes)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        yield from read_files(self.snapshot, partition.entries)


@dataclass(frozen=True)
class RowsPartition(InputPartition):
    """Rows decoded on the driver (the quality results), shipped to one task."""

    rows: pa.Table


class RowsReader(DataSourceReader):
    """Rows read on the driver, as one input partition: the quality results, the read_committed rows of the
    results log decoded to RESULTS_SCHEMA (a few per validation; a result of an open or aborted transaction is
    not among them, S11.2)."""

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows
        self.arrow_schema = rows.schema

    def partitions(self) -> list[InputPartition]:
        return [RowsPartition(self.rows)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RowsPartition)
        yield from partition.rows.to_batches()


def _table_reader(options: ReadOptions) -> TableReader | RowsReader:
    (topic,) = options.names
    if options.kind == "quality":
        return RowsReader(catalog.read_quality_results(options.root))
    if options.kind == "view":
        table = catalog.open_view(options.root, topic)
    else:
        table = catalog.open_status(options.root, topic)
    return TableReader(pin_files(table), options.max_partition_bytes)


# -- writing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StagedFiles(WriterCommitMessage):
    """What one task staged: (topic, partition, URI, records) per file, in row order."""

    files: tuple[tuple[str, int, str, int], ...]


class TopicWriter(DataSourceArrowWriter):
    """Executors stage rows per partition as Parquet; the driver commits all of them as one transaction."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        columns = set(schema.names)
        ignored = sorted(columns - set(WRITE_COLUMNS))
        if ignored:
            logger.debug("lakelog: columns %s are not written (a write takes %s)", ignored, ", ".join(WRITE_COLUMNS))
        if "value" not in columns:
            raise InvalidRequest("a lakelog write needs a value column")
        if options.topic is None and "topic" not in columns:
            raise InvalidConfig("set option topic, or give the DataFrame a topic column", key="topic")
        # Read once on the driver; with a topic column, executors look up the topics they meet.
        self.partition_counts = (
            {options.topic: write_partition_count(options.root, options.topic, options.auto_create)} if options.topic else {}
        )
        self.staging: Location = options.root / STAGING_DIR / uuid.uuid4().hex
        # The driver's producer config: keyless rows go where a Producer on the driver would send them, whatever
        # config defaults ($LAKELOG_CONF_DIR) an executor's environment has.
        self.partitioner: str = config.load("producer", {"lakelog.root": options.root})["partitioner"]

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFiles:
        partitioner = self.partitioner
        counts_by_topic = dict(self.partition_counts)

        def count_of(topic: str) -> int:
            if topic not in counts_by_topic:
                counts_by_topic[topic] = write_partition_count(self.options.root, topic, self.options.auto_create)
            return counts_by_topic[topic]

        io = self.staging.io
        io.make_dirs(self.staging.uri)
        writers: dict[tuple[str, int], tuple[str, pq.ParquetWriter]] = {}
        counts: dict[tuple[str, int], int] = {}
        order: list[tuple[str, int]] = []
        try:
            for batch in iterator:
                table = pa.Table.from_batches([batch])
                for (topic, partition), rows in _route(table, self.options.topic, count_of, partitioner):
                    key = (topic, partition)
                    if key not in writers:
                        uri = (self.staging / f"{uuid.uuid4().hex}.parquet").uri
                        writers[key] = (uri, _parquet_writer(io, uri))
                        counts[key] = 0
                        order.append(key)
                    writers[key][1].write_table(rows)
                    counts[key] += rows.num_rows
        finally:
            # Closed here, never by a destructor: on S3 the close completes the upload.
            for _, writer in writers.values():
                writer.close()
        return StagedFiles(tuple((*key, writers[key][0], counts[key]) for key in order))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from lakelog.jobs.batch_writer import TransactionalBatchWriter

        files: dict[tuple[str, int], list[str]] = {}
        for message in messages:
            if isinstance(message, StagedFiles):
                for topic, partition, uri, _ in message.files:
                    files.setdefault((topic, partition), []).append(uri)
        io = self.staging.io
        try:
            writer = TransactionalBatchWriter(
                self.options.root, self.options.transactional_id, transaction_timeout_ms=self.options.transaction_timeout_ms
            )
            # Gated topics are judged here, on the staged files, before the commit (S11.1-S11.3): this runs in a
            # Python worker without a SparkSession (pyspark.sql.worker.commit_data_source_write), so with pandas.
            unit = f"{self.options.transactional_id}:{self.options.batch_id}" if self.options.batch_id is not None else None
            staged = {tp: _staged_batches(io, uris) for tp, uris in files.items()}
            result = writer.write(staged, self.options.batch_id, unit=unit)
            if result.skipped:
                logger.warning(
                    "lakelog: batch %s of %s was committed before; this write wrote nothing",
                    self.options.batch_id,
                    self.options.transactional_id,
                )
        finally:
            _delete_staging(self.staging)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _delete_staging(self.staging)


def _parquet_writer(io: FileIO, uri: str) -> pq.ParquetWriter:
    """A streaming Parquet writer of payload rows to `uri` through the root's filesystem (S3: a multipart upload)."""
    return pq.ParquetWriter(io.path(uri), PAYLOAD_SCHEMA, filesystem=io.filesystem)


def _delete_staging(staging: Location) -> None:
    try:
        staging.io.delete_tree(staging.uri)
    except Exception as error:  # noqa: BLE001 - a staging folder left behind is only litter; the write stands
        logger.warning("lakelog: could not delete the staging folder %s: %s", staging.uri, one_line(error))


def _route(
    table: pa.Table, topic_option: str | None, count_of: Callable[[str], int], partitioner: str
) -> Iterator[tuple[tuple[str, int], pa.Table]]:
    """Split rows into (topic, partition) groups of payload columns, keeping each group's row order.

    A row goes to its `partition` column's partition if it has one, else where
    lakelog's Producer would send its key (the producer's `partitioner`).
    """
    from lakelog.client.partitioner import partition_for

    count = table.num_rows
    topics = [topic_option] * count if topic_option is not None else table.column("topic").to_pylist()
    keys = table.column("key").cast(pa.binary()).to_pylist() if "key" in table.column_names else [None] * count
    given = table.column("partition").to_pylist() if "partition" in table.column_names else [None] * count
    groups: dict[tuple[str, int], list[int]] = {}
    for index, (topic, key, partition) in enumerate(zip(topics, keys, given, strict=True)):
        if topic is None:
            raise InvalidRequest("a row has a null topic column and no topic option is set")
        total = count_of(topic)
        if partition is None:
            partition = partition_for(key, total, partitioner)
        elif not 0 <= partition < total:
            raise UnknownTopicOrPartition(f"topic {topic} has partitions 0-{total - 1}, not {partition}", topic=topic)
        groups.setdefault((topic, partition), []).append(index)
    payload = pa.Table.from_arrays([_column(table, field.name, field.type) for field in PAYLOAD_SCHEMA], schema=PAYLOAD_SCHEMA)
    for target, indices in groups.items():
        yield target, payload.take(pa.array(indices, pa.int64()))


def _column(table: pa.Table, name: str, type_: pa.DataType) -> pa.ChunkedArray | pa.Array:
    if name not in table.column_names:
        return pa.nulls(table.num_rows, type_)
    column = table.column(name)
    if name == "timestamp" and pa.types.is_timestamp(column.type):
        return pc.cast(column, type_)
    return column.cast(type_)


def _staged_batches(io: FileIO, uris: list[str]) -> Iterator[pa.Table]:
    for uri in uris:
        with io.open_input(uri) as source, pq.ParquetFile(source) as staged:
            for batch in staged.iter_batches(batch_size=WRITE_BATCH_RECORDS):
                yield pa.Table.from_batches([batch], schema=PAYLOAD_SCHEMA)


__all__ = [
    "LakelogDataSource",
    "TableReader",
    "TopicReader",
    "TopicWriter",
    "file_groups",
    "pin_files",
    "read_files",
    "read_scan",
    "pack",
    "read_scans",
    "scan_tasks",
]
