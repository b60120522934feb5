"""Stage 4 of the main job: committed views refreshed by Spark, and SQL over them.

1. the view job (pipelines/materialize_committed_view.py) for topic `payments`
   runs in a child process with its own Spark session and is SIGKILLed after its
   files are written, before its commit: the view is unchanged;
2. the job runs again: the view holds every committed row of the topic, once;
   the topics `orders` and `clicks-upper` get their views too;
3. one more transaction commits to `payments`; the next run appends just its
   rows (incremental), and `partition_status` writes the topic's HW, LSO and
   aborted transactions;
4. `lakelog spark-sql-init` writes the init file, the real `spark-sql` shell
   queries the view with it, and `lakelog sql` (DuckDB) gives the same answer.

Run alone (after stages 1-3 on the same root): `python -m pipelines.demo_spark --root R`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lakelog import Producer, jars
from lakelog.client.roots import Location, open_root

TOPIC = "payments"
MORE_VIEWS = ("orders", "clicks-upper")
SPARK_SQL_QUERY = (
    "SELECT get_json_object(CAST(value AS STRING), '$.transaction') AS transaction, count(*) AS messages, "
    "count(DISTINCT partition, offset) AS distinct_offsets FROM payments_view GROUP BY 1 ORDER BY 1"
)
DUCKDB_QUERY = (
    "SELECT json_extract_string(decode(value), '$.transaction') AS transaction, count(*) AS messages, "
    'count(DISTINCT (partition, "offset")) AS distinct_offsets FROM payments_view GROUP BY ALL ORDER BY 1'
)


def spark_session(master: str = "local[2]") -> Any:
    """A small local session, as the brief asks of these 2-core machines."""
    from pyspark_lakelog import local_session

    return local_session("lakelog demo", master, driver_memory="1g")


def child_dies_before_commit(root: str) -> None:
    """The view job of `payments`, SIGKILLed once its files are written and before its commit."""
    from .materialize_committed_view import FAULT_WRITTEN, materialize_committed_view

    def die_at(point: str) -> None:
        if point == FAULT_WRITTEN:
            print(f"view job: files written, dying before the commit (pid {os.getpid()})", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    materialize_committed_view(spark_session("local[1]"), root, TOPIC, fault=die_at)
    raise SystemExit("demo: the view job was meant to die before its commit")


def committed_rows(root: str, topic: str) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every read_committed row, as the Python reader sees them."""
    from lakelog.sql import read_committed

    table = read_committed(root, topic).select(["partition", "offset", "value"]).to_pydict()
    return sorted(zip(table["partition"], table["offset"], table["value"], strict=True))


def view_rows(root: str, topic: str) -> list[tuple[int, int, bytes]]:
    from lakelog import catalog
    from lakelog.sql import snapshot_rows

    table = snapshot_rows(catalog.open_view(root, topic)).select(["partition", "offset", "value"]).to_pydict()
    return sorted(zip(table["partition"], table["offset"], table["value"], strict=True))


def verify_view(root: str, topic: str) -> int:
    """The view equals the topic's read_committed rows up to the LSO: nothing missing, nothing twice."""
    expected, got = committed_rows(root, topic), view_rows(root, topic)
    if got != expected:
        doubled = len(got) - len(set(got))
        missing = len(set(expected) - set(got))
        raise SystemExit(f"demo: FAILED: view of {topic} has {len(got)} rows, {doubled} doubled, {missing} missing")
    return len(got)


