"""Materializing a topic's read_committed view with Spark vs a plain Parquet copy of the same files.

A topic of 4 partitions (10 M records; 1 M with --quick) written as
transactions of 50,000 records by two interleaving producers, one in ten
aborted, plus plain batches. Each round, in turn:

- baseline: `spark.read.parquet` of the snapshot's active files written back
  with `df.write.parquet` (every row, aborted ones and markers too, no filter,
  no commit);
- view: `materialize_committed_view` from scratch (the view folder removed
  first): plan, read_committed rows through Spark's Parquet reader, write,
  move into the table, one strict Delta commit with the positions.

The ratio is median view time / median copy time (informational).
"""

from __future__ import annotations

import shutil
import tempfile

from bench import _common, _spark
from lakelog import catalog
from lakelog.log.scan import plan_scan

TOPIC = "orders"
ROWS = 10_000_000
ROWS_QUICK = 1_000_000
ROUNDS = 3
ROUNDS_QUICK = 2


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    from pipelines.materialize_committed_view import materialize_committed_view

    result = _common.Result("view_materialize")
    rows = ROWS_QUICK if quick else ROWS
    rounds = ROUNDS_QUICK if quick else ROUNDS
    print(f"== view_materialize: read_committed view of {rows:,} records vs a Spark Parquet copy")
    with _common.temp_root(root_parent, keep) as root:
        committed = _spark.fill_topic(root, TOPIC, rows)
        entries = [(scan.snapshot, entry) for scan in plan_scan(root, TOPIC) for entry in scan.files]
        files = [snapshot.file_path(entry) for snapshot, entry in entries]
        stored = sum(entry.num_records for _, entry in entries)
        print(f"   {committed:,} committed records of {stored:,} rows (markers and aborted ones too) in {len(files):,} files")
        spark = _spark.session("lakelog bench view_materialize")
        copies = tempfile.mkdtemp(prefix="copy-", dir=root)
        times: dict[str, list[_spark.Timing]] = {"copy": [], "view": []}
        try:
            for round_number in range(-1, rounds):  # round -1 warms up the JVM and the page cache, untimed
                target = f"{copies}/{round_number + 1}"

                def copy(target: str = target) -> None:  # defaults bind this iteration's values (called within it)
                    spark.read.parquet(*files).write.parquet(target)

                def view() -> int:
                    view_location = catalog.view_path(root, TOPIC)
                    view_location.io.delete_tree(view_location.uri)
                    return materialize_committed_view(spark, root, TOPIC).rows

                copy_timing, _ = _spark.timed(copy)
                shutil.rmtree(target, ignore_errors=True)
                view_timing, written = _spark.timed(view)
                assert written == committed, (written, committed)
                if round_number >= 0:
                    times["copy"].append(copy_timing)
                    times["view"].append(view_timing)
        finally:
            spark.stop()
    table = []
    for name, label in (("copy", "spark.read.parquet -> write.parquet (copy)"), ("view", "materialize_committed_view")):
        wall = _common.median([t.wall_s for t in times[name]])
        cpu = _common.median([t.cpu_s for t in times[name]])
        count = stored if name == "copy" else committed
        table.append([label, count, wall, cpu, count / wall / 1e6])
    _common.print_table(["job", "rows", "p50 wall s", "p50 cpu s", "M rows/s"], table)
    result.add("view_materialize view/parquet copy", table[1][2] / table[0][2])
    result.add("view_materialize view/parquet copy (cpu)", table[1][3] / table[0][3])
    return result


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
