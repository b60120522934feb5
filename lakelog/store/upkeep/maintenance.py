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
   carry: `compact` merges runs of consecutive small files, chosen like Lucene's
   log merge policy so that every record is rewritten only O(log n) times and
   runs never interleave.

Compaction never changes a row: it reads whole files, concatenates them in
offset order and writes them back, and the new file's offset range is exactly
the union of the ranges it replaces. It commits like an append: exactly version
v+1 of the snapshot it was decided on, never rebased. On a lost
race it reloads and decides again (are the files it merged still all active?),
so it can never remove a file that someone else removed, never duplicates rows,
and never rebases an append (appends also commit with retries off: a compaction
that takes v+1 first makes the append fail and re-decide on v+1).

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
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CommitConflict, KafkaStorageError
from lakelog.store.delta import table as table_module
from lakelog.store.delta.actions import add_action, remove_action
from lakelog.store.delta.file_stats import file_statistics
from lakelog.store.delta.table import FileEntry, Table, is_checkpoint_version
from lakelog.store.io.fileio import one_line
from lakelog.store.upkeep.cleanup import (
    cleanup_log,
    log_retention_seconds,
    vacuum,
)

logger = logging.getLogger(__name__)

COMPACT_OPERATION = "lakelog.compact"


@dataclass(frozen=True)
class MaintenancePolicy:
    """When and how `maintain` works. Built by the log layer from the topic config."""

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


@dataclass(frozen=True)
class CompactionResult:
    """A compaction that committed: its version, and files removed / added."""

    version: int
    files_removed: int
    files_added: int
    records: int
    attempts: int


