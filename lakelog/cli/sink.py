"""`lakelog sink postgres|duckdb`: a topic's read_committed records into a database table, exactly once
(lakelog.jobs.database: rows and positions in one database transaction, the sink fenced by its epoch)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lakelog.cli.common import BadInput


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `sink` and its databases to the command line's subparsers."""
    sinks = commands.add_parser("sink", help="load a topic into a database table, exactly once").add_subparsers(
        metavar="DATABASE", parser_class=parser_class
    )
    for kind, where, help_text in (
        ("postgres", "--dsn", "a libpq connection string: host=... port=... dbname=... user=..."),
        ("duckdb", "--database", "the DuckDB database file"),
    ):
        parser = sinks.add_parser(kind, parents=[common], help=f"into a {kind} table")
        parser.add_argument("--topic", required=True)
        parser.add_argument(where, dest="target", required=True, help=help_text)
        parser.add_argument("--table", required=True, help="the target table (made if missing)")
        parser.add_argument("--columns", required=True, help="the table's columns: name:type,... (the value's JSON keys)")
        parser.add_argument("--mode", choices=("append", "upsert"), default="append")
        parser.add_argument("--key", help="upsert: the key columns, comma-separated (a null value deletes its key's row)")
        parser.add_argument("--name", help="the sink's name: its positions and epoch in the database (default: the table)")
        parser.add_argument("--offset-columns", action="store_true", help="add lakelog_partition and lakelog_offset columns")
        parser.add_argument("--batch-records", type=int, default=10_000)
        parser.add_argument("--follow", action="store_true", help="keep loading new records (default: stop at the LSO)")
        parser.set_defaults(handler=_sink, kind=kind)


def _sink(args: argparse.Namespace) -> int:
    from lakelog.jobs.database.columns import parse_columns
    from lakelog.jobs.database.sink import run_sink

    if args.batch_records < 1:
        raise BadInput("lakelog sink: --batch-records must be at least 1")
    if args.kind == "postgres":
        from lakelog.jobs.database.postgres import PostgresTarget

        target: Any = PostgresTarget(args.target, args.table)
    else:
        from lakelog.jobs.database.duckdb_target import DuckdbTarget

        target = DuckdbTarget(args.target, args.table)
    result = run_sink(
        args.root,
        args.topic,
        target,
        name=args.name or args.table,
        columns=parse_columns(args.columns),
        mode=args.mode,
        key=[name.strip() for name in args.key.split(",")] if args.key else [],
        offset_columns=args.offset_columns,
        batch_records=args.batch_records,
        follow=args.follow,
    )
    print(json.dumps({"sink": result.sink, "epoch": result.epoch, "batches": result.batches, "rows": result.rows,
                      "positions": {str(p): o for p, o in sorted(result.positions.items())}}))  # fmt: skip
    return 0
