"""Spark over many small partitions: a count, a committed-view refresh and a streaming micro-batch at 10, 100 and
1,000 partitions (10 and 100 with --quick), each against the same at 10 partitions (target <= 10x).

Each topic holds 5 records per partition (one append each), on a local root, in one local[2] session. Per
partition count, p50 of 3 (the first run of each kind, untimed, warms the JVM and the Python workers):

- count: `spark.read.format("lakelog").option("topic", t).load().count()`, read_committed; the driver's plan
  (`plan_scan`, one pinned snapshot per partition) is timed beside it;
- view refresh: `materialize_committed_view` of the whole topic into a view removed before each run;
- micro-batch: `spark.readStream.format("lakelog")` with `trigger(availableNow=True)` into Spark's `noop` sink,
  from a fresh checkpoint each run.

Ratios are each figure over the same figure at 10 partitions, measured in this run. Needs the JVM jars
(./dev fetches them) for the view refresh.
"""

from __future__ import annotations

import shutil
import tempfile

from bench import _common, _spark
from lakelog import catalog
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.scan import plan_scan

COUNTS = (10, 100, 1_000)
COUNTS_QUICK = (10, 100)
RECORDS = 5
ROUNDS = 3
TARGET = 10.0
COUNT = "count"
VIEW = "view refresh"
BATCH = "micro-batch"
PLAN = "plan_scan"


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("spark_partitions")
    counts = COUNTS_QUICK if quick else COUNTS
    print(f"== spark_partitions: count, view refresh and micro-batch over {', '.join(map(str, counts))} partitions")
    with _common.temp_root(root_parent, keep) as root:
        spark = _spark.session("lakelog bench spark_partitions")
        try:
            figures = {partitions: _measure(spark, root, partitions) for partitions in counts}
        finally:
            spark.stop()
    kinds = (PLAN, COUNT, VIEW, BATCH)
    _common.print_table(
        ["partitions", *(f"{kind} p50 s" for kind in kinds), *(f"{kind} / at 10" for kind in kinds[1:])],
        [
            [partitions, *(row[kind] for kind in kinds), *(row[kind] / figures[counts[0]][kind] for kind in kinds[1:])]
            for partitions, row in figures.items()
        ],
    )
    for partitions in counts[1:]:
        for kind in (COUNT, VIEW, BATCH):
            ratio = figures[partitions][kind] / figures[counts[0]][kind]
            result.add(f"spark_partitions {kind} at {partitions}/at {counts[0]}", ratio, TARGET)
    return result


def _measure(spark, root: str, partitions: int) -> dict[str, float]:
    from pipelines.materialize_committed_view import materialize_committed_view

    topic = f"wide-{partitions}"
    fill, _ = _spark.timed(lambda: _fill(root, topic, partitions))
    print(f"-- {partitions} partitions of {RECORDS} records (filled in {fill.wall_s:.1f} s)")
    expected = partitions * RECORDS

    def count() -> None:
        got = spark.read.format("lakelog").option("root", root).option("topic", topic).load().count()
        assert got == expected, (got, expected)

    def refresh() -> None:
        view = catalog.view_path(root, topic)
        view.io.delete_tree(view.uri)
        rows = materialize_committed_view(spark, root, topic).rows
        assert rows == expected, (rows, expected)

    def batch() -> None:
        checkpoint = tempfile.mkdtemp(prefix="checkpoint-")
        try:
            frame = spark.readStream.format("lakelog").option("root", root).option("topic", topic).load()
            query = frame.writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", checkpoint)
            running = query.start()
            running.awaitTermination()
            rows = sum(progress["numInputRows"] for progress in running.recentProgress)
            assert rows == expected, (rows, expected)
        finally:
            shutil.rmtree(checkpoint, ignore_errors=True)

    figures = {PLAN: _common.median([_spark.timed(lambda: plan_scan(root, topic))[0].wall_s for _ in range(ROUNDS)])}
    for kind, call in ((COUNT, count), (VIEW, refresh), (BATCH, batch)):
        call()  # warm-up
        figures[kind] = _common.median([_spark.timed(call)[0].wall_s for _ in range(ROUNDS)])
        print(f"   {kind}: {figures[kind]:.2f} s p50")
    return figures


def _fill(root: str, topic: str, partitions: int) -> None:
    create_topic(root, topic, partitions)
    for partition in range(partitions):
        open_partition(root, topic, partition).append(payload_table([f"{partition}-{i}".encode() for i in range(RECORDS)]))


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