@dataclass
class _Merge:
    """One planned merge: consecutive active files and the file that replaces them."""

    sources: list[FileEntry]
    path: str = ""
    size: int = 0
    stats: str = ""
    records: int = 0
    written: bool = field(default=False)


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
    - v % check_every == 0 and at least `segment_files` files are active: `compact`.

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
    if version % policy.check_every == 0:
        try:
            if len(table.files()) >= policy.segment_files:
                report.compaction = compact(
                    table,
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


# -- compaction ----------------------------------------------------------------


def plan_compaction(files: list[FileEntry], fan_in: int = 10, target_file_bytes: int = 128 << 20) -> list[list[FileEntry]]:
    """Choose runs of consecutive files to merge (Lucene's LogMergePolicy, by record count).

    Each file's level is log_fan_in(records). From the oldest file on: take the
    highest level among the rest, and every file up to the last one within 0.75
    of it forms a group; the group is cut into windows of `fan_in` consecutive
    files, and each window whose files are all smaller than `target_file_bytes`
    (and whose sum stays within it) becomes one merge. A merged file is about
    `fan_in` times larger than its inputs, one level up, so each record is
    rewritten about log_fan_in(records per file) times; windows are contiguous in
    offset order, so merged files never interleave with others.
    """
    if fan_in < 2:
        raise ValueError(f"fan_in must be at least 2, not {fan_in}")
    ordered = sorted(files, key=lambda entry: entry.min_offset)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.min_offset <= before.max_offset:
            # Overlapping ranges (not written by lakelog): merging could interleave further.
            return []
    log_fan_in = math.log(fan_in)
    levels = [math.log(max(entry.num_records, 1)) / log_fan_in for entry in ordered]
    merges: list[list[FileEntry]] = []
    start = 0
    count = len(ordered)
    while start < count:
        max_level = max(levels[start:])
        bottom = max_level - 0.75 if max_level > 0.75 else -1.0
        upto = max(i for i in range(start, count) if levels[i] >= bottom)
        window_start = start
        while window_start + fan_in <= upto + 1:
            window = ordered[window_start : window_start + fan_in]
            if (
                all(entry.size_bytes < target_file_bytes for entry in window)
                and sum(entry.size_bytes for entry in window) <= target_file_bytes
            ):
                merges.append(window)
            window_start += fan_in
        start = upto + 1
    return merges


def compact(
    table: Table,
    *,
    fan_in: int = 10,
    target_file_bytes: int = 128 << 20,
    compression: str = "snappy",
    max_attempts: int = 3,
    now_ms: int | None = None,
) -> CompactionResult | None:
    """Merge small consecutive files of the latest snapshot in one strict commit.

    Returns None if nothing was worth merging or every attempt lost its race (a
    harmless outcome: the merged files are deleted again, the table is as it
    was). Rows are never changed; only which files hold them. `now_ms` (None:
    the wall clock) is the remove actions' time.
    """
    table.refresh()
    merges = [_Merge(list(run)) for run in plan_compaction(table.files(), fan_in, target_file_bytes)]
    if not merges:
        return None
    try:
        for merge in merges:
            _write_merge(table, merge, compression)
        for attempt in range(1, max_attempts + 1):
            decided_on = table.version
            active = {entry.path for entry in table.files()}
            still_valid = [merge for merge in merges if all(source.path in active for source in merge.sources)]
            for merge in merges:
                if merge not in still_valid:
                    _delete_quietly(table, merge.path)
                    merge.written = False
            merges = still_valid
            if not merges:
                return None
            try:
                _commit_merges(table, merges, decided_on, _now_ms(now_ms))
            except CommitConflict:
                continue
            for merge in merges:
                merge.written = False  # committed: the table owns the file now
            return CompactionResult(
                version=decided_on + 1,
                files_removed=sum(len(merge.sources) for merge in merges),
                files_added=len(merges),
                records=sum(merge.records for merge in merges),
                attempts=attempt,
            )
        return None
    finally:
        # Outputs of a compaction that did not commit are nobody's: remove them now.
        for merge in merges:
            if merge.written and not _is_active(table, merge.path):
                _delete_quietly(table, merge.path)


def _write_merge(table: Table, merge: _Merge, compression: str) -> None:
    schema = table.schema
    pieces = [table.read_file(entry) for entry in merge.sources]
    rows = pa.concat_tables([piece.select(schema.names).cast(schema) for piece in pieces])
    offsets = rows.column("offset")
    expected = sum(entry.num_records for entry in merge.sources)
    if rows.num_rows != expected:
        raise RuntimeError(f"{table.uri}: merge read {rows.num_rows} rows, statistics say {expected}")
    if rows.num_rows > 1 and not pc.all(pc.greater(offsets[1:], offsets[:-1])).as_py():
        rows = rows.sort_by("offset")
    first = merge.sources[0].min_offset
    merge.path = (
        f"part-compact-{first:020d}-{uuid.uuid4().hex}.{compression if compression != 'none' else 'uncompressed'}.parquet"
    )
    codec = "NONE" if compression == "none" else compression
    merge.size = table.io.write_parquet(rows, table.child_uri(merge.path), compression=codec, fresh=True)
    merge.written = True
    merge.records = rows.num_rows
    # The sources' whole range, not the rows' own: a key-compacted source claims offsets it no longer holds (S9.3).
    merge.stats = file_statistics(
        rows, (min(entry.min_offset for entry in merge.sources), max(entry.max_offset for entry in merge.sources))
    )


def _commit_merges(table: Table, merges: list[_Merge], decided_on: int, now_ms: int) -> None:
    """The strict commit of `Table` (S9.5, S12.3); CommitConflict on a lost race (the merged files stay, `compact` decides)."""
    actions = []
    for merge in merges:
        modified_ms = newest_modification(merge.sources)
        actions.append(add_action(merge.path, merge.size, now_ms if modified_ms is None else modified_ms, False, merge.stats))
        for source in merge.sources:
            actions.append(remove_action(source.path, now_ms, False, source.size_bytes))
    metadata = {"lakelog.operation": COMPACT_OPERATION, "lakelog.decided_on": str(decided_on)}
    table._commit(actions, table.schema, "append", decided_on, None, metadata, [])


def newest_modification(sources: Sequence[FileEntry]) -> int | None:
    """The newest modificationTime of the files a rewrite replaces (None if one has none).

    A merged or key-compacted file keeps it, so a producer's idle time (S9.4) still runs from its last
    append, not from the rewrite; retention by time sees the file as old as its newest source.
    """
    times = [source.modification_time_ms for source in sources]
    return max(times) if times and all(times) else None


def _is_active(table: Table, path: str) -> bool:
    try:
        table.refresh()
    except Exception:  # noqa: BLE001 - best effort: assume active, never delete a maybe-live file
        return True
    return any(entry.path == path for entry in table.files())


# -- helpers -----------------------------------------------------------------------


def _now_ms(now_ms: int | None) -> int:
    """`now_ms` as passed in, or the wall clock's reading."""
    return time.time_ns() // 1_000_000 if now_ms is None else now_ms


def _delete_quietly(table: Table, name: str) -> None:
    try:
        table.io.delete(table.child_uri(name))
    except KafkaStorageError as error:
        logger.warning("%s: could not delete %s (vacuum will): %s", table.uri, name, error)


__all__ = [
    "CompactionResult",
    "MaintenancePolicy",
    "MaintenanceReport",
    "checkpoint_interval",
    "cleanup_log",
    "compact",
    "PROBES_AFTER_LOSS",
    "log_retention_seconds",
    "maintain",
    "note_lost_race",
    "plan_compaction",
    "reopen",
    "vacuum",
]
