"""The exactly-once database sinks against a plain load of the same rows, in one run.

    python -m bench.database_sink [--quick]

A topic of ROWS committed JSON records (2 partitions, written once before the rounds) is loaded by
`run_sink` (what `lakelog sink postgres|duckdb` runs, at its default batch of 10,000 records):
read_committed consume, decode, and per batch one database transaction holding the rows and the positions.
Its peers get the same rows already decoded, in memory, and load them in one transaction:

- PostgreSQL (a server of its own on loopback, as the tests start it): psycopg's `COPY ... FROM STDIN`
  into a table of the same columns. Target: sink / COPY <= 1.3.
- DuckDB (a database file): one `INSERT INTO ... SELECT` of the same rows as an Arrow table. No target (INFO).

Rounds alternate sides, each into a fresh database. The breakdown prints what the sink pays that its peer
does not: the read_committed consume of every record and the decoding (measured alone, the same way), so a
miss says where it comes from. Prepare + complete against a plain commit (two-phase commit) is not measured:
lakelog has no two-phase commit yet.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

import duckdb
import pyarrow as pa

from bench import _common
from lakelog import Consumer, Producer, TopicPartition
from lakelog.client.types import OFFSET_BEGINNING
from lakelog.jobs.database.columns import Decoder, arrow_schema, parse_columns
from lakelog.jobs.database.duckdb_target import DuckdbTarget
from lakelog.jobs.database.sink import FETCH_BYTES, FETCH_RECORDS, run_sink
from lakelog.log import create_topic

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from postgres_server import PostgresServer, unavailable  # noqa: E402 - test tooling, shared with the benchmark

ROWS, ROWS_QUICK = 100_000, 10_000
ROUNDS, ROUNDS_QUICK = 3, 2
PARTITIONS = 2
TOPIC = "orders"
COLUMNS = "id:bigint,name:text,amount:numeric"
TARGET = 1.3


def _produce(root: str, rows: int) -> None:
    create_topic(root, TOPIC, PARTITIONS)
    producer = Producer(
        {"lakelog.root": root, "transactional.id": "bench-writer", "linger.ms": 60_000, "batch.num.messages": 1_000_000}
    )
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(rows):
        value = json.dumps({"id": i, "name": f"customer-{i}", "amount": i / 4})
        producer.produce(TOPIC, key=str(i), value=value, partition=i % PARTITIONS)
    producer.commit_transaction()
    producer.close()


def _read_and_decode(root: str, rows: int) -> tuple[float, float, list[tuple]]:
    """The sink's own reading, alone: every record read_committed with the sink's fetch budgets, until all `rows`
    are in hand (no wait at the end), then decoded as the sink decodes them."""
    started = time.perf_counter()
    consumer = Consumer(
        {
            "lakelog.root": root,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "max.poll.records": FETCH_RECORDS,
            "max.partition.fetch.bytes": FETCH_BYTES,
            "fetch.max.bytes": FETCH_BYTES,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    messages: list = []
    while len(messages) < rows:
        messages += consumer.consume(FETCH_RECORDS, 1.0)
    consumer.close()
    read = time.perf_counter() - started
    started = time.perf_counter()
    decoded = Decoder(parse_columns(COLUMNS), (), False, False, None).batch(messages).rows
    return read, time.perf_counter() - started, decoded


def _postgres_sides(server: PostgresServer, root: str, rows: list[tuple]) -> dict[str, Callable[[], float]]:
    import psycopg

    from lakelog.jobs.database.postgres import PostgresTarget

    def sink() -> float:
        dsn = server.new_database()
        started = time.perf_counter()
        result = run_sink(root, TOPIC, PostgresTarget(dsn, "orders"), name="bench", columns=parse_columns(COLUMNS))
        seconds = time.perf_counter() - started
        assert result.rows == len(rows), result
        return seconds

    def copy() -> float:
        dsn = server.new_database()
        with psycopg.connect(dsn) as connection:
            connection.execute("CREATE TABLE orders (id bigint, name text, amount numeric)")
            connection.commit()
            started = time.perf_counter()
            with connection.transaction(), connection.cursor() as cursor:
                with cursor.copy("COPY orders (id, name, amount) FROM STDIN") as writing:
                    for row in rows:
                        writing.write_row(row)
            seconds = time.perf_counter() - started
            (count,) = connection.execute("SELECT count(*) FROM orders").fetchone()
        assert count == len(rows), count
        return seconds

    return {"sink": sink, "peer": copy}


def _duckdb_sides(folder: str, root: str, rows: list[tuple]) -> dict[str, Callable[[], float]]:
    columns = parse_columns(COLUMNS)
    names = [column.name for column in columns]

    def sink() -> float:
        path = os.path.join(folder, f"{uuid.uuid4().hex}.duckdb")
        started = time.perf_counter()
        result = run_sink(root, TOPIC, DuckdbTarget(path, "orders"), name="bench", columns=columns)
        seconds = time.perf_counter() - started
        assert result.rows == len(rows), result
        return seconds

    def insert() -> float:
        path = os.path.join(folder, f"{uuid.uuid4().hex}.duckdb")
        started = time.perf_counter()
        table = pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows], arrow_schema(columns))
        with duckdb.connect(path) as connection:
            connection.execute("CREATE TABLE orders (id BIGINT, name VARCHAR, amount DECIMAL(38, 9))")
            connection.register("staged", table)
            connection.execute("BEGIN TRANSACTION")
            connection.execute("INSERT INTO orders SELECT * FROM staged")
            connection.execute("COMMIT")
            seconds = time.perf_counter() - started
            (count,) = connection.execute("SELECT count(*) FROM orders").fetchone()
        assert count == len(rows), count
        return seconds

    return {"sink": sink, "peer": insert}


def _rounds(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"sink": [], "peer": []}
    for n in range(rounds):
        for side in ("sink", "peer") if n % 2 else ("peer", "sink"):
            times[side].append(sides[side]())
    return {side: _common.median(values) for side, values in times.items()}


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    rows, rounds = (ROWS_QUICK, ROUNDS_QUICK) if quick else (ROWS, ROUNDS)
    with _common.session(
        "database_sink",
        f"lakelog sink postgres|duckdb of {rows:,} committed records vs a plain load of the same rows, p50 of {rounds}",
        root_parent,
        keep,
    ) as (result, root):
        _produce(root, rows)
        read, decode, decoded = _read_and_decode(root, rows)
        print(f"the sink's reading alone: read_committed consume {read:.2f} s, decode {decode:.2f} s ({rows:,} records)")
        table = []
        with tempfile.TemporaryDirectory(prefix="lakelog-bench-duckdb-") as folder:
            measured = {"duckdb": _rounds(_duckdb_sides(folder, root, decoded), rounds)}
        reason = unavailable()
        if reason is None:
            with PostgresServer() as server:
                measured["postgres"] = _rounds(_postgres_sides(server, root, decoded), rounds)
        else:
            print(f"postgres: not measured ({reason})")
        for kind, times in measured.items():
            rest = times["sink"] - read - decode - times["peer"]
            table.append([kind, times["sink"], times["peer"], read, decode, rest, rows / times["sink"]])
        _common.print_table(["database", "sink s", "peer s", "of it: consume s", "decode s", "rest s", "sink rows/s"], table)
        for kind, times in measured.items():
            result.add(f"{kind} sink / plain load", times["sink"] / times["peer"], TARGET if kind == "postgres" else None)
    return result


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__ or "", argv)


if __name__ == "__main__":
    main()
