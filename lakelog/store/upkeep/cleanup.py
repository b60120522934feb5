"""Deleting what no snapshot needs: old files of the transaction log (`cleanup_log`) and removed data files (`vacuum`).

Both run off the append path (the log layer's `maintain`, once per checkpoint
or every few checkpoints). `cleanup_log` reads and deletes files by name, at a
cost that does not grow with the commit files kept; `vacuum` lists the data
folder (active files and those removed within the retention), every few
checkpoints. Neither makes a commit, so neither
races appends. Time is passed in (`now` / `now_ms`) so a test moves time on
instead of sleeping.
"""

from __future__ import annotations

import logging
import re
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from lakelog.errors import KafkaStorageError
from lakelog.store.delta.checkpoint import read_last_checkpoint
from lakelog.store.delta.commit import checkpoint_interval, is_checkpoint_version
from lakelog.store.delta.interval import interval_seconds
from lakelog.store.delta.log import LAST_CHECKPOINT, DeltaLog, checkpoint_name, commit_name

if TYPE_CHECKING:
    from lakelog.store.delta.table import Table

logger = logging.getLogger(__name__)

DELTA_LOG = "_delta_log"
# Files a log cleanup may delete: commits, their checksums, and (single- or
# multi-part) classic checkpoints. Anything else in _delta_log is left alone.
_LOG_FILE = re.compile(r"^(\d{20})\.(?:json|crc|checkpoint\.parquet|checkpoint\.\d{10}\.\d{10}\.parquet)$")


def cleanup_log(table: Table, *, keep_checkpoints: int = 2, retention_s: float | None = None, now: float | None = None) -> int:
    """Delete log files behind the `keep_checkpoints`-th latest checkpoint that are older than the retention.

    Delta readers need only the latest checkpoint and the commits after it; the
    older files are time travel and slack for readers that listed the folder
    before the newest checkpoints. A file goes only if it is both behind the kept
    checkpoints (count) and older than `retention_s` (default: the table's
    `delta.logRetentionDuration`, the topic's `delta.log.retention.ms`; 6 h if
    unset), so external readers and time travel work within the retention.

    Files are deleted in ascending version order, stopping at the first version
    kept, so "N.json was deleted" implies "(N-1).json was deleted first":
    `Table._commit` relies on it to tell, after its put of N.json, a commit into
    a hole from the log's N (S9.5). No safety rests on the retention. `now` is
    the store clock's reading to compare modification times with. Returns the
    number of files deleted.

    Its cost does not grow with the commit files kept (`_cleanup_by_name`): the
    kept checkpoints are found from `_last_checkpoint` and the interval, the
    oldest commit and the last one past the retention by bisection, and only the
    files deleted are touched. The folder is listed only where that cannot be
    done (no `_last_checkpoint`, or no checkpoint where the interval puts one).
    """
    if retention_s is None:
        retention_s = log_retention_seconds(table)
    cutoff = (time.time() if now is None else now) - retention_s
    by_name = _cleanup_by_name(table, keep_checkpoints, cutoff)
    deleted, keep_from = by_name if by_name is not None else _cleanup_listed(table, keep_checkpoints, cutoff)
    if deleted:
        logger.info(
            "%s: deleted %d log file(s) behind checkpoint %d and older than %.0f s", table.uri, deleted, keep_from, retention_s
        )
    return deleted


# The first commit file each handle's last cleanup left (a hint, checked before use: `_oldest_commit`).
_first_kept: weakref.WeakKeyDictionary[Table, int] = weakref.WeakKeyDictionary()


def _cleanup_by_name(table: Table, keep_checkpoints: int, cutoff: float) -> tuple[int, int] | None:
    """`cleanup_log` by names alone: (files deleted, the first version kept), or None if the folder must be listed."""
    log = table._log
    try:
        named = read_last_checkpoint(table.io.read(log.file_uri(LAST_CHECKPOINT)))
    except FileNotFoundError:
        named = None
    interval = checkpoint_interval(table.configuration)
    if named is None or named[1] is not None:
        logger.debug("%s: log cleanup lists the log (_last_checkpoint is missing, unreadable or multi-part)", table.uri)
        return None
    keep_from = named[0] - (keep_checkpoints - 1) * interval
    if keep_from <= 0:
        return 0, keep_from
    if not table.io.file_exists(log.file_uri(checkpoint_name(keep_from))):
        logger.debug(
            "%s: log cleanup lists the log (no checkpoint %d where the interval %d puts one)", table.uri, keep_from, interval
        )
        return None
    oldest = _first_kept[table] = _oldest_commit(table, log, keep_from)

    def past_retention(version: int) -> bool:
        found = table.io.info(log.file_uri(commit_name(version)))
        return found is None or (found.mtime is not None and found.mtime <= cutoff)

    # Commit files are written in version order, so their times ascend (a writer's clock skew only moves the
    # boundary, and no safety rests on the retention, S9.5). Searched from the oldest on, doubling the step:
    # lookups grow with the log2 of the commits past the retention since the last cleanup.
    end = _first_false(oldest, keep_from, past_retention, gallop=True)
    deleted = 0
    for version in range(oldest, end):
        # The commit file last: a version whose commit file is there is whole.
        if is_checkpoint_version(version, interval) and table.io.delete(log.file_uri(checkpoint_name(version))):
            deleted += 1
        if table.io.delete(log.file_uri(commit_name(version))):
            deleted += 1
        _first_kept[table] = version + 1
    return deleted, keep_from


