"""A committed-view refresh of 1 M new rows vs a plain Delta append of the same rows by Spark (target <= 1.5).

A topic of 4 partitions (1 M records; 200 k with --quick) written as bench/_spark.py writes them: transactions of
50,000 records by two interleaving producers, one in ten aborted, plus plain batches. Each round, in turn, so
machine load hits all alike:

- view: `materialize_committed_view` on a view that holds none of the topic yet (its folder removed first): the
  plan, the read_committed rows read through Delta's reader at the planned versions, written by Spark, moved into
  the table, one strict commit with the positions. Every committed record is a new row;
- baseline, the same rows: the view's rows (already read_committed, as the last round's view left them) read with
  `format("delta")` and appended by Spark to a plain Delta table with `df.write.format("delta").mode("append")`
  (the table created empty before, untimed). Target <= 1.5;
- baseline, the topic's tables: each partition table read with `format("delta")` at the planned version
  (every row, aborted ones and markers too, no filter) and appended the same way (printed beside).

Local root. Needs the JVM jars (./dev fetches them).
"""

from __future__ import annotations

import shutil
import tempfile

from bench import _common, _spark
from lakelog import catalog
from lakelog.log.scan import plan_scan

TOPIC = "orders"
ROWS = 1_000_000
ROWS_QUICK = 200_000
ROUNDS = 3
ROUNDS_QUICK = 2
TARGET = 1.5
VIEW = "materialize_committed_view (refresh)"
SAME_ROWS = "Delta append of the view's rows (baseline)"
PARTITIONS = "Delta append of the partition tables' rows"


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    from pyspark.sql import functions as F

    from pipelines.materialize_committed_view import materialize_committed_view

    result = _common.Result("view_refresh")
    rows = ROWS_QUICK if quick else ROWS
    print(f"== view_refresh: a committed-view refresh of {rows:,} records vs a plain Delta append by Spark")
    with _common.temp_root(root_parent, keep) as root:
        committed = _spark.fill_topic(root, TOPIC, rows)
        scans = plan_scan(root, TOPIC)
        spark = _spark.session("lakelog bench view_refresh")
        plain = tempfile.mkdtemp(prefix="plain-", dir=root)
        columns = catalog.VIEW_SCHEMA.names
        view_location = catalog.view_path(root, TOPIC)
        times: dict[str, list[_spark.Timing]] = {VIEW: [], SAME_ROWS: [], PARTITIONS: []}
        try:
            if spark.conf.get("spark.sql.extensions", "") != "io.delta.sql.DeltaSparkSessionExtension":
                raise RuntimeError("no Delta Lake in the session: fetch lakelog's JVM jars (./dev, or lakelog jars fetch)")

            def empty_table(name: str) -> str:
                path = f"{plain}/{name}"
                shutil.rmtree(path, ignore_errors=True)
                spark.read.format("delta").load(view_location.uri).limit(0).write.format("delta").save(path)
                return path

            def view() -> int:
                view_location.io.delete_tree(view_location.uri)
                return materialize_committed_view(spark, root, TOPIC).rows

            def same_rows(path: str) -> None:
                spark.read.format("delta").load(view_location.uri).write.format("delta").mode("append").save(path)

            def partitions(path: str) -> None:
                frames = [
                    spark.read.format("delta").option("versionAsOf", scan.snapshot.version).load(scan.snapshot.uri)
                    for scan in scans
                ]
                union = frames[0]
                for frame in frames[1:]:
                    union = union.unionAll(frame)
                union = union.select(
                    "key",
                    "value",
                    F.lit(TOPIC).alias("topic"),
                    F.lit(0).alias("partition"),
                    "offset",
                    "timestamp",
                    F.lit(0).alias("timestampType"),
                    "headers",
                )
                union.select(*columns).write.format("delta").mode("append").save(path)

            for round_number in range(-1, ROUNDS_QUICK if quick else ROUNDS):  # round -1 warms up, untimed
                view_timing, written = _spark.timed(view)
                assert written == committed, (written, committed)
                path = empty_table("same")
                same_timing, _ = _spark.timed(lambda path=path: same_rows(path))
                assert spark.read.format("delta").load(path).count() == committed
                path = empty_table("partitions")
                partitions_timing, _ = _spark.timed(lambda path=path: partitions(path))
                if round_number >= 0:
                    times[VIEW].append(view_timing)
                    times[SAME_ROWS].append(same_timing)
                    times[PARTITIONS].append(partitions_timing)
        finally:
            spark.stop()
    wall = {name: _common.median([t.wall_s for t in timings]) for name, timings in times.items()}
    cpu = {name: _common.median([t.cpu_s for t in timings]) for name, timings in times.items()}
    _common.print_table(
        ["job", "p50 wall s", "p50 cpu s", "wall / base"],
        [[name, wall[name], cpu[name], wall[name] / wall[SAME_ROWS]] for name in times],
    )
    result.add("view_refresh view/Delta append of the same rows", wall[VIEW] / wall[SAME_ROWS], TARGET)
    result.add("view_refresh view/Delta append of the partition tables' rows", wall[VIEW] / wall[PARTITIONS])
    return result


if __name__ == "__main__":
    _common.cli(run, __doc__)
