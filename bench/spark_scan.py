"""Spark read_committed scans of a topic vs `spark.read.parquet` of the same files.

Two topics of 4 partitions (4 M records each; 400 k with --quick) written as
transactions of 50,000 records by two interleaving producers, one in ten
aborted, plus plain batches: one of JSON order values (compressible, as event
payloads are), one of random bytes. Each round scans a topic these ways, in turn, so
machine load hits all alike; every scan computes max(xxhash64(all columns)),
which touches every byte of every row (a count or a no-op sink would let
Parquet skip the values):

- baseline: `spark.read.parquet` of the snapshot's active files, no filter
  (so it also returns aborted rows and markers), the Kafka columns it has;
- baseline per partition: the same, one read per partition with the partition
  number as a literal, unioned (the shape a Kafka-schema result needs);
- `read_topic`: pyspark_lakelog.frames, the scan plan as a filter on Spark's
  Parquet reader (what the jobs use);
- `format("lakelog")`: the Python data source (reads through PartitionLog.fetch
  in Python workers, ships Arrow batches to the JVM).

Ratios are median wall times over the baseline's. Target: read_topic / baseline <= 1.3.
"""

from __future__ import annotations

from bench import _common, _spark
from lakelog.log.scan import plan_scan

TOPIC = "scan"
ROWS = 4_000_000
ROWS_QUICK = 400_000
ROUNDS = 5
ROUNDS_QUICK = 3
TARGET = 1.3
BASELINE = "spark.read.parquet (baseline)"
PER_PARTITION = "spark.read.parquet per partition"
READ_TOPIC = "read_topic (Parquet + filter)"
SOURCE = 'format("lakelog") (Python data source)'


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("spark_scan")
    rows = ROWS_QUICK if quick else ROWS
    rounds = ROUNDS_QUICK if quick else ROUNDS
    print(f"== spark_scan: read_committed scans of {rows:,} records in {_spark.PARTITIONS} partitions vs spark.read.parquet")
    with _common.temp_root(root_parent, keep) as root:
        spark = _spark.session("lakelog bench spark_scan")
        try:
            for values in ("json", "random"):
                _scan_topic(spark, root, values, rows, rounds, result)
        finally:
            spark.stop()
    return result


def _scan_topic(spark, root: str, values: str, rows: int, rounds: int, result: _common.Result) -> None:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from pyspark_lakelog import read_topic

    topic = f"{TOPIC}-{values}"
    committed = _spark.fill_topic(root, topic, rows, values=values)
    scans = plan_scan(root, topic)
    files = {scan.partition: [scan.snapshot.file_path(entry) for entry in scan.files] for scan in scans}
    schema = "offset long, timestamp timestamp, key binary, value binary, headers array<struct<key:string,value:binary>>"
    all_files = [path for paths in files.values() for path in paths]
    print(f"-- {values} values: {committed:,} committed records in {len(all_files):,} files")

    def baseline() -> DataFrame:
        return spark.read.schema(schema).parquet(*all_files)

    def baseline_per_partition() -> DataFrame:
        frames = [
            spark.read.schema(schema).parquet(*paths).withColumn("partition", F.lit(partition))
            for partition, paths in files.items()
        ]
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionAll(frame)
        return union

    ways = {
        BASELINE: baseline,
        PER_PARTITION: baseline_per_partition,
        READ_TOPIC: lambda: read_topic(spark, root, topic),
        SOURCE: lambda: spark.read.format("lakelog").option("root", root).option("topic", topic).load(),
    }

    def scan(make) -> int:
        frame = make()
        return frame.select(F.max(F.xxhash64(*frame.columns)), F.count(F.lit(1))).collect()[0][1]

    counts = {name: scan(make) for name, make in ways.items()}  # warm-up: JVM, page cache, Python workers
    assert counts[READ_TOPIC] == committed and counts[SOURCE] == committed, counts
    walls: dict[str, list[float]] = {name: [] for name in ways}
    cpus: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, make in ways.items():
            timing, _ = _spark.timed(lambda make=make: scan(make))
            walls[name].append(timing.wall_s)
            cpus[name].append(timing.cpu_s)
    wall = {name: _common.median(times) for name, times in walls.items()}
    cpu = {name: _common.median(times) for name, times in cpus.items()}
    _common.print_table(
        ["scan", "rows", "p50 wall s", "p50 cpu s", "M rows/s", "wall / base", "cpu / base"],
        [
            [
                name,
                counts[name],
                wall[name],
                cpu[name],
                counts[name] / wall[name] / 1e6,
                wall[name] / wall[BASELINE],
                cpu[name] / cpu[BASELINE],
            ]
            for name in ways
        ],
    )
    result.add(f"spark_scan {values} read_topic/spark.read.parquet", wall[READ_TOPIC] / wall[BASELINE], TARGET)
    result.add(f"spark_scan {values} read_topic/spark.read.parquet per partition", wall[READ_TOPIC] / wall[PER_PARTITION])
    result.add(f"spark_scan {values} python data source/spark.read.parquet", wall[SOURCE] / wall[BASELINE])
    result.add(f"spark_scan {values} read_topic/python data source", wall[READ_TOPIC] / wall[SOURCE])


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
