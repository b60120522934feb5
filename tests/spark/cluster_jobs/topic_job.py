"""A Spark application the cluster tests submit (`spark-submit --master spark://...`), as a user would: it reads a
topic with `format("lakelog")` at both isolation levels and writes its read_committed rows to another topic, each
step a Spark job named by its description (the tests find its stages in the event log by that name), then
(`--view`) runs the committed-view job of pipelines/ on the source topic in the same application.

    spark-submit topic_job.py --root R --source S --dest D --result OUT.json [--storage-option KEY=VALUE ...]
        [--hold DIR --hold-mode kill|speculate] [--view]

The root's storage settings come only from `--storage-option` (as `storage.<key>` options of each read and write):
the tests start this driver and the cluster without any AWS_* variable. `--hold` slows partition 0's first task
attempt of the write on purpose (a flag-file handshake with the test in DIR, never a timer): `kill` holds it until
the test has killed its executor (DIR/release), `speculate` until a speculative copy has passed all its rows on.
Kept free of pytest and of the tests' helpers: executors import only lakelog and pyspark.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

HOLD_TIMEOUT_S = 120.0
READ_TASKS = 4


def held_rows(hold: Path, mode: str):
    """A mapInArrow step that passes rows on, holding partition 0's first attempt halfway (see the module doc)."""

    def step(batches: Iterator) -> Iterator:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition, attempt = context.partitionId(), context.attemptNumber()
        rows = [row for batch in batches for row in batch.to_pylist()]
        half = len(rows) // 2
        pieces = [rows[:half], rows[half:]]
        yield from _batches(pieces[0])
        if partition == 0 and attempt == 0:
            (hold / f"held-{partition}-{attempt}").write_text(str(os.getpid()))
            wanted = "release" if mode == "kill" else f"done-{partition}-"
            deadline = time.monotonic() + HOLD_TIMEOUT_S
            while time.monotonic() < deadline and not any(p.name.startswith(wanted) for p in hold.iterdir()):
                time.sleep(0.05)
        yield from _batches(pieces[1])
        if partition == 0 and attempt > 0:
            (hold / f"done-{partition}-{attempt}").write_text(str(os.getpid()))

    return step


def _batches(rows: list[dict]) -> Iterator:
    import pyarrow as pa

    from lakelog.log.scan import KAFKA_SCHEMA

    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=KAFKA_SCHEMA)


def rows_of(frame) -> list[list]:
    return sorted([row[0], row[1], bytes(row[2]).hex()] for row in frame.select("partition", "offset", "value").collect())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--storage-option", action="append", default=[])
    parser.add_argument("--hold")
    parser.add_argument("--hold-mode", choices=("kill", "speculate"), default="kill")
    parser.add_argument("--view", action="store_true", help="then run the committed-view job on the source topic")
    args = parser.parse_args()
    storage = {f"storage.{item.partition('=')[0]}": item.partition("=")[2] for item in args.storage_option}

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("lakelog cluster topic job").getOrCreate()
    context = spark.sparkContext

    def topic(isolation_level: str):
        return (
            spark.read.format("lakelog")
            .options(**storage)
            .option("root", args.root)
            .option("topic", args.source)
            .option("isolation.level", isolation_level)
            .option("minPartitions", str(READ_TASKS))
            .load()
        )

    result: dict[str, object] = {}
    for level in ("read_committed", "read_uncommitted"):
        context.setJobDescription(f"read {level}")
        frame = topic(level)
        result[level] = rows_of(frame)
        result[f"{level} tasks"] = frame.rdd.getNumPartitions()
    context.setJobDescription("write")
    frame = topic("read_committed")
    if args.hold:
        frame = frame.mapInArrow(held_rows(Path(args.hold), args.hold_mode), kafka_schema())
    frame = frame.select("key", "value")
    (
        frame.write.format("lakelog")
        .options(**storage)
        .option("root", args.root)
        .option("topic", args.dest)
        .option("transactional.id", f"cluster-job-{args.dest}")
        .option("batch.id", "0")
        .mode("append")
        .save()
    )
    if args.view:
        from lakelog.client.roots import Location
        from pipelines.materialize_committed_view import materialize_committed_view

        context.setJobDescription("view")
        options = {key.removeprefix("storage."): value for key, value in storage.items()}
        result["view"] = materialize_committed_view(spark, Location.of(args.root, options), args.source).version
    result["application"] = context.applicationId
    Path(args.result).write_text(json.dumps(result))
    spark.stop()


def kafka_schema():
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakelog.log.scan import KAFKA_SCHEMA

    return from_arrow_schema(KAFKA_SCHEMA)


if __name__ == "__main__":
    main()
