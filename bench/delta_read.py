"""lakelog's Spark reads of a topic through Delta's reader vs a plain `spark.read.format("delta")` of its tables.

One topic of 4 partitions (1 M records; 200 k with --quick) written as bench/_spark.py writes them: transactions
of 50,000 records by two interleaving producers, one in ten aborted, plus plain batches. Each round scans it
these ways, in turn, so machine load hits all alike; every scan computes max(xxhash64(all columns)):

- baseline: `spark.read.format("delta")` of each partition table at the version the scan plan decided on
  (`versionAsOf`), unioned: every row, aborted ones and markers included (read_uncommitted, what Delta gives);
- `read_topic` through Delta: pyspark_lakelog, read_committed: the same Delta reads (`versionAsOf` the planned
  version) with the plan as a filter (the LSO cut and the aborted transactions). Target <= 1.2 (local root);
- without Delta: the same plan read as a session without lakelog's jars reads it (Spark's Parquet reader of the
  plan's files on a local root, Spark tasks through lakelog's file IO on S3);
- `format("lakelog")`: read_committed, the Python data source (`spark.read.format("lakelog")` itself).

`bench.delta_read_s3` runs the same on the S3 emulator, where Spark reads through S3A (target <= 1.3).
Needs the JVM jars (./dev fetches them).
"""

from __future__ import annotations

from bench import _common, _spark
from lakelog.log.scan import plan_scan

TOPIC = "delta-read"
ROWS = 1_000_000
ROWS_QUICK = 200_000
ROUNDS = 3
ROUNDS_QUICK = 2
TARGET = 1.2
BASELINE = 'format("delta") versionAsOf (baseline)'
THROUGH_DELTA = "read_topic through Delta (versionAsOf + filter)"
WITHOUT_DELTA = "read_topic without Delta (fallback)"
SOURCE = 'format("lakelog") (Python data source)'


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("delta_read")
    with _common.temp_root(root_parent, keep) as root:
        measure(result, root, quick, "delta_read", TARGET)
    return result


def measure(result: _common.Result, root: str, quick: bool, name: str, target: float) -> None:
    """Fill a topic under `root` (local or S3) and time the four reads of it; ratio lines into `result`."""
    from pyspark.sql import functions as F

    from pyspark_lakelog import read_topic, scan_dataframe

    rows = ROWS_QUICK if quick else ROWS
    print(f"== {name}: read_committed scans of {rows:,} records in {_spark.PARTITIONS} partitions vs format('delta'), {root}")
    spark = _spark.session(f"lakelog bench {name}")
    try:
        if spark.conf.get("spark.sql.extensions", "") != "io.delta.sql.DeltaSparkSessionExtension":
            raise RuntimeError("no Delta Lake in the session: fetch lakelog's JVM jars (./dev, or lakelog jars fetch)")
        committed = _spark.fill_topic(root, TOPIC, rows)
        scans = plan_scan(root, TOPIC)
        # The scan plan (lakelog's snapshots, LSO, aborted transactions) is part of every lakelog read; the baseline
        # reuses this one.
        plans = [_spark.timed(lambda: plan_scan(root, TOPIC))[0].wall_s for _ in range(3)]
        print(f"   plan_scan: {_common.median(plans):.2f} s p50 (part of each lakelog read, not of the baseline)")

        def baseline():
            frames = [
                spark.read.format("delta").option("versionAsOf", scan.snapshot.version).load(scan.snapshot.uri) for scan in scans
            ]
            union = frames[0]
            for frame in frames[1:]:
                union = union.unionAll(frame)
            return union.select("offset", "timestamp", "key", "value", "headers")

        ways = {
            BASELINE: baseline,
            THROUGH_DELTA: lambda: read_topic(spark, root, TOPIC),
            WITHOUT_DELTA: lambda: scan_dataframe(spark, plan_scan(root, TOPIC), through_delta=False),
            SOURCE: lambda: spark.read.format("lakelog").option("root", root).option("topic", TOPIC).load(),
        }

        def scan(make) -> int:
            frame = make()
            return frame.select(F.max(F.xxhash64(*frame.columns)), F.count(F.lit(1))).collect()[0][1]

        counts = {way: scan(make) for way, make in ways.items()}  # warm-up
        assert all(counts[way] == committed for way in ways if way != BASELINE), counts
        walls: dict[str, list[float]] = {way: [] for way in ways}
        cpus: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(ROUNDS_QUICK if quick else ROUNDS):
            for way, make in ways.items():
                timing, _ = _spark.timed(lambda make=make: scan(make))
                walls[way].append(timing.wall_s)
                cpus[way].append(timing.cpu_s)
        wall = {way: _common.median(times) for way, times in walls.items()}
        cpu = {way: _common.median(times) for way, times in cpus.items()}
        _common.print_table(
            ["scan", "rows", "p50 wall s", "p50 cpu s", "M rows/s", "wall / base"],
            [[way, counts[way], wall[way], cpu[way], counts[way] / wall[way] / 1e6, wall[way] / wall[BASELINE]] for way in ways],
        )
        result.add(f"{name} read_topic through Delta/format(delta)", wall[THROUGH_DELTA] / wall[BASELINE], target)
        result.add(f"{name} without Delta/format(delta)", wall[WITHOUT_DELTA] / wall[BASELINE])
        result.add(f"{name} python data source/format(delta)", wall[SOURCE] / wall[BASELINE])
    finally:
        spark.stop()


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
