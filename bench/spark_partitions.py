"""Spark over many small partitions: a count, a committed-view refresh and a streaming micro-batch at 10, 100 and
1,000 partitions (10 and 100 with --quick), each against the same at 10 partitions (target <= 10x).

Each topic holds 5 records per partition (one append each), on a local root, in one local[2] session. Per
partition count, p50 of 3 (the first run of each kind, untimed, warms the JVM and the Python workers):

- count: `spark.read.format("lakelog").option("topic", t).load().count()`, read_committed; the driver's plan
  (`plan_scan`, one pinned snapshot per partition) is timed beside it;
- view refresh: `materialize_committed_view` of the whole topic into a view removed before each run;
- micro-batch: `spark.readStream.format("lakelog")` with `trigger(availableNow=True)` into Spark's `noop` sink,
  from a fresh checkpoint each run.

The same again on an S3 root (moto's server on loopback, as in bench/s3_emulator.py, its settings exported to
the session's executors), unless `--local-only`: the emulator answers in about a millisecond, so its figures show
the requests a read makes, not a real store's round trips. Ratios are each figure over the same figure at 10
partitions on the same root kind, measured in this run. Needs the JVM jars (./dev fetches them) for the view
refresh.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator

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
BUCKET = "lakelog-bench"


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False, s3: bool = True) -> _common.Result:
    result = _common.Result("spark_partitions")
    counts = COUNTS_QUICK if quick else COUNTS
    print(f"== spark_partitions: count, view refresh and micro-batch over {', '.join(map(str, counts))} partitions")
    with contextlib.ExitStack() as stack:
        # The emulator's settings exported before the session starts: its Python workers get the JVM's environment.
        emulator = stack.enter_context(_emulator()) if s3 else None
        spark = _spark.session("lakelog bench spark_partitions")
        stack.callback(spark.stop)
        for kind in ("local", "s3") if emulator is not None else ("local",):
            with _root(kind, root_parent, keep) as root:
                print(f"-- {kind} root {root}")
                figures = {partitions: _measure(spark, root, partitions) for partitions in counts}
            _report(result, kind, counts, figures)
    return result


@contextlib.contextmanager
def _emulator() -> Iterator[object]:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from s3emulator import S3Emulator  # the emulator is test tooling, shared with the benchmarks

    with S3Emulator() as emulator, emulator.exported():
        emulator.create_bucket(BUCKET)
        yield emulator


@contextlib.contextmanager
def _root(kind: str, root_parent: str | None, keep: bool) -> Iterator[str]:
    if kind == "local":
        with _common.temp_root(root_parent, keep) as root:
            yield root
        return
    from lakelog.store import initialise_root

    root = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
    initialise_root(root)
    yield root


def _report(result: _common.Result, kind: str, counts: tuple[int, ...], figures: dict[int, dict[str, float]]) -> None:
    kinds = (PLAN, COUNT, VIEW, BATCH)
    print(f"-- {kind} root:")
    _common.print_table(
        ["partitions", *(f"{kind} p50 s" for kind in kinds), *(f"{kind} / at 10" for kind in kinds[1:])],
        [
            [partitions, *(row[kind] for kind in kinds), *(row[kind] / figures[counts[0]][kind] for kind in kinds[1:])]
            for partitions, row in figures.items()
        ],
    )
    for partitions in counts[1:]:
        for step in (COUNT, VIEW, BATCH):
            ratio = figures[partitions][step] / figures[counts[0]][step]
            result.add(f"spark_partitions {kind} {step} at {partitions}/at {counts[0]}", ratio, TARGET)


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
    arguments = _common.parser(__doc__.splitlines()[0])
    arguments.add_argument("--local-only", action="store_true", help="leave out the S3 root")
    options = arguments.parse_args()
    run(options.quick, options.root, options.keep, s3=not options.local_only)
