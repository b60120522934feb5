"""The read_committed view of a topic, `<root>/views/<topic>`: append its newly committed rows, exactly once.

The view is a Delta table in the Kafka source's columns. Its progress is in the
table itself: each commit records, as Delta `txn` versions, the offset up to
which it holds each partition (`lakelog.view.position.<partition>`), in the
same commit as the rows. A refresh:

1. reads the view's snapshot v and its positions;
2. plans a read_committed scan of every partition from its position to its LSO
   (lakelog.log.scan), and has the engine write those rows as Parquet files in
   the table folder under names no other run uses, in no commit yet;
3. commits the files, with the new positions, as exactly version v+1 (strict:
   no retry, no rebase).

This module is the refresh without its engine: the plan, the strict commit,
the quality gate, the staging folders and vacuum. The rows are written by a
`ViewFiles` (the Spark one is pyspark_lakelog.view_files), in one of two ways
it chooses per root (`stages`): into a staging folder (`<view>/_staging/<run>/`)
whose part files the refresh then moves into the table folder, or straight
into the table folder, one whole file per PUT, returning each file's name and
row count (no staging and no move, so the fault points "written" and "moved"
are one state there).

A run killed anywhere before step 3's commit leaves the view as it was (its
files are in no commit; vacuum removes them, and the next run removes staging
folders a day old), and the next run starts from the same positions; killed
after it, the next run starts from the new ones. So no row is ever missing or
twice. A run that loses the commit to another run deletes its files, waits
through the one retry policy (lakelog.store.io.retry) and decides again on the
new snapshot; past the deadline it gives up with KafkaTimeout. Every byte
under the root is read, written, listed, moved and deleted through the root's
file IO (`lakelog.store`).

A topic with a quality suite gates its view: before step 3 the run validates
its new rows (read back from the files it wrote, nothing else) against the
suite. An `enforce` failure records the result, deletes the run's files and
raises PolicyViolation: no commit, the view stays as it was. A pass, or a
`warn` failure, commits with the validation id in the commit's metadata
(`lakelog.quality.validation_id`) and records the result after the commit, so
a run killed in between leaves no row rather than a false one. `dead-letter`
acts as `warn` here: the rows are committed in the topic already, and a view
is a copy of them, so there is no other place to send them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from lakelog import catalog
from lakelog.client.retry import DEFAULT_POLICY, Backoff
from lakelog.client.roots import partition_count
from lakelog.errors import CommitConflict
from lakelog.log import READ_COMMITTED
from lakelog.log.scan import LATEST, PartitionScan, plan_scan
from lakelog.quality.gate import Verdict, gated_suites, judge
from lakelog.quality.results import OffsetRange, offset_ranges_of, record_result
from lakelog.quality.suites import Suite
from lakelog.store import Location, Table, open_root
from lakelog.store.delta.lost_race import after_lost_race
from lakelog.store.io.fileio import one_line
from lakelog.store.upkeep.maintenance import vacuum

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

Fault = Callable[[str], None]


class ViewFiles(Protocol):
    """The engine that writes a refresh's rows (the plan's read_committed rows, in catalog.VIEW_SCHEMA) as Parquet."""

    def stages(self, view: Location) -> bool:
        """Whether rows for the view at `view` go through a staging folder (`write_staged`), else `write_in_place`."""
        ...

    def write_staged(self, scans: list[PartitionScan], staging: Location) -> None:
        """Write the rows as `part-*.parquet` files in `staging`, a folder no other run uses."""
        ...

    def write_in_place(self, view: Location, scans: list[PartitionScan], run: str) -> dict[str, int]:
        """Write the rows as whole files (one PUT each) named `part-<run>-*.parquet` in `view`: {name: rows}."""
        ...


@dataclass(frozen=True)
class ViewReport:
    """What a run did: the view version it committed (None if there was nothing new), rows and positions."""

    version: int | None
    rows: int
    positions: dict[int, int] = field(default_factory=dict)
    # The validation of the committed rows, if the topic has a suite (its id is in the commit's metadata).
    validation_id: str | None = None


def refresh_view(
    root: str | Location, topic: str, files: ViewFiles, *, fault: Fault | None = None, backoff: Backoff | None = None
) -> ViewReport:
    """Append `topic`'s rows committed since the last run to `<root>/views/<topic>`; see the module docstring.

    Lost commit races wait on `backoff` (default: the retry policy's defaults, COMMIT_TIMEOUT_S);
    KafkaTimeout once its deadline has passed, the view then holds what other runs committed.
    """
    root = open_root(root)  # UnresolvedRoot if it is no root
    num_partitions = partition_count(root, topic)
    suite = gated_suites(root, [topic]).get(topic)  # None: ungated, and no GX import
    view, _ = Table.open_or_create(catalog.view_path(root, topic), catalog.VIEW_SCHEMA, VIEW_CONFIGURATION)
    staged = files.stages(view.location)
    if staged:
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
        staging = view.location / STAGING_DIR / run if staged else None
        if staging is not None:
            files.write_staged(scans, staging)
            hit(FAULT_WRITTEN)
            written = _move_into_table(view, staging, run)
        else:
            written = files.write_in_place(view.location, scans, run)
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
            after_lost_race(backoff, f"view of {topic}", logger)
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


def _move_into_table(view: Table, staging: Location, run: str) -> dict[str, int]:
    """The engine's part files, renamed into the table folder (Delta paths relative to it): {name: rows}."""
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
