"""The DuckDB side of a sink: the same two tables as PostgreSQL's (lakelog.jobs.database.postgres) in a database
file, each batch one DuckDB transaction on a connection opened for it.

A connection per batch: DuckDB lets one process at a time hold a database file open for writing, so a sink that
kept its connection would lock out its own successor; opened per batch, a second instance of the sink claims its
epoch between two batches of the first, which is fenced from its next batch on, as on PostgreSQL. Rows go in as
one Arrow table (`INSERT ... SELECT` from it; upsert: `INSERT OR REPLACE` on the primary key).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import duckdb
import pyarrow as pa

from lakelog.errors import InvalidConfig, KafkaStorageError, OffsetMismatch, ProducerFenced
from lakelog.jobs.database.columns import TYPES, Column, Decoded, arrow_schema

OPEN_ATTEMPTS = 200  # a file held by another instance's batch: wait for it (0.05 s apart), then fail


class DuckdbTarget:
    def __init__(self, path: str, table: str) -> None:
        if not table.replace("_", "").isalnum():
            raise InvalidConfig(f"--table takes a plain name (letters, digits, _) for DuckDB, not {table!r}", key="table")
        self.path, self.table = path, table

    def close(self) -> None:
        return None

    @contextlib.contextmanager
    def _connection(self, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
        import time

        for attempt in range(OPEN_ATTEMPTS):
            try:
                connection = duckdb.connect(self.path)
                break
            except duckdb.IOException as error:
                if "lock" not in str(error).lower() or attempt == OPEN_ATTEMPTS - 1:
                    raise KafkaStorageError(f"DuckDB: cannot open {self.path} to {what} ({_line(error)})") from None
                time.sleep(0.05)
        try:
            yield connection
        except duckdb.Error as error:
            raise KafkaStorageError(f"DuckDB: cannot {what} ({_line(error)})") from None
        finally:
            connection.close()

    def prepare(self, columns: Sequence[Column], key: Sequence[str]) -> None:
        definitions = ", ".join(f'"{c.name}" {TYPES[c.type][1]}' for c in columns)
        if key:
            definitions += ", PRIMARY KEY (" + ", ".join(f'"{name}"' for name in key) + ")"
        with self._connection("create the sink's tables") as connection:
            connection.execute("CREATE TABLE IF NOT EXISTS lakelog_sink_epochs (sink VARCHAR PRIMARY KEY, epoch BIGINT NOT NULL)")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS lakelog_sink_positions (sink VARCHAR, topic VARCHAR, partition INTEGER, "
                "next_offset BIGINT NOT NULL, epoch BIGINT NOT NULL, PRIMARY KEY (sink, topic, partition))"
            )
            connection.execute(f'CREATE TABLE IF NOT EXISTS "{self.table}" ({definitions})')

    def claim(self, sink: str) -> int:
        with self._connection("claim the sink's epoch") as connection:
            row = connection.execute(
                "INSERT INTO lakelog_sink_epochs VALUES (?, 1) ON CONFLICT (sink) DO UPDATE SET epoch = epoch + 1 RETURNING epoch",
                [sink],
            ).fetchone()
        assert row is not None
        return int(row[0])

    def positions(self, sink: str, topic: str) -> dict[int, int]:
        with self._connection("read the sink's positions") as connection:
            rows = connection.execute(
                "SELECT partition, next_offset FROM lakelog_sink_positions WHERE sink = ? AND topic = ?", [sink, topic]
            ).fetchall()
        return {int(p): int(o) for p, o in rows}

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
        names = ", ".join(f'"{c.name}"' for c in columns)
        stage = pa.Table.from_pylist(
            [dict(zip([c.name for c in columns], row, strict=True)) for row in batch.rows], arrow_schema(columns)
        )
        with self._connection("write a batch") as connection:
            connection.execute("BEGIN TRANSACTION")
            try:
                held = connection.execute("SELECT epoch FROM lakelog_sink_epochs WHERE sink = ?", [sink]).fetchone()
                if held is None or int(held[0]) != epoch:
                    raise ProducerFenced(
                        f"sink {sink!r}: epoch {epoch} is fenced by epoch {held[0] if held else None}: a newer instance "
                        "of the sink took over; this batch committed nothing"
                    )
                stored = dict(
                    connection.execute(
                        "SELECT partition, next_offset FROM lakelog_sink_positions WHERE sink = ? AND topic = ?", [sink, topic]
                    ).fetchall()
                )
                moved = {p: (stored.get(p), offset) for p, offset in before.items() if stored.get(p) != offset}
                if moved:
                    raise OffsetMismatch(f"sink {sink!r}: positions moved under this batch (stored, read): {moved}")
                for deleted in batch.deletes:
                    where = " AND ".join(f'"{name}" = ?' for name in key)
                    connection.execute(f'DELETE FROM "{self.table}" WHERE {where}', list(deleted))
                connection.register("lakelog_sink_stage", stage)
                step("copied")
                verb = "INSERT OR REPLACE" if key else "INSERT"
                connection.execute(f'{verb} INTO "{self.table}" ({names}) SELECT {names} FROM lakelog_sink_stage')
                connection.unregister("lakelog_sink_stage")
                connection.executemany(
                    "INSERT OR REPLACE INTO lakelog_sink_positions VALUES (?, ?, ?, ?, ?)",
                    [[sink, topic, partition, offset, epoch] for partition, offset in sorted(after.items())],
                )
                step("before-commit")
                connection.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    connection.execute("ROLLBACK")
                raise


def _line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
