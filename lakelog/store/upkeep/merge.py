"""The small-file merge: runs of consecutive small files of a table rewritten as one, in one strict commit.

A table whose rows are ordered by one integer column, its files each holding a range of it that no other file's
overlaps (a partition log: by offset), is merged in that order: `compact` reads whole files, concatenates them in
order and writes them back, and the new file claims exactly the union of the ranges it replaces. The order is the
caller's (`MergeOrder`: the column and the table's files sorted by it, each read with the checks its layer makes),
so the store needs no table's columns; the merge itself is storage layout (which files hold the rows, never a row
changed), committed like an append: exactly version v+1 of the snapshot it was decided on, never rebased. On a
lost race it reloads and decides again (are the files it merged still all active?), so it can never remove a file
that someone else removed, never duplicates rows, and never rebases an append (appends also commit with retries
off: a compaction that takes v+1 first makes the append fail and re-decide on v+1).

Runs are chosen like Lucene's log merge policy, so that every row is rewritten only O(log n) times and runs never
interleave.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CommitConflict, KafkaStorageError
from lakelog.store.delta.actions import add_action, remove_action
from lakelog.store.delta.data_file import DataFile, integer
from lakelog.store.delta.file_stats import file_statistics
from lakelog.store.delta.table import Table

logger = logging.getLogger(__name__)

COMPACT_OPERATION = "lakelog.compact"


@dataclass(frozen=True)
class MergeOrder:
    """The order a merge keeps: the integer `column` that orders the table's rows, and `files(table)`, the
    table's active files sorted by it (each read with whatever checks its layer gives it)."""

    column: str
    files: Callable[[Table], Sequence[DataFile]]

    def low(self, entry: DataFile) -> int:
        return integer(entry.min_values.get(self.column))

    def high(self, entry: DataFile) -> int:
        return integer(entry.max_values.get(self.column))


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

    sources: list[DataFile]
    path: str = ""
    size: int = 0
    stats: str = ""
    records: int = 0
    written: bool = field(default=False)


def plan_compaction(
    files: Sequence[DataFile], order: MergeOrder, fan_in: int = 10, target_file_bytes: int = 128 << 20
) -> list[list[DataFile]]:
    """Choose runs of consecutive files (`files` sorted by `order`) to merge (Lucene's LogMergePolicy, by record count).

    Each file's level is log_fan_in(records). From the oldest file on: take the
    highest level among the rest, and every file up to the last one within 0.75
    of it forms a group; the group is cut into windows of `fan_in` consecutive
    files, and each window whose files are all smaller than `target_file_bytes`
    (and whose sum stays within it) becomes one merge. A merged file is about
    `fan_in` times larger than its inputs, one level up, so each record is
    rewritten about log_fan_in(records per file) times; windows are contiguous in
    `order`, so merged files never interleave with others.
    """
    if fan_in < 2:
        raise ValueError(f"fan_in must be at least 2, not {fan_in}")
    ordered = list(files)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if order.low(after) <= order.high(before):
            # Overlapping ranges (not written by lakelog): merging could interleave further.
            return []
    log_fan_in = math.log(fan_in)
    levels = [math.log(max(entry.num_records, 1)) / log_fan_in for entry in ordered]
    merges: list[list[DataFile]] = []
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
    order: MergeOrder,
    *,
    fan_in: int = 10,
    target_file_bytes: int = 128 << 20,
    compression: str = "snappy",
    max_attempts: int = 3,
    now_ms: int | None = None,
) -> CompactionResult | None:
    """Merge small consecutive files (in `order`) of the latest snapshot in one strict commit.

    Returns None if nothing was worth merging or every attempt lost its race (a
    harmless outcome: the merged files are deleted again, the table is as it
    was). Rows are never changed; only which files hold them. `now_ms` (None:
    the wall clock) is the remove actions' time.
    """
    table.refresh()
    merges = [_Merge(list(run)) for run in plan_compaction(order.files(table), order, fan_in, target_file_bytes)]
    if not merges:
        return None
    try:
        for merge in merges:
            _write_merge(table, merge, order, compression)
        for attempt in range(1, max_attempts + 1):
            decided_on = table.version
            active = {entry.path for entry in table.data_files()}
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


def _write_merge(table: Table, merge: _Merge, order: MergeOrder, compression: str) -> None:
    schema = table.schema
    pieces = [table.read_file(entry) for entry in merge.sources]
    rows = pa.concat_tables([piece.select(schema.names).cast(schema) for piece in pieces])
    column = order.column
    values = rows.column(column)
    expected = sum(entry.num_records for entry in merge.sources)
    if rows.num_rows != expected:
        raise RuntimeError(f"{table.uri}: merge read {rows.num_rows} rows, statistics say {expected}")
    if rows.num_rows > 1 and not pc.all(pc.greater(values[1:], values[:-1])).as_py():
        rows = rows.sort_by(column)
    first = order.low(merge.sources[0])
    merge.path = (
        f"part-compact-{first:020d}-{uuid.uuid4().hex}.{compression if compression != 'none' else 'uncompressed'}.parquet"
    )
    codec = "NONE" if compression == "none" else compression
    merge.size = table.io.write_parquet(rows, table.child_uri(merge.path), compression=codec, fresh=True)
    merge.written = True
    merge.records = rows.num_rows
    # The sources' whole range, not the rows' own: a source may claim more than it holds (a key-compacted one, S9.3).
    claimed = (min(order.low(entry) for entry in merge.sources), max(order.high(entry) for entry in merge.sources))
    merge.stats = file_statistics(rows, {column: claimed})


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


def newest_modification(sources: Sequence[DataFile]) -> int | None:
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
    return any(entry.path == path for entry in table.data_files())


# -- helpers -----------------------------------------------------------------------


def _now_ms(now_ms: int | None) -> int:
    """`now_ms` as passed in, or the wall clock's reading."""
    return time.time_ns() // 1_000_000 if now_ms is None else now_ms


def _delete_quietly(table: Table, name: str) -> None:
    try:
        table.io.delete(table.child_uri(name))
    except KafkaStorageError as error:
        logger.warning("%s: could not delete %s (vacuum will): %s", table.uri, name, error)


__all__ = ["COMPACT_OPERATION", "CompactionResult", "MergeOrder", "compact", "newest_modification", "plan_compaction"]
