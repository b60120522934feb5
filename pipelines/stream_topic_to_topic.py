"""Spark Structured Streaming job: consume a topic, transform, produce to another topic, exactly once.

    spark-submit pipelines/stream_topic_to_topic.py --root R --source in --dest out --checkpoint C
    python -m pipelines.stream_topic_to_topic --root R --source in --dest out --checkpoint C [--available-now]

The source is `spark.readStream.format("lakelog")` (read_committed: each
micro-batch ends at every partition's LSO, so no aborted record and no record of
an open transaction is read); the sink is `writeStream.format("lakelog")`, which
writes each micro-batch as one transaction keyed by the query's checkpoint and
Spark's batch id. Killed anywhere, the job started again with the same
`--checkpoint` goes on from the checkpoint: a micro-batch whose transaction
committed is not written again, one whose transaction was open is aborted and
written again. So `--dest` holds every committed record of `--source` once.

The transform upper-cases each value and keeps its key; each output record
carries a header `lakelog.source` = `topic:partition:offset` of its input record,
so a reader can check the exactly-once claim.

Without `--available-now` the job runs until it has read everything committed
and has been idle for `--idle-seconds`, then stops; with it, one
`trigger(availableNow=True)` run (on PySpark 4.1 a single micro-batch up to the
LSOs at its start; see docs/streaming.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from lakelog.pipelines._args import storage_option_pairs

SOURCE_HEADER = "lakelog.source"


def transformed(stream: Any) -> Any:
    """The job's transform: upper-cased values, keys kept, the input's coordinates as a header."""
    from pyspark.sql import functions as F

    source = F.concat_ws(":", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))
    header = F.struct(F.lit(SOURCE_HEADER).alias("key"), source.cast("binary").alias("value"))
    return stream.select(
        F.col("key"),
        F.upper(F.col("value").cast("string")).cast("binary").alias("value"),
        F.array(header).alias("headers"),
    )


def start(
    spark: Any,
    root: str,
    source: str,
    dest: str,
    checkpoint: str,
    *,
    storage_options: dict[str, str] | None = None,
    max_offsets_per_trigger: int | None = None,
    available_now: bool = False,
) -> Any:
    """Start the streaming query; returns the StreamingQuery."""
    storage = {f"storage.{key}": value for key, value in (storage_options or {}).items()}
    reader = spark.readStream.format("lakelog").option("root", root).option("subscribe", source).options(**storage)
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    writer = (
        transformed(reader.load())
        .writeStream.format("lakelog")
        .option("root", root)
        .option("topic", dest)
        .option("checkpointLocation", checkpoint)
        .options(**storage)
        .queryName(f"lakelog {source} to {dest}")
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="500 milliseconds")
    return writer.start()


def run(query: Any, available_now: bool, idle_seconds: float) -> dict[str, Any]:
    """Wait for the query: to its end (availableNow), or until it has been idle `idle_seconds`; stop it."""
    try:
        if available_now:
            query.awaitTermination()
        else:
            idle_since = time.monotonic()
            seen = None
            while time.monotonic() - idle_since < idle_seconds:
                query.processAllAvailable()
                progress = query.lastProgress
                batch = progress["batchId"] if progress else None
                if batch != seen:
                    seen, idle_since = batch, time.monotonic()
                time.sleep(0.5)
        exception = query.exception()
        if exception is not None:
            raise exception
        records = sum(progress["numInputRows"] for progress in query.recentProgress)
        return {"batches": len(query.recentProgress), "records": records}
    finally:
        query.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--source", required=True, help="topic(s) to read, separated by commas")
    parser.add_argument("--dest", required=True, help="topic to write")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location (its identity)")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    storage = storage_option_pairs(parser, args.storage_option)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"lakelog stream {args.source} to {args.dest}").getOrCreate()
    started = time.monotonic()
    query = start(
        spark,
        args.root,
        args.source,
        args.dest,
        args.checkpoint,
        storage_options=storage,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        available_now=args.available_now,
    )
    report = run(query, args.available_now, args.idle_seconds)
    print(json.dumps({**report, "seconds": round(time.monotonic() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
