"""LakelogSinkOperator: a topic's read_committed records into a PostgreSQL or DuckDB table, exactly once.

What `lakelog sink postgres|duckdb` runs (lakelog.jobs.database.sink): the rows of each batch and the sink's
positions commit in one database transaction, so the database alone decides what was loaded. A retried task,
a cleared one or a backfill goes on from the positions the database holds and loads nothing twice; a task that
stalled and resumes after its retry took over is fenced by the retry's epoch (ProducerFenced) and commits
nothing more. Each run loads up to the topic's LSO and returns.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID, LakelogHook
from lakelog.airflow.operators._errors import task_errors

logger = logging.getLogger(__name__)

DATABASES = ("postgres", "duckdb")


class LakelogSinkOperator(BaseOperator):
    """Load `topic` into `table` of a database, once per record.

    :param topic: the topic to read (read_committed).
    :param database: "postgres" or "duckdb".
    :param target: a libpq connection string or URI for PostgreSQL (templated: e.g.
        ``{{ conn.my_postgres.get_uri() }}``), or the DuckDB database file.
    :param table: the target table, made if missing.
    :param columns: the table's columns, ``name:type,...`` (the JSON value's keys; PostgreSQL's type names).
    :param mode: append (every record) or upsert (the last value per `key`; a null value deletes).
    :param key: the key columns for upsert.
    :param sink_name: the sink's name, its positions and epoch in the database (default: the table).
    :param offset_columns: add lakelog_partition and lakelog_offset columns.
    :param batch_records: records per database transaction.
    :param lakelog_conn_id: the `lakelog` connection naming the root.

    Returns (XCom) ``{"sink", "epoch", "batches", "rows", "positions": {partition: next offset}}``.
    """

    template_fields: Sequence[str] = ("topic", "target", "table")
    ui_color = "#d7f0dd"

    def __init__(
        self,
        *,
        topic: str,
        database: str,
        target: str,
        table: str,
        columns: str,
        mode: str = "append",
        key: Sequence[str] = (),
        sink_name: str | None = None,
        offset_columns: bool = False,
        batch_records: int = 10_000,
        lakelog_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if database not in DATABASES:
            raise ValueError(f"database must be one of {', '.join(DATABASES)}, not {database!r}")
        if mode not in ("append", "upsert"):
            raise ValueError(f"mode must be append or upsert, not {mode!r}")
        if batch_records < 1:
            raise ValueError("batch_records must be at least 1")
        self.topic = topic
        self.database = database
        self.target = target
        self.table = table
        self.columns = columns
        self.mode = mode
        self.key = list(key)
        self.sink_name = sink_name
        self.offset_columns = offset_columns
        self.batch_records = batch_records
        self.lakelog_conn_id = lakelog_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        from lakelog.jobs.database.columns import parse_columns
        from lakelog.jobs.database.sink import run_sink

        if not self.target:
            raise AirflowFailException(f"sink {self.topic}: no {self.database} database given (target is empty)")
        with task_errors(f"sink {self.topic} into {self.database} table {self.table}"):
            columns = parse_columns(self.columns)
            if self.database == "postgres":
                from lakelog.jobs.database.postgres import PostgresTarget

                target: Any = PostgresTarget(self.target, self.table)
            else:
                from lakelog.jobs.database.duckdb_target import DuckdbTarget

                target = DuckdbTarget(self.target, self.table)
            result = run_sink(
                LakelogHook(self.lakelog_conn_id).location(),
                self.topic,
                target,
                name=self.sink_name or self.table,
                columns=columns,
                mode=self.mode,
                key=self.key,
                offset_columns=self.offset_columns,
                batch_records=self.batch_records,
            )
        self.log.info(
            "sink %s: epoch %d, %d rows in %d batches, positions %s",
            result.sink,
            result.epoch,
            result.rows,
            result.batches,
            result.positions,
        )
        return {
            "sink": result.sink,
            "epoch": result.epoch,
            "batches": result.batches,
            "rows": result.rows,
            "positions": {str(p): o for p, o in sorted(result.positions.items())},
        }


__all__ = ["LakelogSinkOperator"]
