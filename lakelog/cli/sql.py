"""`lakelog sql` (a query in DuckDB over read_committed topics, views and status tables) and `lakelog
spark-sql-init` (a spark-sql init file with the same tables)."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `sql` and `spark-sql-init` to the command line's subparsers."""
    sql = commands.add_parser(
        "sql", parents=[common], help="SQL in DuckDB over read_committed topics, <topic>_view and <topic>_status tables"
    )
    sql.add_argument("query", help='one query; quote "offset" (a reserved word in DuckDB)')
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table", help="table (default), csv or JSON lines")
    sql.set_defaults(handler=_sql)
    sql_init = commands.add_parser(
        "spark-sql-init", parents=[common], help="write a spark-sql init file: a temporary view per topic, view and status table"
    )
    sql_init.add_argument("--output", "-o", help="file to write (default: standard output)")
    sql_init.add_argument("--register", action="store_true", help="views, status tables as Delta tables in a metastore")
    sql_init.add_argument(
        "--properties-file",
        help="with --register: also write the Spark properties a shell needs (jars, Delta, S3A with keys) to this file, "
        "readable by you only (0600), for spark-sql --properties-file",
    )
    sql_init.set_defaults(handler=_spark_sql_init)


def _sql(args: argparse.Namespace) -> int:
    from lakelog import sql

    result = sql.query(args.root, args.query)
    if args.format == "table":
        import duckdb

        with duckdb.connect() as connection:
            connection.register("result", result)
            connection.sql("SELECT * FROM result").show(max_rows=1000, max_width=200)
        return 0
    rows = result.to_pylist()
    if args.format == "json":
        for row in rows:
            print(json.dumps({name: _json_value(value) for name, value in row.items()}, default=str))
        return 0
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(result.column_names)
    for row in rows:
        writer.writerow([_json_value(value) for value in row.values()])
    return 0


def _json_value(value: Any) -> Any:
    """Bytes as text if they are UTF-8, else base64 (as `consume` prints them); nested values likewise."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value


def _spark_sql_init(args: argparse.Namespace) -> int:
    from lakelog import catalog

    script = catalog.spark_sql_register(args.root) if args.register else catalog.spark_sql_init(args.root)
    shell = ""
    if args.register:
        from lakelog.spark_sql_shell import shell_arguments, shell_properties, write_properties_file

        if args.properties_file:
            write_properties_file(args.properties_file, shell_properties(args.root, secrets=True))
            shell = f"--properties-file {args.properties_file} "
        elif args.root.scheme == "s3":
            # No key on the command line or in a file: S3A reads them from the shell's AWS_* environment.
            shell = shell_arguments(shell_properties(args.root, secrets=False)) + " "
    if args.output:
        with open(args.output, "w") as output:
            output.write(script)
        run = f"once: spark-sql {shell}-f {args.output}" if args.register else f"spark-sql -i {args.output}"
        print(f"wrote {script.count('CREATE ')} table(s) to {args.output}; run {run}", file=sys.stderr)
    else:
        sys.stdout.write(script)
    if shell:
        print(f"a spark-sql shell over these tables: spark-sql {shell}-e 'SELECT ...'", file=sys.stderr)
    return 0
