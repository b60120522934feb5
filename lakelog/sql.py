"""SQL over a root's committed data in DuckDB, the embedded default for queries that need no cluster.

Every topic is a table of its read_committed rows (up to each partition's LSO,
aborted transactions dropped) in the Kafka source's columns, read by the same
scan as Spark's (lakelog.log.scan, through PartitionLog.fetch). Each
materialized view is `<topic>_view` and each partition-status table
`<topic>_status`, and the quality gates' results `quality_results`, as in the
spark-sql init file (catalog.spark_sql_init). `offset` is a reserved word in
DuckDB: write `"offset"`.

A session is read-only over these tables and nothing else: DuckDB's external access is off and its configuration
locked before the query runs, so it reads no file by path (`read_text('/proc/self/environ')`, `read_parquet`),
writes none (`COPY ... TO`, `EXPORT DATABASE`), attaches no database, installs or loads no extension and changes no
setting; such a query is InvalidRequest. Tables are handed to DuckDB as Arrow sources read when a query scans
them: a topic as a stream of bounded fetches (READ_BYTES each), a view or status table as a pyarrow dataset over
its snapshot's files (DuckDB reads only the columns and row groups a query needs), so memory follows the query.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from lakelog import catalog
from lakelog.errors import CorruptRecord, InvalidRequest, KafkaException
from lakelog.log.scan import KAFKA_SCHEMA, PartitionScan, plan_scan
from lakelog.store import Location, Table, open_root
from lakelog.store.io.fileio import one_line

logger = logging.getLogger(__name__)

MISSING_TABLE = re.compile(r"Table with name (.+?) does not exist")
# A query that reads DuckDB's catalog rather than (only) tables' rows.
CATALOG_QUERY = re.compile(
    r"\b(information_schema|duckdb_tables|duckdb_views|duckdb_columns|show|describe|summarize|pragma)\b", re.IGNORECASE
)
# Set when the connection is made, so no statement runs before them: no file, network or extension reached by path.
LOCKED_DOWN = {"enable_external_access": False, "autoinstall_known_extensions": False, "autoload_known_extensions": False}
# What DuckDB says when a query reaches for what a lakelog session refuses.
REFUSED = (duckdb.PermissionException,)
LOCKED = re.compile(r"configuration has been locked|disabled (through|by) configuration", re.IGNORECASE)
# Views' and status tables' files as DuckDB reads them: each page's checksum verified where the writer stored one.
CHECKED_PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True)
)
# A topic's rows are fetched this many bytes at a time while DuckDB scans them.
READ_BYTES = 16 << 20

Source = Any  # what DuckDB's register takes: a pyarrow Table, Dataset, or an object with __arrow_c_stream__


class ArrowStream:
    """A table DuckDB reads as an Arrow stream made when a query scans it (`__arrow_c_stream__`, once per scan),
    batch by batch; the first lakelog error a read raised is kept, for the query to raise instead of DuckDB's."""

    def __init__(self, schema: pa.Schema, batches: Callable[[], Iterator[pa.RecordBatch]]) -> None:
        self.schema = schema
        self._batches = batches
        self.error: KafkaException | None = None

    def __arrow_c_schema__(self) -> Any:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return pa.RecordBatchReader.from_batches(self.schema, self._read()).__arrow_c_stream__(requested_schema)

    def _read(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._batches()
        except KafkaException as error:
            self.error = self.error or error
            raise


def query(root: str | Location, sql: str) -> pa.Table:
    """Run one SQL query over the root's topics, views and status tables, read-only; the result as Arrow.

    InvalidRequest for a query DuckDB refuses (a file, a setting, an extension: see the module's docstring);
    an error reading a table (CorruptRecord, KafkaStorageError) is raised as it is.
    """
    sources: dict[str, Source] = {}
    connection = connect(root, sql, sources=sources)
    try:
        result = connection.sql(sql)
        return result.to_arrow_table() if result is not None else pa.table({})
    except duckdb.Error as error:
        for source in sources.values():
            if isinstance(source, ArrowStream) and source.error is not None:
                raise source.error from None
        first = str(error).splitlines()[0]
        if isinstance(error, REFUSED) or LOCKED.search(first):
            raise InvalidRequest(
                f"lakelog sql reads the root's tables and nothing else (no files by path, no COPY TO, ATTACH, "
                f"INSTALL, LOAD or SET): DuckDB: {first}"
            ) from None
        missing = MISSING_TABLE.search(first)
        hint = f"; {missing_table_hint(root, missing.group(1))}" if missing else ""
        raise InvalidRequest(f"DuckDB: {first}{hint}") from None
    finally:
        connection.close()


def connect(
    root: str | Location, sql: str | None = None, *, sources: dict[str, Source] | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection with the root's tables registered (only those `sql` names, if given).

    DuckDB gets Arrow sources read through lakelog's file-IO layer, so every root kind works without DuckDB
    extensions (httpfs cannot be fetched offline), and its external access is off, its configuration locked.
    A query of the catalog (`SHOW TABLES`, `information_schema`, `duckdb_tables()`, `DESCRIBE`, ...) sees
    every table: those it does not name are registered empty, in their schema, so listing reads no rows.
    `sources`, if given, receives each registered table's source by name.
    """
    root = open_root(root)  # UnresolvedRoot for a root never initialised
    connection = duckdb.connect(config=dict(LOCKED_DOWN))
    listing = sql is not None and CATALOG_QUERY.search(sql) is not None
    for name, (source, schema) in _catalog(root).items():
        if sql is None or _names(sql, name):
            registered = source()
        elif listing:
            registered = schema.empty_table()
        else:
            continue
        connection.register(name, registered)
        if sources is not None:
            sources[name] = registered
    connection.execute("SET enable_progress_bar = false")  # stdout is the result's
    connection.execute("SET lock_configuration = true")
    return connection


def tables(root: str | Location) -> dict[str, Callable[[], pa.Table]]:
    """Table name -> a loader of all its rows: topics, `<topic>_view`s, `<topic>_status` tables, `quality_results`."""
    return {name: functools.partial(_whole, source) for name, (source, _) in _catalog(root).items()}


def _whole(source: Callable[[], Source]) -> pa.Table:
    registered = source()
    if isinstance(registered, ds.Dataset):
        return registered.to_table()
    if isinstance(registered, ArrowStream):
        return pa.RecordBatchReader.from_stream(registered).read_all()
    return registered


def _catalog(root: str | Location) -> dict[str, tuple[Callable[[], Source], pa.Schema]]:
    """Table name -> (a maker of its source, read when scanned; its schema)."""
    from lakelog.quality.results import RESULTS_SCHEMA

    found: dict[str, tuple[Callable[[], Source], pa.Schema]] = {}
    # Makers bind their topic (functools.partial): each is called later, once the loop has moved on.
    for topic in catalog.user_topics(root):
        found[topic] = (functools.partial(_topic_stream, root, topic), KAFKA_SCHEMA)
    for topic in catalog.list_views(root):
        found.setdefault(f"{topic}_view", (functools.partial(_view_dataset, root, topic), catalog.VIEW_SCHEMA))
    for topic in catalog.list_status_tables(root):
        found.setdefault(f"{topic}_status", (functools.partial(_status_dataset, root, topic), catalog.STATUS_SCHEMA))
    if catalog.has_quality_results(root):
        results = ArrowStream(RESULTS_SCHEMA, lambda: iter(catalog.read_quality_results(root).to_batches()))
        found.setdefault(catalog.QUALITY_RESULTS, (lambda: results, RESULTS_SCHEMA))
    return found


def _topic_stream(root: str | Location, topic: str) -> ArrowStream:
    """A topic's read_committed rows as a stream, planned on the first scan (a query that reads the table twice
    reads one plan: the same snapshot of every partition)."""
    plan: list[PartitionScan] = []

    def batches() -> Iterator[pa.RecordBatch]:
        if not plan:
            plan.extend(plan_scan(root, topic))
        for scan in plan:
            for rows in scan.read_kafka_rows(READ_BYTES):
                yield from rows.to_batches()

    return ArrowStream(KAFKA_SCHEMA, batches)


def snapshot_dataset(table: Table) -> ds.Dataset:
    """A Delta table's snapshot in hand (a view or a status table) as a pyarrow dataset over its data files, read
    through the table's file IO when scanned, in the table's schema."""
    paths = [table.io.path(uri) for uri in table.data_paths()]
    try:
        return ds.dataset(paths, schema=table.schema, format=CHECKED_PARQUET, filesystem=table.io.filesystem)
    except FileNotFoundError as error:
        raise CorruptRecord(
            f"a data file of {table.uri} (version {table.version}) is missing: {one_line(error)}", path=table.uri
        ) from None


def _view_dataset(root: str | Location, topic: str) -> ds.Dataset:
    return snapshot_dataset(catalog.open_view(root, topic))


def _status_dataset(root: str | Location, topic: str) -> ds.Dataset:
    return snapshot_dataset(catalog.open_status(root, topic))


def read_committed(root: str | Location, topic: str) -> pa.Table:
    """A topic's read_committed rows, every partition up to its LSO, in the Kafka source's columns."""
    chunks = [rows for scan in plan_scan(root, topic) for rows in scan.read_kafka_rows()]
    return pa.concat_tables(chunks) if chunks else KAFKA_SCHEMA.empty_table()


def snapshot_rows(table: Table) -> pa.Table:
    """Every row of a Delta table's snapshot in hand (a view or a status table), in its schema."""
    chunks = [table.read_data_file(entry) for entry in table.data_files()]
    return pa.concat_tables(chunks) if chunks else table.schema.empty_table()


def missing_table_hint(root: str | Location, name: str) -> str:
    """What makes the table `name` that a query named and the root does not hold (one clause)."""
    topics = set(catalog.user_topics(root))
    for suffix, what, job in (
        ("_view", "materialized read_committed view", "pipelines/materialize_committed_view.py"),
        ("_status", "partition-status table", "pipelines/partition_status.py"),
    ):
        if not name.endswith(suffix):
            continue
        topic = name.removesuffix(suffix)
        if topic not in topics:
            return f"{name} would be the {what} of topic {topic}, which this root does not hold"
        return f"{name} is the {what} of topic {topic}, made by `spark-submit {job} --topic {topic}` (not run on this root yet)"
    if name.lower() == catalog.QUALITY_RESULTS:
        return (
            f"{name} holds the quality gates' results: it exists once a write to a topic with a suite "
            "(lakelog quality set) has been validated"
        )
    return "the tables are the topics, <topic>_view, <topic>_status and quality_results; SHOW TABLES lists them"


def _names(sql: str, name: str) -> bool:
    """Whether `sql` may name the table `name` (a word of the query, quoted or not)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", sql, flags=re.IGNORECASE) is not None


__all__ = [
    "ArrowStream",
    "connect",
    "missing_table_hint",
    "query",
    "read_committed",
    "snapshot_dataset",
    "snapshot_rows",
    "tables",
]
