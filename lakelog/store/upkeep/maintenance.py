"""Table maintenance that keeps the append path O(1) in the log's length.

lakelog makes its own commits (lakelog.store.delta.table, lakelog.store.delta.log):
an append reads no listing, and a snapshot reads only the commits it has not
seen, so neither the number of commit files kept nor a snapshot's age costs an
append anything. What maintenance still bounds:

1. The `_delta_log/` folder: `cleanup_log` deletes the commits behind the kept
   checkpoints (count-based) once they are also older than the table's
   `delta.logRetentionDuration` (the topic's `delta.log.retention.ms`, 6 h), in
   ascending version order, so the folder holds about two checkpoint intervals
   plus the retention's commits, and a cold open reads one checkpoint and fewer
   than an interval of commits. It finds them by name (bisection), without a
   listing, once per checkpoint.
2. The number of active files, which a snapshot, a checkpoint and every reader
   carry: `compact` (lakelog.store.upkeep.merge) merges runs of consecutive
   small files in the order the policy's `merge_order` gives (the log's: by
   offset), never changing a row, in one strict commit.

`vacuum` deletes data files no snapshot younger than the table's
`delta.deletedFileRetentionDuration` (the topic's `delete.retention.ms`) can
reference. It makes no commit, so it never races appends.

The log layer calls `maintain(table, policy)` after each successful commit; it is
a few integer comparisons unless the commit's version is a multiple of
`policy.check_every` (files count check) or of the checkpoint interval.

Time is passed in: `now_ms` (milliseconds; None reads the wall clock) is what
`cleanup_log`'s retention and `vacuum`'s grace for files no commit holds are
measured to, and what `compact` stamps its remove actions with, so a test moves
time on instead of sleeping.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from dataclasses import dataclass, field

from lakelog.store.delta import table as table_module
from lakelog.store.delta.table import Table, is_checkpoint_version
from lakelog.store.io.fileio import one_line
from lakelog.store.upkeep.cleanup import (
    cleanup_log,
    log_retention_seconds,
    vacuum,
)
from lakelog.store.upkeep.merge import CompactionResult, MergeOrder, compact, plan_compaction

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MaintenancePolicy:
    """When and how `maintain` works. Built by the log layer from the topic config."""

    # The order small files are merged in (None: never merged); the log passes its offset order.
    merge_order: MergeOrder | None = None

    # Compact once this many files are active (topic config `segment.files`).
    segment_files: int = 100
    # How many consecutive files of one size level a compaction merges into one.
    fan_in: int = 10
    # Files at least this large are never rewritten; a merge never exceeds it.
    target_file_bytes: int = 128 << 20
    # Look at the file count when the committed version is a multiple of this.
    check_every: int = 25
    # Parquet codec of merged files (topic config `compression.type`).
    compression: str = "snappy"
    # Commit files behind the kept checkpoints are deleted once older than this (`cleanup_log`); None: the
    # table's delta.logRetentionDuration (the topic's delta.log.retention.ms). No safety rests on it (S9.5).
    log_retention_s: float | None = None
    # `refresh_if_stale` reloads a snapshot older than this before a decision (None: never by age, only after a
    # lost race): a speed measure only; correctness never depends on it (S9.5, `Table._commit`). None by default:
    # on object storage the reload is two round trips before every append of a handle with one writer, which
    # never loses; a handle that lost a race reloads before its next decisions anyway (`note_lost_race`).
    max_snapshot_age_s: float | None = None
    # Keep this many checkpoints (and the commits after the oldest kept one), and at least enough of them
    # to cover this many commits: slack for a reader that listed the log before the newest checkpoints.
    log_keep_checkpoints: int = 2
    log_keep_commits: int = 100
    # Vacuum at the checkpoint that reaches about every this many commits (0: never; `vacuum` lists the data
    # folder, so its cadence is in commits whatever the table's checkpoint interval).
    vacuum_every_commits: int = 500


@dataclass
class MaintenanceReport:
    """What one `maintain` call did (all zeros/False when nothing was due)."""

    reopened: bool = False
    log_files_deleted: int = 0
    files_vacuumed: int = 0
    compaction: CompactionResult | None = None
    errors: list[str] = field(default_factory=list)


# -- the per-commit hook -------------------------------------------------------


def maintain(table: Table, policy: MaintenancePolicy = MaintenancePolicy(), *, now_ms: int | None = None) -> MaintenanceReport:
    """Run whatever maintenance is due after a commit; cheap when nothing is.

    Call it with the table that just committed (its version is the new
    commit's version). What is due depends only on that version, so with many
    writers each step runs once, in the writer whose commit hit it:

    - the commit wrote a checkpoint (`Table` writes one after the commit of every
      version v with (v + 1) % delta.checkpointInterval == 0, once it has checked
      the commit is the log's v): bring the snapshot up to date, delete old log files (`cleanup_log`), and every
      `vacuum_every_commits` commits (at the checkpoint that reaches them) `vacuum`;
    - v % check_every == 0, the policy has a `merge_order` and at least `segment_files` files are active:
      `compact` (lakelog.store.upkeep.merge).

    Never raises for a failed step (the commit before it stands, and a caller
    must not mistake a maintenance failure for a failed append): failures are
    listed in the report's `errors`, and the step is simply due again later.
    `now_ms` is the clock the steps read (None: the wall clock).
    """
    report = MaintenanceReport()
    version = table.version
    interval = checkpoint_interval(table)
    if is_checkpoint_version(version, interval):
        try:
            reopen(table)
            report.reopened = True
            keep = max(policy.log_keep_checkpoints, math.ceil(policy.log_keep_commits / interval) + 1)
            report.log_files_deleted = cleanup_log(
                table, keep_checkpoints=keep, retention_s=policy.log_retention_s, now=None if now_ms is None else now_ms / 1000
            )
            checkpoints = (version + 1) // interval
            every = max(1, policy.vacuum_every_commits // interval)
            if policy.vacuum_every_commits and checkpoints % every == 0:
                report.files_vacuumed = len(vacuum(table, now_ms=now_ms))
        except Exception as error:  # noqa: BLE001 - see the docstring
            report.errors.append(f"log maintenance: {error!r}")
            _warn_failed(table, version, "log maintenance (checkpoint reload, log cleanup, vacuum)", error)
    order = policy.merge_order
    if order is not None and version % policy.check_every == 0:
        try:
            if len(table.data_files()) >= policy.segment_files:
                report.compaction = compact(
                    table,
                    order,
                    fan_in=policy.fan_in,
                    target_file_bytes=policy.target_file_bytes,
                    compression=policy.compression,
                    now_ms=now_ms,
                )
        except Exception as error:  # noqa: BLE001 - see the docstring
            report.errors.append(f"compaction: {error!r}")
            _warn_failed(table, version, "compaction", error)
    return report


def _warn_failed(table: Table, version: int, step: str, error: BaseException) -> None:
    """One WARNING per failed maintenance step, naming the table and the version whose commit ran it."""
    logger.warning(
        "%s: %s after version %d failed (the commit stands; the step is due again later): %s: %s",
        table.uri,
        step,
        version,
        type(error).__name__,
        one_line(error),
    )


def checkpoint_interval(table: Table) -> int:
    return table_module.checkpoint_interval(table.configuration)


_freshness: weakref.WeakKeyDictionary[Table, tuple[int, float, float]] = weakref.WeakKeyDictionary()


# Decisions of a table that reload first after it lost a commit race (`note_lost_race`).
PROBES_AFTER_LOSS = 16
_shared: weakref.WeakKeyDictionary[Table, int] = weakref.WeakKeyDictionary()


def note_lost_race(table: Table) -> None:
    """`table` lost a commit race: another writer shares it, so its next PROBES_AFTER_LOSS `refresh_if_stale`
    calls reload whatever the snapshot's age (counted again whenever a reload finds the other writer's commits)."""
    _shared[table] = PROBES_AFTER_LOSS


def refresh_if_stale(table: Table, max_age_s: float | None) -> bool:
    """Reload the snapshot unless it is known to be younger than `max_age_s` (None: of any age); True if reloaded.

    After a lost race (`note_lost_race`) it reloads before each decision while the other writer keeps committing:
    one read of v+1, where losing the race again costs a data file written and deleted and a put refused. A table
    with one writer never loses, so never pays that read.

    A speed measure only: a writer that decides on a fresh snapshot seldom loses
    its commit race. No correctness depends on it (S9.5): a writer paused for any
    time that then puts a commit file into a hole log cleanup left is told by
    `Table._commit`'s check after the put and gets `CommitConflict`.
    Bookkeeping is per Table: the snapshot counts as fresh as of the previous
    call if its version changed since then (a commit or a refresh happened in
    between), and as fresh as of the last reload made here otherwise. The first
    call for a table reloads (with no `max_age_s`, only that one).
    """
    now = time.monotonic()
    probes = _shared.get(table)
    if probes:
        before = table.version
        table.refresh()
        _shared[table] = PROBES_AFTER_LOSS if table.version != before else probes - 1
        _freshness[table] = (table.version, now, now)
        return True
    seen = _freshness.get(table)
    if seen is not None:
        if max_age_s is None:
            return False
        version, last_call, fresh_as_of = seen
        if table.version != version:
            fresh_as_of = last_call
        if now - fresh_as_of <= max_age_s:
            _freshness[table] = (table.version, now, fresh_as_of)
            return False
    table.refresh()
    _freshness[table] = (table.version, now, now)
    return True


def reopen(table: Table) -> int:
    """Bring the table's snapshot to the latest version (it reads only the commits it has not seen).

    Kept for callers of the delta-rs era, when a handle had to be replaced to load
    from the newest checkpoint: lakelog's snapshot never replays a commit twice.
    The snapshot may move forward: callers decide on whatever is in hand afterwards.
    """
    return table.refresh()


__all__ = [
    "CompactionResult",
    "MaintenancePolicy",
    "MaintenanceReport",
    "checkpoint_interval",
    "cleanup_log",
    "compact",
    "MergeOrder",
    "PROBES_AFTER_LOSS",
    "log_retention_seconds",
    "maintain",
    "note_lost_race",
    "plan_compaction",
    "reopen",
    "vacuum",
]