def spark_sql(root: Location) -> str:
    """`lakelog spark-sql-init`, then the real spark-sql shell over the view; its result lines."""
    # The init file and spark-sql's metastore_db/ are the shell's, not lakelog's: a local scratch folder.
    scratch = Path(tempfile.mkdtemp(prefix="lakelog-demo-spark-sql-"))
    init = scratch / "spark-sql-init.sql"
    bin_dir = Path(sys.executable).parent
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    subprocess.run(
        [sys.executable, "-m", "lakelog.cli", "spark-sql-init", "--root", root.uri, "--output", str(init)],
        check=True,
        env=environment,
        timeout=120,
    )
    shell = subprocess.run(
        [
            str(bin_dir / "spark-sql"),
            "--master",
            "local[1]",
            "--driver-memory",
            "1g",
            "--conf",
            "spark.ui.enabled=false",
            # Delta Lake's Spark connector, where lakelog's JVM jars are fetched (lakelog.jars).
            *(part for key, value in jars.spark_conf().items() for part in ("--conf", f"{key}={value}")),
            "-i",
            str(init),
            "-e",
            SPARK_SQL_QUERY,
        ],
        cwd=scratch,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if shell.returncode != 0:
        raise SystemExit(f"demo: spark-sql failed:\n{shell.stderr[-3000:]}")
    return "\n".join(line for line in shell.stdout.splitlines() if "\t" in line)


def run(root: Location) -> None:
    from lakelog import catalog
    from lakelog.sql import query, snapshot_rows

    from .materialize_committed_view import materialize_committed_view
    from .partition_status import partition_status

    child = subprocess.run(
        [sys.executable, "-m", f"{__package__}.demo_spark", "--child", "--root", root.uri],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if child.returncode != -signal.SIGKILL:
        raise SystemExit(f"demo: the view job child ended with {child.returncode}, not SIGKILL:\n{child.stderr[-3000:]}")
    print(child.stdout.strip())
    before = catalog.open_view(root, TOPIC)
    print(
        f"view job SIGKILLed between writing and committing: view of {TOPIC} at version {before.version}, "
        f"{snapshot_rows(before).num_rows} rows"
    )

    spark = spark_session()
    report = materialize_committed_view(spark, root, TOPIC)
    print(f"view job run again: version {report.version}, {report.rows} rows, positions {report.positions}")
    print(f"verified: view of {TOPIC} holds its {verify_view(root, TOPIC)} read_committed rows, each once")
    for topic in MORE_VIEWS:
        extra = materialize_committed_view(spark, root, topic)
        print(f"view of {topic}: {extra.rows} rows; verified: {verify_view(root, topic)} rows, each once")

    producer = Producer({"lakelog.root": root, "transactional.id": "payments"})
    producer.init_transactions()
    producer.begin_transaction()
    for n in range(3):
        producer.produce(TOPIC, json.dumps({"transaction": "t4", "n": n}), partition=n)
    producer.commit_transaction()
    incremental = materialize_committed_view(spark, root, TOPIC)
    if incremental.rows != 3:
        raise SystemExit(f"demo: FAILED: the incremental run appended {incremental.rows} rows, not the 3 new ones")
    print(f"transaction t4 (3 messages) committed; the next run appended {incremental.rows} rows (version {incremental.version})")
    print(f"verified: view of {TOPIC} holds its {verify_view(root, TOPIC)} read_committed rows, each once")
    status = partition_status(spark, root, TOPIC)
    print(f"partition status of {TOPIC} written: {status.__dict__}")
    spark.stop()

    shell = spark_sql(root)
    print(f'spark-sql -i spark-sql-init.sql -e "{SPARK_SQL_QUERY}"\n{shell}')
    duck = query(root, DUCKDB_QUERY).to_pylist()
    as_lines = "\n".join(f"{row['transaction']}\t{row['messages']}\t{row['distinct_offsets']}" for row in duck)
    if as_lines != shell:
        raise SystemExit(f"demo: FAILED: spark-sql and DuckDB disagree:\n{shell}\n---\n{as_lines}")
    print("verified: lakelog sql (DuckDB) gives the same answer over the same view")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="a root that stages 1-3 of pipelines.demo have filled")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_dies_before_commit(args.root)
    else:
        run(open_root(args.root))  # UnresolvedRoot if it is no root


if __name__ == "__main__":
    main()
