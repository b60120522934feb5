"""End-to-end throughput of a Structured Streaming job (lakelog source -> transform -> exactly-once lakelog sink) vs a
batch read plus batch write of the same records.

A topic of 4 partitions (1 M records; 200,000 with --quick) written as
transactions of 50,000 records by two interleaving producers, one in ten
aborted, plus plain batches (bench/_spark.fill_topic). Each round, in turn, into
a fresh output topic:

- batch: `spark.read.format("lakelog")` (read_committed) -> upper-cased values ->
  `.write.format("lakelog")` with a transactional.id and batch.id (one transaction);
- stream: `spark.readStream.format("lakelog")` -> the same transform ->
  `.writeStream.format("lakelog")` with a fresh checkpoint, `trigger(availableNow=True)`
  (on PySpark 4.1 one micro-batch to the LSOs at the start), awaited to its end;
  this includes the query's start and its checkpoint writes.

Both write every committed record once (checked). The ratio is the median
stream time / median batch time; target <= 1.5.
"""

from __future__ import annotations

import tempfile
from typing import Any

from bench import _common, _spark
from lakelog.log import create_topic
from lakelog.log.scan import plan_scan

TOPIC = "events"
ROWS = 1_000_000
ROWS_QUICK = 200_000
ROUNDS = 3
ROUNDS_QUICK = 1
TARGET = 1.5


def transform(frame: Any) -> Any:
    from pyspark.sql import functions as F

    return frame.select("key", F.upper(F.col("value").cast("string")).cast("binary").alias("value"))


def output_records(root: str, topic: str) -> int:
    return sum(scan.end_offset - scan.start_offset for scan in plan_scan(root, topic)) - _markers(root, topic)


def _markers(root: str, topic: str) -> int:
    # One COMMIT marker per partition the single transaction wrote.
    return sum(1 for scan in plan_scan(root, topic) if scan.end_offset > scan.start_offset)


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("stream_throughput")
    rows = ROWS_QUICK if quick else ROWS
    rounds = ROUNDS_QUICK if quick else ROUNDS
    print(f"== stream_throughput: streaming source -> transform -> exactly-once sink vs batch read + write, {rows:,} records")
    with _common.temp_root(root_parent, keep) as root:
        committed = _spark.fill_topic(root, TOPIC, rows)
        print(f"   {committed:,} committed records of {rows:,} written ({_spark.PARTITIONS} partitions)")
        spark = _spark.session("lakelog bench stream_throughput")
        checkpoints = tempfile.mkdtemp(prefix="checkpoints-")
        times: dict[str, list[_spark.Timing]] = {"batch": [], "stream": []}
        try:
            for round_number in range(-1, rounds):  # round -1 warms up the JVM, the workers and the page cache, untimed
                batch_out, stream_out = f"batch-{round_number + 1}", f"stream-{round_number + 1}"
                for topic in (batch_out, stream_out):
                    create_topic(root, topic, _spark.PARTITIONS)

                def batch(topic: str = batch_out) -> None:  # defaults bind this iteration's values (called within it)
                    frame = spark.read.format("lakelog").option("root", root).option("topic", TOPIC).load()
                    transform(frame).write.format("lakelog").mode("append").option("root", root).option("topic", topic).option(
                        "transactional.id", f"bench-{topic}"
                    ).option("batch.id", "0").save()

                def stream(topic: str = stream_out, checkpoint: str = f"{checkpoints}/{round_number + 1}") -> None:
                    frame = spark.readStream.format("lakelog").option("root", root).option("subscribe", TOPIC).load()
                    query = (
                        transform(frame)
                        .writeStream.format("lakelog")
                        .option("root", root)
                        .option("topic", topic)
                        .option("checkpointLocation", checkpoint)
                        .trigger(availableNow=True)
                        .start()
                    )
                    query.awaitTermination()
                    if query.exception() is not None:
                        raise RuntimeError(str(query.exception()))

                batch_timing, _ = _spark.timed(batch)
                stream_timing, _ = _spark.timed(stream)
                for topic in (batch_out, stream_out):
                    written = output_records(root, topic)
                    assert written == committed, (topic, written, committed)
                if round_number >= 0:
                    times["batch"].append(batch_timing)
                    times["stream"].append(stream_timing)
        finally:
            spark.stop()
    table = []
    for name, label in (
        ("batch", "read.format(lakelog) -> write.format(lakelog)"),
        ("stream", "readStream -> writeStream (availableNow)"),
    ):
        wall = _common.median([t.wall_s for t in times[name]])
        cpu = _common.median([t.cpu_s for t in times[name]])
        table.append([label, committed, wall, cpu, committed / wall])
    _common.print_table(["job", "records", "p50 wall s", "p50 cpu s", "records/s"], table)
    result.add("stream_throughput stream/batch", table[1][2] / table[0][2], TARGET)
    result.add("stream_throughput stream/batch (cpu)", table[1][3] / table[0][3])
    return result


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
