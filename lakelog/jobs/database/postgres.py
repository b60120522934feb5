"""The PostgreSQL side of a sink: its positions and epoch in two tables of the target database, each batch one
transaction (psycopg 3).

- `lakelog_sink_epochs (sink, epoch)`: a sink that starts takes the next epoch (`claim`); its batches commit only
  while the row still holds it, checked under `SELECT ... FOR UPDATE` in the batch's own transaction, so a zombie
  of an older epoch commits nothing, and a claim waits for a batch in flight (the row lock) instead of racing it.
- `lakelog_sink_positions (sink, topic, partition, next_offset, epoch)`: where each partition's next batch starts;
  the batch's transaction checks they are what it read from, then moves them with its rows. A restarted sink reads
  them back: the database alone decides what was loaded.
- Rows go in by `COPY` into a temporary table, then one `INSERT ... SELECT` (append) or `INSERT ... ON CONFLICT
  (key) DO UPDATE` (upsert, with the batch's deletes first), the fast path PostgreSQL has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lakelog.errors import InvalidConfig, KafkaStorageError, NotImplementedWithoutExtra, OffsetMismatch, ProducerFenced
from lakelog.jobs.database.columns import Column, Decoded

logger = logging.getLogger(__name__)

STAGE = "lakelog_sink_stage"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise NotImplementedWithoutExtra.missing("a PostgreSQL sink", "psycopg", "postgres") from None
    return psycopg


class PostgresTarget:
    """One sink's connection to its target database and table."""

    def __init__(self, dsn: str, table: str) -> None:
        psycopg = _psycopg()
        self.sql = psycopg.sql
        parts = table.split(".")
        if not 1 <= len(parts) <= 2 or not all(parts):
            raise InvalidConfig(f"--table takes NAME or SCHEMA.NAME, not {table!r}", key="table")
        self.table = self.sql.Identifier(*parts)
        self.table_name = table
        try:
            self.connection = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as error:
            raise KafkaStorageError(f"PostgreSQL: cannot connect ({_line(error)})") from None
        self.errors = psycopg.Error

    def close(self) -> None:
        self.connection.close()

    def prepare(self, columns: Sequence[Column], key: Sequence[str]) -> None:
        """The sink's tables, and the target table if it does not exist (with a primary key on `key`)."""
        sql = self.sql
        definitions = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.type)) for c in columns)
        if key:
            definitions = sql.SQL("{}, PRIMARY KEY ({})").format(definitions, sql.SQL(", ").join(map(sql.Identifier, key)))
        with self._failing("create the sink's tables"):
            self.connection.execute(
                "CREATE TABLE IF NOT EXISTS lakelog_sink_epochs (sink text PRIMARY KEY, epoch bigint NOT NULL)"
            )
            self.connection.execute(
                "CREATE TABLE IF NOT EXISTS lakelog_sink_positions (sink text, topic text, partition integer, "
                "next_offset bigint NOT NULL, epoch bigint NOT NULL, PRIMARY KEY (sink, topic, partition))"
            )
            self.connection.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(self.table, definitions))

    def claim(self, sink: str) -> int:
        """The sink's next epoch, committed: every older instance of it is fenced from here on."""
        with self._failing("claim the sink's epoch"):
            row = self.connection.execute(
                "INSERT INTO lakelog_sink_epochs (sink, epoch) VALUES (%s, 1) ON CONFLICT (sink) "
                "DO UPDATE SET epoch = lakelog_sink_epochs.epoch + 1 RETURNING epoch",
                (sink,),
            ).fetchone()
        return int(row[0])

    def positions(self, sink: str, topic: str) -> dict[int, int]:
        with self._failing("read the sink's positions"):
            rows = self.connection.execute(
                "SELECT partition, next_offset FROM lakelog_sink_positions WHERE sink = %s AND topic = %s", (sink, topic)
            ).fetchall()
        return {int(partition): int(offset) for partition, offset in rows}

    def write(
        self,
        sink: str,
        epoch: int,
        topic: str,
        columns: Sequence[Column],
        key: Sequence[str],
        batch: Decoded,
        before: Mapping[int, int | None],
        after: Mapping[int, int],
        step: Callable[[str], None],
    ) -> None:
        """The batch's rows and positions in one transaction, or nothing (ProducerFenced, OffsetMismatch)."""
        sql = self.sql
        names = sql.SQL(", ").join(sql.Identifier(c.name) for c in columns)
        with self._failing("write a batch"), self.connection.transaction():
            cursor = self.connection.cursor()
            held = cursor.execute("SELECT epoch FROM lakelog_sink_epochs WHERE sink = %s FOR UPDATE", (sink,)).fetchone()
            if held is None or int(held[0]) != epoch:
                raise ProducerFenced(
                    f"sink {sink!r}: epoch {epoch} is fenced by epoch {held[0] if held else None}: a newer instance "
                    "of the sink took over; this batch committed nothing"
                )
            stored = dict(
                cursor.execute(
                    "SELECT partition, next_offset FROM lakelog_sink_positions WHERE sink = %s AND topic = %s", (sink, topic)
                ).fetchall()
            )
            moved = {p: (stored.get(p), offset) for p, offset in before.items() if stored.get(p) != offset}
            if moved:
                raise OffsetMismatch(f"sink {sink!r}: positions moved under this batch (stored, read): {moved}")
            cursor.execute(
                sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS").format(
                    sql.Identifier(STAGE), self.table
                )
            )
            if batch.deletes:
                keys = sql.SQL(", ").join(map(sql.Identifier, key))
                cursor.executemany(
                    sql.SQL("DELETE FROM {} WHERE ({}) = ({})").format(
                        self.table, keys, sql.SQL(", ").join(sql.Placeholder() * len(key))
                    ),
                    batch.deletes,
                )
            with cursor.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(STAGE), names)) as copy:
                for row in batch.rows:
                    copy.write_row(row)
            step("copied")
            insert = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(self.table, names, names, sql.Identifier(STAGE))
            if key:
                updates = [c.name for c in columns if c.name not in key]
                action = (
                    sql.SQL("DO UPDATE SET {}").format(
                        sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name)) for name in updates)
                    )
                    if updates
                    else sql.SQL("DO NOTHING")
                )
                insert = sql.SQL("{} ON CONFLICT ({}) {}").format(insert, sql.SQL(", ").join(map(sql.Identifier, key)), action)
            cursor.execute(insert)
            cursor.executemany(
                "INSERT INTO lakelog_sink_positions (sink, topic, partition, next_offset, epoch) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (sink, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, epoch = EXCLUDED.epoch",
                [(sink, topic, partition, offset, epoch) for partition, offset in sorted(after.items())],
            )
            step("before-commit")

    def _failing(self, what: str) -> Any:
        return _DatabaseErrors(self.errors, f"PostgreSQL: cannot {what}")


class _DatabaseErrors:
    """A database error as KafkaStorageError, in one line (no raw engine error reaches a user)."""

    def __init__(self, errors: type[BaseException], what: str) -> None:
        self.errors, self.what = errors, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, _: Any) -> None:
        if error is not None and isinstance(error, self.errors):
            raise KafkaStorageError(f"{self.what} ({_line(error)})") from None


def _line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