def _oldest_commit(table: Table, log: DeltaLog, keep_from: int) -> int:
    """The oldest commit file at or below `keep_from` (which has a checkpoint, so its commit is kept).

    Cleanup deletes in ascending version order, so the commit files there are a
    run from the oldest to the latest: the hint of this handle's last cleanup is
    used if the file before it is gone, else the run's start is found by bisection.
    """
    hint = _first_kept.get(table)
    if hint is not None and hint <= keep_from and log.commit_exists(hint) and (hint == 0 or not log.commit_exists(hint - 1)):
        return hint
    return _first_false(0, keep_from, lambda version: not log.commit_exists(version))


def _first_false(low: int, high: int, holds: Callable[[int], bool], *, gallop: bool = False) -> int:
    """The first version in [low, high) where `holds` is False (high if none), for a `holds` true up to a point.

    By bisection; with `gallop`, after probing low, low+1, low+3, low+7, ... to bound it first (cheaper when it is near low).
    """
    if gallop:
        bound, step = low, 1
        while bound < high and holds(bound):
            low, bound, step = bound + 1, min(high, bound + step), step * 2
        high = bound
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            low = middle + 1
        else:
            high = middle
    return low


def _cleanup_listed(table: Table, keep_checkpoints: int, cutoff: float) -> tuple[int, int]:
    """`cleanup_log` from one listing of the folder: (files deleted, the first version kept)."""
    infos = table.io.list(table.child_uri(DELTA_LOG))
    by_version: dict[int, list] = {}
    for info in infos:
        match = _LOG_FILE.match(info.name)
        if not info.is_dir and match is not None:
            by_version.setdefault(int(match.group(1)), []).append(info)
    checkpoints = sorted(version for version, files in by_version.items() if any(".checkpoint." in info.name for info in files))
    if len(checkpoints) < keep_checkpoints:
        return 0, -1
    keep_from = checkpoints[-keep_checkpoints]
    deleted = 0
    for version in sorted(by_version):
        if version >= keep_from:
            break
        files = by_version[version]
        if any(info.mtime is None or info.mtime > cutoff for info in files):
            break
        # The commit file last: a version whose commit file is there is whole (its checkpoint may remain
        # if a delete below fails, which a reader never uses behind a newer one).
        for info in sorted(files, key=lambda info: info.name.endswith(".json")):
            if table.io.delete(info.uri):
                deleted += 1
    return deleted, keep_from


DEFAULT_LOG_RETENTION_S = 6 * 3600.0


def log_retention_seconds(table: Table) -> float:
    """The table's `delta.logRetentionDuration` in seconds (DEFAULT_LOG_RETENTION_S if unset or unreadable)."""
    return interval_seconds(table.configuration.get("delta.logRetentionDuration"), DEFAULT_LOG_RETENTION_S)


# -- deleting removed data files ----------------------------------------------


def vacuum(table: Table, *, dry_run: bool = False, now_ms: int | None = None) -> list[str]:
    """Delete data files that no snapshot within the retention can reference.

    Retention is the table's `delta.deletedFileRetentionDuration` (the topic's
    `delete.retention.ms`). A file is deleted if it is not active and either its
    remove action (a tombstone of the snapshot) is older than the retention, or it is in no remove action of the snapshot at all (a failed
    commit's file, or one whose expired remove action a checkpoint dropped) and
    it was written more than the retention ago (so it is not an append or a
    compaction still on its way to a commit). A file in no remove action is aged
    to `now_ms` (None: the wall clock); tombstones are aged on the wall clock. Makes no commit. Returns the relative paths deleted (or that would
    be, with `dry_run`).
    """
    table.refresh()
    snapshot = table._snapshot
    retention_s = _retention_seconds(table)
    wall_cutoff_ms = time.time() * 1000 - retention_s * 1000
    tombstoned = set(snapshot.tombstones)
    expired = {path for path, body in snapshot.tombstones.items() if (body.get("deletionTimestamp") or 0) < wall_cutoff_ms}
    active = set(snapshot.adds)
    cutoff = _now_ms(now_ms) / 1000 - retention_s
    doomed = []
    for info in table.io.list(table.uri):
        name = info.name
        if info.is_dir or name.startswith(("_", ".")) or name in active:
            continue
        if name in expired or (name not in tombstoned and info.mtime is not None and info.mtime < cutoff):
            doomed.append(name)
    if not dry_run:
        for name in doomed:
            _delete_quietly(table, name)
    return sorted(doomed)


def _now_ms(now_ms: int | None) -> int:
    """`now_ms` as passed in, or the wall clock's reading."""
    return time.time_ns() // 1_000_000 if now_ms is None else now_ms


def _retention_seconds(table: Table) -> float:
    return interval_seconds(table.configuration.get("delta.deletedFileRetentionDuration"), 7 * 86400.0)


def _delete_quietly(table: Table, name: str) -> None:
    try:
        table.io.delete(table.child_uri(name))
    except KafkaStorageError as error:
        logger.warning("%s: could not delete %s (vacuum will): %s", table.uri, name, error)


__all__ = ["DEFAULT_LOG_RETENTION_S", "cleanup_log", "log_retention_seconds", "vacuum"]
