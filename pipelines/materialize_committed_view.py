"""Spark job: append a topic's newly committed rows to its read_committed view `<root>/views/<topic>`, exactly once.

The view is a Delta table in the Kafka source's columns. Its progress is in the
table itself: each commit records, as Delta `txn` versions, the offset up to
which it holds each partition (`lakelog.view.position.<partition>`), in the
same commit as the rows. A run:

1. reads the view's snapshot v and its positions;
2. plans a read_committed scan of every partition from its position to its LSO
   (lakelog.log.scan), and has Spark write those rows as Parquet files in the
   table folder under names no other run uses, in no commit yet;
3. commits the files, with the new positions, as exactly version v+1 (strict:
   no retry, no rebase).

How step 2 writes depends on the root (`pyspark_lakelog.reads_natively`). On a
local root Spark reads the rows (through Delta's reader at the planned
versions where the session has it, pyspark_lakelog.frames), writes with its
own writer into a staging folder (`<view>/_staging/<run>/`), and the run then
moves the files into the table folder. On an S3 root each Spark task writes
its rows as one Parquet file straight into the table folder through lakelog's
file IO (one PUT, so a file is whole or absent), returning its name and row
count: no staging and no move, so the fault points "written" and "moved" are
one state there. The rows come from Delta's reader through S3A where the
session has it (`reads_through_delta`), else each task reads its piece of the
plan through lakelog's file IO.

A run killed anywhere before step 3's commit leaves the view as it was (its
files are in no commit; vacuum removes them, and the next run removes staging
folders a day old), and the next run starts from the same positions; killed
after it, the next run starts from the new ones. So no row is ever missing or
twice. A run that loses the commit to another run deletes its files, waits
through the one retry policy (lakelog.store.retry) and decides again on the
new snapshot; past the deadline it gives up with KafkaTimeout. Every byte
under the root is read, written, listed, moved and deleted through the root's
file IO (`lakelog.store`).

A topic with a quality suite gates its view: before step 3 the run
validates its new rows (read back from the files it wrote, nothing else)
against the suite. An `enforce` failure records the result, deletes the run's
files and raises PolicyViolation: no commit, the view stays as it was, and the
job exits non-zero with one line. A pass, or a `warn` failure, commits with the
validation id in the commit's metadata (`lakelog.quality.validation_id`) and
records the result after the commit, so a run killed in between leaves no
row rather than a false one. `dead-letter` acts as `warn` here: the rows are
committed in the topic already, and a view is a copy of them, so there is no
other place to send them.

    spark-submit pipelines/materialize_committed_view.py --root R --topic T
    python -m pipelines.materialize_committed_view --root R --topic T
    materialize_committed_view(spark, root, topic)     # from Python
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lakelog import catalog
from lakelog.client.retry import DEFAULT_POLICY, Backoff
from lakelog.client.roots import Location, open_root, partition_count
from lakelog.errors import CommitConflict, PolicyViolation
from lakelog.log import READ_COMMITTED
from lakelog.log.scan import LATEST, PartitionScan, plan_scan
from lakelog.pipelines._args import storage_option_pairs
from lakelog.pipelines._commit import wait_after_lost_commit
from lakelog.quality.gate import Verdict, gated_suites, judge
from lakelog.quality.results import OffsetRange, offset_ranges_of, record_result
from lakelog.quality.suites import Suite
from lakelog.store import Table
from lakelog.store.fileio import one_line
from lakelog.store.maintenance import vacuum

logger = logging.getLogger(__name__)

POSITION_APP_ID = "lakelog.view.position.{partition}"
STAGING_DIR = "_staging"
# Staging folders of runs killed this long ago are removed by the next run.
STALE_STAGING_S = 24 * 3600
# How long a run keeps deciding again after lost commit races (Kafka's delivery.timeout.ms default).
COMMIT_TIMEOUT_S = 120.0
# Files of killed runs (in no commit) are vacuumed once this old; a live run commits its files within seconds.
VIEW_CONFIGURATION = {"delta.deletedFileRetentionDuration": "interval 3600 seconds"}
# Fault points, in the order a run meets them (tests SIGKILL a run at one of them): the plan is made, nothing
# written; the rows are written (staged, or already in the table folder); the files are in the table folder, in
# no commit; the commit is made, the staging folder not yet removed.
FAULT_PLANNED = "planned"
FAULT_WRITTEN = "written"
FAULT_MOVED = "moved"
FAULT_COMMITTED = "committed"
# The commit-info key of a gated refresh's commit: the id of the validation of its rows.
VALIDATION_METADATA_KEY = "lakelog.quality.validation_id"
# The exit code of a refresh its topic's suite refused (the CLI's code for a refused request).
EXIT_REFUSED = 2

Fault = Callable[[str], None]


@dataclass(frozen=True)
class ViewReport:
    """What a run did: the view version it committed (None if there was nothing new), rows and positions."""

    version: int | None
    rows: int
    positions: dict[int, int] = field(default_factory=dict)
    # The validation of the committed rows, if the topic has a suite (its id is in the commit's metadata).
    validation_id: str | None = None


def materialize_committed_view(
    spark: Any, root: str | Location, topic: str, *, fault: Fault | None = None, backoff: Backoff | None = None
) -> ViewReport:
    """Append `topic`'s rows committed since the last run to `<root>/views/<topic>`; see the module docstring.

    Lost commit races wait on `backoff` (default: the retry policy's defaults, COMMIT_TIMEOUT_S);
    KafkaTimeout once its deadline has passed, the view then holds what other runs committed.
    """
    from pyspark_lakelog import reads_natively

    root = open_root(root)  # UnresolvedRoot if it is no root
    num_partitions = partition_count(root, topic)
    suite = gated_suites(root, [topic]).get(topic)  # None: ungated, and no GX import
    view, _ = Table.create(catalog.view_path(root, topic), catalog.VIEW_SCHEMA, VIEW_CONFIGURATION)
    native = reads_natively(view.location)
    if native:
        _remove_stale_staging(view)
    hit = fault or (lambda point: None)
    backoff = DEFAULT_POLICY.start(COMMIT_TIMEOUT_S) if backoff is None else backoff
    while True:
        view.refresh()
        positions = {partition: view_position(view, partition) for partition in range(num_partitions)}
        scans = plan_scan(root, topic, READ_COMMITTED, positions, LATEST)
        ends = {scan.partition: scan.end_offset for scan in scans if scan.end_offset > positions[scan.partition]}
        if not ends:
            return ViewReport(None, 0, positions)
        hit(FAULT_PLANNED)
        run = uuid.uuid4().hex
        staging = view.location / STAGING_DIR / run if native else None
        if staging is not None:
            _write_with_spark(spark, scans, staging)
            hit(FAULT_WRITTEN)
            written = _move_into_table(view, staging, run)
        else:
            written = _write_s3(spark, view, scans, run)
            hit(FAULT_WRITTEN)
        hit(FAULT_MOVED)
        names = sorted(written)
        versions = {POSITION_APP_ID.format(partition=partition): end for partition, end in ends.items()}
        verdict, ranges = _judge_refresh(root, view, topic, suite, names, staging) if suite is not None else (None, [])
        metadata = {VALIDATION_METADATA_KEY: verdict.validation_id} if verdict is not None else None
        try:
            version = view.commit_files(names, catalog.VIEW_SCHEMA, app_versions=versions, metadata=metadata)
        except CommitConflict:
            for name in names:
                view.io.delete(view.child_uri(name))
            _delete_quietly(staging)
            wait_after_lost_commit(backoff, logger, f"view of {topic}")
            continue
        hit(FAULT_COMMITTED)
        if verdict is not None:
            # After the commit: a run killed before this line leaves no result row, never one for rows not committed.
            record_result(
                root,
                verdict.result,
                validation_id=verdict.validation_id,
                load_unit=f"view:{topic}:v{version}",
                offset_ranges=ranges,
            )
        _delete_quietly(staging)
        _vacuum_quietly(view)
        validation_id = verdict.validation_id if verdict is not None else None
        return ViewReport(version, sum(written.values()), {**positions, **ends}, validation_id)


def _judge_refresh(
    root: Location, view: Table, topic: str, suite: Suite, names: list[str], staging: Location | None
) -> tuple[Verdict, list[OffsetRange]]:
    """Validate the run's new rows (its own files, in no commit yet) and say where they are; an enforce failure
    records its result, deletes the files and raises PolicyViolation, so the view stays as it was (S11.1, S8.3)."""
    import pyarrow as pa

    chunks = [view.io.read_parquet(view.child_uri(name)) for name in names]
    rows = pa.concat_tables(chunks) if chunks else catalog.VIEW_SCHEMA.empty_table()
    verdict = judge(suite, topic, rows)
    ranges = list(offset_ranges_of(rows))
    if verdict.publish:
        return verdict, ranges
    record_result(
        root,
        verdict.result,
        validation_id=verdict.validation_id,
        load_unit=f"view:{topic}:v{view.version + 1}",
        offset_ranges=ranges,
    )
    for name in names:
        view.io.delete(view.child_uri(name))
    _delete_quietly(staging)
    logger.warning(
        "view of %s: the refresh failed suite %s (enforce): nothing committed, the view stays at version %d",
        topic,
        suite.name,
        view.version,
    )
    raise verdict.violation()


def view_position(view: Table, partition: int) -> int:
    """The offset up to which the view holds `partition` (0 if it holds none of it yet)."""
    return view.app_version(POSITION_APP_ID.format(partition=partition)) or 0


def _write_with_spark(spark: Any, scans: list[PartitionScan], staging: Location) -> None:
    """Spark's Parquet reader and writer: the plan's rows as part files in the staging folder (roots Spark reads)."""
    from pyspark_lakelog import scan_dataframe

    with _timestamps_as_micros(spark):
        scan_dataframe(spark, scans).write.mode("errorifexists").parquet(staging.uri)


def _move_into_table(view: Table, staging: Location, run: str) -> dict[str, int]:
    """Spark's part files, renamed into the table folder (Delta paths relative to it): {name: rows}."""
    parts = sorted(
        entry.name
        for entry in staging.list()
        if not entry.is_dir and entry.name.startswith("part-") and entry.name.endswith(".parquet")
    )
    written = {}
    for index, part in enumerate(parts):
        name = f"part-{run}-{index:05d}.parquet"
        target = view.child_uri(name)
        view.io.move((staging / part).uri, target)
        written[name] = view.io.parquet_metadata(target).num_rows
    return written


def _write_s3(spark: Any, view: Table, scans: list[PartitionScan], run: str) -> dict[str, int]:
    """The plan's rows as Parquet files in the table folder, each written by a Spark task through the file IO."""
    from pyspark_lakelog import reads_through_delta, scan_dataframe

    if not reads_through_delta(spark, view.location):
        return _write_through_file_io(spark, view, scans, run)
    location = view.location

    def write(batches: Iterator[Any]) -> Iterator[Any]:  # one Spark task: its rows, one file, one PUT
        import pyarrow as pa
        import pyarrow.parquet as pq

        name = f"part-{run}-{uuid.uuid4().hex[:16]}.parquet"
        sink = pa.BufferOutputStream()
        rows = 0
        with pq.ParquetWriter(sink, catalog.VIEW_SCHEMA, compression="snappy") as writer:
            for batch in batches:
                writer.write_table(pa.Table.from_batches([batch]).cast(catalog.VIEW_SCHEMA))
                rows += batch.num_rows
        if rows:
            location.io.write((location / name).uri, sink.getvalue())
        yield pa.RecordBatch.from_pydict({"name": [name], "rows": [rows]})

    results = scan_dataframe(spark, scans).mapInArrow(write, "name string, rows long").collect()
    return {row["name"]: row["rows"] for row in results if row["rows"]}


def _write_through_file_io(spark: Any, view: Table, scans: list[PartitionScan], run: str) -> dict[str, int]:
    """Spark tasks read the plan's pieces through the file IO and write one file each into the table: {name: rows}."""
    from pyspark_lakelog.options import DEFAULT_PARTITION_BYTES
    from pyspark_lakelog.source import scan_pieces

    pieces = scan_pieces([scan for scan in scans if scan.end_offset > scan.start_offset], DEFAULT_PARTITION_BYTES)
    tasks = [(view.location, f"part-{run}-{index:05d}.parquet", piece) for index, piece in enumerate(pieces)]
    results = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(_write_piece).collect()
    return {name: rows for name, rows in results if rows}


def _write_piece(task: tuple[Location, str, PartitionScan]) -> tuple[str, int]:
    """One piece's read_committed rows as one Parquet file `name` in the view folder (runs in a Spark task)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    view, name, piece = task
    sink = pa.BufferOutputStream()
    rows = 0
    with pq.ParquetWriter(sink, catalog.VIEW_SCHEMA, compression="snappy") as writer:
        for table in piece.read_kafka_rows():
            writer.write_table(table.cast(catalog.VIEW_SCHEMA))
            rows += table.num_rows
    if rows:
        # One PUT of the whole file: a task killed midway leaves nothing, or a whole file in no commit.
        view.io.write((view / name).uri, sink.getvalue())
    return name, rows


def _remove_stale_staging(view: Table) -> None:
    """Delete staging folders of runs killed more than STALE_STAGING_S ago (roots with folder times)."""
    cutoff = time.time() - STALE_STAGING_S
    for entry in (view.location / STAGING_DIR).list():
        if entry.is_dir and entry.mtime is not None and entry.mtime < cutoff:
            _delete_quietly(Location(entry.uri, view.io))


def _delete_quietly(folder: Location | None) -> None:
    """Delete a staging folder and what is in it (a failure only leaves litter for the next run)."""
    if folder is None:
        return
    try:
        folder.io.delete_tree(folder.uri)
    except Exception as error:  # noqa: BLE001 - housekeeping; the view is right either way
        logger.warning("could not delete %s: %s", folder.uri, one_line(error))


def _vacuum_quietly(view: Table) -> None:
    """Delete files of killed runs once they are older than the table's retention (never fails the run)."""
    try:
        vacuum(view)
    except Exception:  # noqa: BLE001 - vacuum is housekeeping; the commit stands either way
        pass


@contextmanager
def _timestamps_as_micros(spark: Any) -> Iterator[None]:
    """Spark writes INT96 timestamps by default; the view's schema (and delta-rs, DuckDB) want microseconds."""
    key = "spark.sql.parquet.outputTimestampType"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage setting of the root (lakelog.storage.<key>), over the AWS_* environment; repeatable",
    )
    args = parser.parse_args(argv)
    root = Location.of(args.root, storage_option_pairs(parser, args.storage_option))
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"lakelog materialize_committed_view {args.topic}").getOrCreate()
    started = time.monotonic()
    try:
        report = materialize_committed_view(spark, root, args.topic)
    except PolicyViolation as refused:
        print(f"materialize_committed_view: {refused.error.name()}: {refused}", file=sys.stderr)
        return EXIT_REFUSED
    print(json.dumps({**report.__dict__, "seconds": round(time.monotonic() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
