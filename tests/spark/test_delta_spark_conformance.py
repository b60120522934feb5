"""Delta Lake's own Spark connector (delta-spark) reads every table lakelog writes, on local and S3 roots.

The lake of tests/lake_kinds.py (appends, transactions with markers, aborts, compaction, retention, config changes,
lakelog's checkpoints, the internal logs), plus a committed view and a status table made by the jobs of pipelines/:
for every table, `spark.read.format("delta")` with `versionAsOf` gives exactly the rows lakelog's reader gives at
that version (every version of the topic's partitions on the local root; on S3, read through S3A, the first and the
latest of each table), and `DESCRIBE HISTORY` lists lakelog's commits. After log cleanup, the versions from the
oldest kept checkpoint on read the same through Delta's checkpoint reader. And delta-spark, a conforming writer, is
refused a lakelog table (its writer feature): no commit, the rows as they were.
"""

from __future__ import annotations

import datetime
import functools

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lake_kinds import lakelog_rows, tables_under, write_every_kind
from pyspark.sql import functions as F

from lakelog import AdminClient, NewTopic, Producer
from lakelog.store import Location, Table
from lakelog.store.delta.log import DeltaLog
from lakelog.store.upkeep.cleanup import vacuum
from lakelog.store.upkeep.maintenance import cleanup_log
from pipelines.materialize_committed_view import materialize_committed_view
from pipelines.partition_status import partition_status

pytestmark = [pytest.mark.spark, pytest.mark.roots("local", "s3")]

# The column that tells the versions apart in one read of several (no table lakelog writes has it).
VERSION_TAG = "__conformance_version"


@pytest.fixture
def delta(spark):
    """The shared session, which must have Delta Lake's Spark connector (./dev fetches it): no silent skip."""
    assert spark.conf.get("spark.sql.extensions", "") == "io.delta.sql.DeltaSparkSessionExtension", (
        "the shared Spark session has no Delta Lake: its JVM jars are not fetched (./dev, or lakelog jars fetch)"
    )
    return spark


