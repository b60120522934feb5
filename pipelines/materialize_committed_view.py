"""Spark job: append a topic's newly committed rows to its read_committed view `<root>/views/<topic>`, exactly once.

The view is a Delta table in the Kafka source's columns. Its progress is in the
table itself: each commit records, as Delta `txn` versions, the offset up to
which it holds each partition (`lakelog.view.position.<partition>`), in the
same commit as the rows. A run:

1. reads the view's snapshot v and its positions;
2. plans a read_committed scan of every partition from its position to its LSO
   (lakelog.log.scan), and writes those rows with Spark into a staging folder;
3. moves the files into the table folder and commits them, with the new
   positions, as exactly version v+1 (strict: no retry, no rebase).

A run killed anywhere before step 3's commit leaves the view as it was (its
files are in no commit; vacuum removes them), and the next run starts from the
same positions; killed after it, the next run starts from the new ones. So no
row is ever missing or twice. A run that loses the commit to another run
deletes its files and decides again on the new snapshot.

    spark-submit pipelines/materialize_committed_view.py --root R --topic T
    python -m pipelines.materialize_committed_view --root R --topic T
    materialize_committed_view(spark, root, topic)     # from Python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lakelog import catalog
from lakelog.errors import CommitConflict
from lakelog.log import READ_COMMITTED, topic_config
from lakelog.log.scan import LATEST, plan_scan
from lakelog.store import Table
from lakelog.store.maintenance import vacuum

POSITION_APP_ID = "lakelog.view.position.{partition}"
STAGING_DIR = "_staging"
# Staging folders of runs killed this long ago are removed by the next run.
STALE_STAGING_S = 24 * 3600
MAX_ATTEMPTS = 5
# Files of killed runs (in no commit) are vacuumed once this old; a live run commits its files within seconds.
VIEW_CONFIGURATION = {"delta.deletedFileRetentionDuration": "interval 3600 seconds"}
# Fault points, in the order a run meets them (tests SIGKILL a run at one of them).
FAULT_PLANNED = "planned"
FAULT_WRITTEN = "written"
FAULT_MOVED = "moved"
FAULT_COMMITTED = "committed"

Fault = Callable[[str], None]


@dataclass(frozen=True)
class ViewReport:
    """What a run did: the view version it committed (None if there was nothing new), rows and positions."""

    version: int | None
    rows: int
    positions: dict[int, int] = field(default_factory=dict)


def materialize_committed_view(spark: Any, root: str, topic: str, *, fault: Fault | None = None) -> ViewReport:
    """Append `topic`'s rows committed since the last run to `<root>/views/<topic>`; see the module docstring."""
    from pyspark_lakelog import scan_dataframe

    root = os.path.abspath(root)
    num_partitions = topic_config(root, topic).num_partitions
    view, _ = Table.create(str(catalog.view_path(root, topic)), catalog.VIEW_SCHEMA, VIEW_CONFIGURATION)
    _remove_stale_staging(view)
    hit = fault or (lambda point: None)
    for _ in range(MAX_ATTEMPTS):
        view.refresh()
        positions = {partition: view_position(view, partition) for partition in range(num_partitions)}
        scans = plan_scan(root, topic, READ_COMMITTED, positions, LATEST)
        ends = {scan.partition: scan.end_offset for scan in scans if scan.end_offset > positions[scan.partition]}
        if not ends:
            return ViewReport(None, 0, positions)
        hit(FAULT_PLANNED)
        run = uuid.uuid4().hex
        staging = os.path.join(view.uri, STAGING_DIR, run)
        with _timestamps_as_micros(spark):
            scan_dataframe(spark, scans).write.mode("errorifexists").parquet(staging)
        hit(FAULT_WRITTEN)
        names = _move_into_table(view, staging, run)
        hit(FAULT_MOVED)
        versions = {POSITION_APP_ID.format(partition=partition): end for partition, end in ends.items()}
        try:
            version = view.commit_files(names, catalog.VIEW_SCHEMA, app_versions=versions)
        except CommitConflict:
            for name in names:
                os.remove(os.path.join(view.uri, name))
            shutil.rmtree(staging, ignore_errors=True)
            continue
        hit(FAULT_COMMITTED)
        shutil.rmtree(staging, ignore_errors=True)
        _vacuum_quietly(view)
        return ViewReport(version, _rows_in(view, names), {**positions, **ends})
    raise CommitConflict(f"view of {topic}: lost {MAX_ATTEMPTS} commit races in a row to other runs")


def view_position(view: Table, partition: int) -> int:
    """The offset up to which the view holds `partition` (0 if it holds none of it yet)."""
    return view.app_version(POSITION_APP_ID.format(partition=partition)) or 0


def _move_into_table(view: Table, staging: str, run: str) -> list[str]:
    """Spark's part files, renamed into the table folder (Delta paths relative to it); sorted."""
    parts = sorted(name for name in os.listdir(staging) if name.startswith("part-") and name.endswith(".parquet"))
    names = []
    for index, part in enumerate(parts):
        name = f"part-{run}-{index:05d}.parquet"
        os.replace(os.path.join(staging, part), os.path.join(view.uri, name))
        names.append(name)
    return names


def _rows_in(view: Table, names: list[str]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(os.path.join(view.uri, name)).num_rows for name in names)


def _remove_stale_staging(view: Table) -> None:
    folder = os.path.join(view.uri, STAGING_DIR)
    if not os.path.isdir(folder):
        return
    cutoff = time.time() - STALE_STAGING_S
    for entry in os.scandir(folder):
        if entry.is_dir() and entry.stat().st_mtime < cutoff:
            shutil.rmtree(entry.path, ignore_errors=True)


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
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"lakelog materialize_committed_view {args.topic}").getOrCreate()
    started = time.monotonic()
    report = materialize_committed_view(spark, args.root, args.topic)
    print(json.dumps({**report.__dict__, "seconds": round(time.monotonic() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
