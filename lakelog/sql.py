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


def query(root: str | Location, sql: str) -> pa.Table:
    """Run one SQL query over the root's topics, views and status tables; the result as Arrow."""
    connection = connect(root, sql)
    try:
        return connection.sql(sql).to_arrow_table()
    except duckdb.Error as error:
        raise InvalidRequest(f"DuckDB: {str(error).splitlines()[0]}") from None
    finally:
        connection.close()


def connect(root: str | Location, sql: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the root's tables registered (only those `sql` names, if given).

    DuckDB gets Arrow data read through lakelog's file-IO layer, so every root
    kind works without DuckDB extensions (httpfs cannot be fetched offline).
    """
    root = open_root(root)  # UnresolvedRoot for a root never initialised
    connection = duckdb.connect()
    for index, (name, load) in enumerate(tables(root).items()):
        if sql is not None and not _names(sql, name):
            continue
        arrow_name = f"__lakelog_arrow_{index}"
        connection.register(arrow_name, load())
        connection.execute(f"CREATE VIEW {_quote(name)} AS SELECT * FROM {_quote(arrow_name)}")
    return connection


def tables(root: str | Location) -> dict[str, Callable[[], pa.Table]]:
    """Table name -> a loader of its rows: topics, `<topic>_view`s, `<topic>_status` tables, `quality_results`."""
    found: dict[str, Callable[[], pa.Table]] = {}
    # Loaders bind their topic (functools.partial): each is called later, once the loop has moved on.
    for topic in catalog.user_topics(root):
        found[topic] = functools.partial(read_committed, root, topic)
    for topic in catalog.list_views(root):
        found.setdefault(f"{topic}_view", functools.partial(_view_rows, root, topic))
    for topic in catalog.list_status_tables(root):
        found.setdefault(f"{topic}_status", functools.partial(_status_rows, root, topic))
    if catalog.has_quality_results(root):
        found.setdefault(catalog.QUALITY_RESULTS, lambda: catalog.read_quality_results(root))
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


def _names(sql: str, name: str) -> bool:
    """Whether `sql` may name the table `name` (a word of the query, quoted or not)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", sql, flags=re.IGNORECASE) is not None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


__all__ = ["connect", "query", "read_committed", "tables"]
