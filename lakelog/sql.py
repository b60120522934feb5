"""SQL over a root's committed data in DuckDB, the embedded default for queries that need no cluster.

Every topic is a table of its read_committed rows (up to each partition's LSO,
aborted transactions dropped) in the Kafka source's columns, read by the same
scan as Spark's (lakelog.log.scan, through PartitionLog.fetch). Each
materialized view is `<topic>_view` and each partition-status table
`<topic>_status`, and the quality gates' results `quality_results`, as in the
spark-sql init file (catalog.spark_sql_init). Only
the tables a query names are loaded, into Arrow, when it runs. `offset` is a
reserved word in DuckDB: write `"offset"`.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable

import duckdb
import pyarrow as pa

from lakelog import catalog
from lakelog.errors import InvalidRequest
from lakelog.log.scan import KAFKA_SCHEMA, plan_scan
from lakelog.store import Location, Table, open_root

logger = logging.getLogger(__name__)

MISSING_TABLE = re.compile(r"Table with name (.+?) does not exist")
# A query that reads DuckDB's catalog rather than (only) tables' rows.
CATALOG_QUERY = re.compile(
    r"\b(information_schema|duckdb_tables|duckdb_views|duckdb_columns|show|describe|summarize|pragma)\b", re.IGNORECASE
)


def query(root: str | Location, sql: str) -> pa.Table:
    """Run one SQL query over the root's topics, views and status tables; the result as Arrow."""
    connection = connect(root, sql)
    try:
        return connection.sql(sql).to_arrow_table()
    except duckdb.Error as error:
        first = str(error).splitlines()[0]
        missing = MISSING_TABLE.search(first)
        hint = f"; {missing_table_hint(root, missing.group(1))}" if missing else ""
        raise InvalidRequest(f"DuckDB: {first}{hint}") from None
    finally:
        connection.close()


def connect(root: str | Location, sql: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the root's tables registered as views (only those `sql` names, if given).

    DuckDB gets Arrow data read through lakelog's file-IO layer, so every root
    kind works without DuckDB extensions (httpfs cannot be fetched offline).
    A query of the catalog (`SHOW TABLES`, `information_schema`, `duckdb_tables()`, `DESCRIBE`, ...) sees
    every table: those it does not name are registered empty, in their schema, so listing reads no rows.
    """
    root = open_root(root)  # UnresolvedRoot for a root never initialised
    connection = duckdb.connect()
    listing = sql is not None and CATALOG_QUERY.search(sql) is not None
    for name, (load, schema) in _catalog(root).items():
        if sql is None or _names(sql, name):
            connection.register(name, load())
        elif listing:
            connection.register(name, schema.empty_table())
    return connection


def tables(root: str | Location) -> dict[str, Callable[[], pa.Table]]:
    """Table name -> a loader of its rows: topics, `<topic>_view`s, `<topic>_status` tables, `quality_results`."""
    return {name: load for name, (load, _) in _catalog(root).items()}


def _catalog(root: str | Location) -> dict[str, tuple[Callable[[], pa.Table], pa.Schema]]:
    """Table name -> (a loader of its rows, its schema)."""
    from lakelog.quality.results import RESULTS_SCHEMA

    found: dict[str, tuple[Callable[[], pa.Table], pa.Schema]] = {}
    # Loaders bind their topic (functools.partial): each is called later, once the loop has moved on.
    for topic in catalog.user_topics(root):
        found[topic] = (functools.partial(read_committed, root, topic), KAFKA_SCHEMA)
    for topic in catalog.list_views(root):
        found.setdefault(f"{topic}_view", (functools.partial(_view_rows, root, topic), catalog.VIEW_SCHEMA))
    for topic in catalog.list_status_tables(root):
        found.setdefault(f"{topic}_status", (functools.partial(_status_rows, root, topic), catalog.STATUS_SCHEMA))
    if catalog.has_quality_results(root):
        found.setdefault(catalog.QUALITY_RESULTS, (lambda: catalog.read_quality_results(root), RESULTS_SCHEMA))
    return found


def _view_rows(root: str | Location, topic: str) -> pa.Table:
    return snapshot_rows(catalog.open_view(root, topic))


def _status_rows(root: str | Location, topic: str) -> pa.Table:
    return snapshot_rows(catalog.open_status(root, topic))


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


__all__ = ["connect", "missing_table_hint", "query", "read_committed", "tables"]