def comparable(value):
    """A value as both readers give it: Spark's timestamps come back in the session's zone (UTC), lakelog's naive."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    if isinstance(value, list):
        return [comparable(item) for item in value]
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    return value


def rows_of(table: pa.Table) -> list[str]:
    return sorted(repr(tuple(comparable(value) for value in row.values())) for row in table.to_pylist())


def spark_uri(location: Location) -> str:
    return location.uri


def read_delta(spark, location: Location, version: int) -> pa.Table:
    return spark.read.format("delta").option("versionAsOf", version).load(spark_uri(location)).toArrow()


def assert_same_at(spark, location: Location, versions: list[int]) -> None:
    """delta-spark's rows at each of `versions` are lakelog's: one Spark job reads them all (each version's frame
    tagged with its number, unioned), since a job per version costs a second or more of scheduling alone."""
    frames = [spark.read.format("delta").option("versionAsOf", version).load(spark_uri(location)) for version in versions]
    tagged = [frame.withColumn(VERSION_TAG, F.lit(version)) for frame, version in zip(frames, versions, strict=True)]
    theirs = functools.reduce(lambda one, other: one.unionByName(other, allowMissingColumns=True), tagged).toArrow()
    tags = theirs.column(VERSION_TAG)
    for frame, version in zip(frames, versions, strict=True):
        mine = Table.open(location, version=version)
        where = f"{location.uri} at version {version}"
        assert frame.columns == mine.schema.names, where
        at_version = theirs.filter(pc.equal(tags, version)).select(frame.columns)
        assert rows_of(at_version) == rows_of(lakelog_rows(mine)), where


def write_views_and_status(spark, root: str) -> None:
    """A committed view and a status table of a topic `viewed` (a committed and an aborted transaction), each made
    and then refreshed after more records (two commits each)."""
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("viewed", num_partitions=2)])["viewed"].result()
    producer = Producer({"lakelog.root": root, "transactional.id": "viewed"})
    producer.init_transactions()
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for partition in range(2):
            producer.produce("viewed", value=f"{outcome}-{partition}", key="k", partition=partition)
        producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
        if outcome == "abort":
            materialize_committed_view(spark, root, "viewed")
            partition_status(spark, root, "viewed")
    producer.close()
    materialize_committed_view(spark, root, "viewed")
    partition_status(spark, root, "viewed")


def versions_to_read(location: Location, latest: int, every: bool) -> list[int]:
    """With `every`, every version of the partitions of `events` (every kind of commit is among them: appends,
    markers, aborts, compaction, retention, config changes, a checkpoint's); else, and for the other tables, the
    first and the latest. A delta-spark read costs a second or more, and delta-rs checks every version of every
    table (tests/integration/test_delta_conformance.py)."""
    if every and "/topics/events/" in location.uri:
        return list(range(latest + 1))
    return sorted({min(1, latest), latest})


def test_delta_spark_reads_every_table_lakelog_writes_as_lakelog_reads_it(delta, root, root_kind):
    write_every_kind(root)
    write_views_and_status(delta, root)
    tables = tables_under(root)
    names = " ".join(table.uri for table in tables)
    for kind in ("topics/events/0", "views/viewed", "status/viewed", "__transaction_state", "__consumer_offsets"):
        assert kind in names, (kind, names)
    checked = 0
    for location in tables:
        latest = Table.open(location)
        # On S3 (through S3A) the first and latest versions of each table; every version on the local root.
        versions = versions_to_read(location, latest.version, every=root_kind == "local")
        assert_same_at(delta, location, versions)
        checked += len(versions)
        history = delta.sql(f"DESCRIBE HISTORY delta.`{spark_uri(location)}`").select("version", "operation").collect()
        assert [(row.version, row.operation) for row in history] == [
            (entry["version"], entry.get("operation")) for entry in latest.history(latest.version + 1)
        ], location.uri
    assert checked > (25 if root_kind == "local" else 15), checked
    # After log cleanup: the versions from the oldest kept checkpoint on, through Delta's checkpoint reader.
    events = Location.of(root) / "topics" / "events" / "0"
    table = Table.open(events)
    cleanup_log(table, keep_checkpoints=1, retention_s=0)
    checkpoints = sorted(int(name[:20]) for name in DeltaLog(events).names() if name.endswith(".checkpoint.parquet"))
    assert checkpoints and f"{checkpoints[0] - 1:020d}.json" not in set(DeltaLog(events).names())
    assert_same_at(delta, events, list(range(checkpoints[0], table.version + 1)))


def test_delta_spark_refuses_to_write_a_lakelog_partition_and_its_table_is_unchanged(delta, root, topic):
    """Its writer feature lakelogStrictCommit, which only lakelog implements, makes a conforming writer refuse.

    delta-spark checks the protocol when it commits, after writing its data files: a refused append leaves no commit
    (the log, the version and the rows are as before) but an uncommitted Parquet file in the folder, as any failed
    Delta write does; lakelog's vacuum deletes such files once they are older than the table's retention.
    """
    name = topic()
    producer = Producer({"lakelog.root": root, "linger.ms": 0})
    for index in range(3):
        producer.produce(name, value=f"v{index}", partition=0)
    producer.close()
    location = Location.of(root) / "topics" / name / "0"
    before = Table.open(location)
    log_listing = sorted(entry.name for entry in (location / "_delta_log").list(recursive=True))
    files = {entry.name for entry in location.list() if not entry.is_dir}
    rows = delta.read.format("delta").load(spark_uri(location))
    attempts = {
        "append": lambda: rows.limit(1).write.format("delta").mode("append").save(spark_uri(location)),
        "overwrite": lambda: rows.limit(1).write.format("delta").mode("overwrite").save(spark_uri(location)),
        "delete": lambda: delta.sql(f"DELETE FROM delta.`{spark_uri(location)}` WHERE offset = 0"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(Exception, match="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE.*lakelogStrictCommit"):
            attempt()
        assert sorted(entry.name for entry in (location / "_delta_log").list(recursive=True)) == log_listing, what
    after = Table.open(location)
    assert after.version == before.version and sorted(after.data_paths()) == sorted(before.data_paths())
    assert rows_of(read_delta(delta, location, after.version)) == rows_of(lakelog_rows(before))
    left = {entry.name for entry in location.list() if not entry.is_dir} - files
    uncommitted = {name for name in left if not name.startswith(".")}
    assert uncommitted and all(name.endswith(".parquet") for name in uncommitted), left
    assert set(vacuum(after, dry_run=True, now_ms=2**62)) == uncommitted


@pytest.mark.roots("local")  # Delta's streaming source on one root; S3 reads are checked above
def test_a_delta_stream_over_a_committed_view_gets_each_row_once_across_a_restart(delta, root, tmp_path):
    """`spark.readStream.format("delta")` of `views/<topic>`, stopped and started again from its checkpoint while
    the view job appends: the sink holds every row of the view exactly once."""
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("streamed", num_partitions=2)])["streamed"].result()
    view = Location.of(root) / "views" / "streamed"
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")

    def produce_and_refresh(first: int) -> None:
        producer = Producer({"lakelog.root": root, "transactional.id": "streamed"})
        producer.init_transactions()
        for outcome in ("commit", "abort"):
            producer.begin_transaction()
            for index in range(first, first + 5):
                producer.produce("streamed", key=f"k{index}", value=f"{outcome}-{index}", partition=index % 2)
            producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
        producer.close()
        materialize_committed_view(delta, root, "streamed")

    def run_stream() -> None:
        stream = delta.readStream.format("delta").load(spark_uri(view))
        query = stream.writeStream.format("parquet").option("checkpointLocation", checkpoint).trigger(availableNow=True)
        query.start(sink).awaitTermination(300)

    produce_and_refresh(0)
    run_stream()
    produce_and_refresh(5)
    produce_and_refresh(10)
    run_stream()  # the same query, restarted from its checkpoint
    streamed = delta.read.parquet(sink).toArrow()
    in_view = lakelog_rows(Table.open(view))
    assert streamed.num_rows == in_view.num_rows == 15
    assert rows_of(streamed.select(in_view.column_names)) == rows_of(in_view)
