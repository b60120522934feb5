"""Compaction by key (`cleanup.policy=compact`, S9.3): keep the last record per key, never renumber.

Kafka's log cleaner, on the partition's Delta table. The cleaner only looks at
files wholly below the last stable offset (Kafka never cleans the active part),
starting at the log start offset. Among their rows it keeps:

- the last data row of every key, among rows that no aborted transaction holds
  (an aborted transaction's rows go: they were never readable, S5.2);
- rows with a null key (a compacted topic has none from Kafka's clients; a row
  that cannot be keyed is never dropped);
- a tombstone (a null value) only until `delete.retention.ms` after its
  timestamp on the passed-in clock: a consumer that reaches the head within that
  time still sees the delete;
- every producer id's last marker, and its last data batch, whole, unless a marker
  follows it: the producer's state (epoch, sequence, open transaction) is derived
  from its last rows (S3.5), and a marker bumps the epoch and restarts the sequence;
  once the producer has expired (S9.4: `producer.id.expiration.ms` past its last
  append, no transaction open) they carry no state and go like any other row;
- a transaction marker while any kept row of its transaction is before it (a
  data row without its marker would look open and stall the LSO, S5.1).

Kept rows keep their offsets (S1.1). A run of consecutive files that loses rows
is replaced by one file that claims the run's whole offset range in its
statistics (`Table.rewrite`'s claimed range of `offset`), so the log start stays put and a
fetch from any offset in the range still finds a file (S5.4: readers follow
`next_offset`). Files that lose nothing are not rewritten. The rewrite is one
strict commit decided on the snapshot it follows (ARCHITECTURE.md): a lost race
waits out the retry policy's backoff, reloads and decides again, so the cleaner
is idempotent and safe beside appends, retention and other cleaners (S8.2).

A pass records the end of the section it cleaned and when its oldest kept
tombstone expires (`txn` versions of the table); the next pass reads nothing
unless files past that end fell below the LSO or a tombstone is due (Kafka
cleans a dirty log only).

`rewrite_below_lso(log, choose)` is the engine, shared with the internal logs
(lakelog.coordinator.runtime.state_log compacts them by their record keys with its own
`choose`); `compact_partition(log, now_ms)` is the topic cleaner; its keep rules are the pure plan of
lakelog.log.compaction_keep (`plan_keep`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CommitConflict, CorruptRecord
from lakelog.log.compaction_keep import plan_keep
from lakelog.log.partition import PartitionLog
from lakelog.log.partition_file import OFFSET, PartitionFile, partition_files
from lakelog.store.delta.lost_race import after_lost_race
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff
from lakelog.store.upkeep.maintenance import maintain
from lakelog.store.upkeep.merge import newest_modification

logger = logging.getLogger(__name__)

# custom_metadata of a compaction's commit, so the history tells it from an append.
OPERATION = "lakelog.compact_by_key"
# Recorded with each pass of the topic cleaner: the end of the section it cleaned, and when its oldest kept
# tombstone expires; a pass with no file past the first and before the second reads nothing.
CLEANED_OFFSET_APP_ID = "lakelog.compaction.cleaned_offset"
TOMBSTONES_DUE_APP_ID = "lakelog.compaction.tombstones_due_ms"
NO_TOMBSTONE_DUE = 2**62
COMPACTION_TIMEOUT_S = 60.0

# What a planner is given: the rows of the files it may clean, in offset order, and which file each came from.
Choose = Callable[["CleanableRows"], np.ndarray]


@dataclass(frozen=True)
class CleanableRows:
    """The rows of the files wholly below the LSO, in offset order; `file_index[i]` is row i's file in `files`."""

    log: PartitionLog
    files: tuple[PartitionFile, ...]
    rows: pa.Table
    file_index: np.ndarray
    # The LSO of the snapshot the rows were read on.
    last_stable_offset: int


@dataclass(frozen=True)
class CompactionResult:
    """A compaction that committed: its version, and files and records before and after."""

    version: int
    files_before: int
    files_after: int
    records_before: int
    records_after: int
    first_offset: int
    last_offset: int


# -- the engine ------------------------------------------------------------------------


def cleanable_files(log_: PartitionLog, horizon: int) -> list[PartitionFile]:
    """The active files of the snapshot in hand wholly below `horizon` (the LSO), from the log start (Kafka's clean section)."""
    start = log_.log_start_offset()
    return [entry for entry in partition_files(log_.table) if entry.max_offset < horizon and entry.max_offset >= start]


def read_cleanable(log_: PartitionLog, horizon: int | None = None) -> CleanableRows:
    """The rows of `cleanable_files` below the LSO (or `horizon`), in the table's schema, each tagged with its file."""
    lso = log_.last_stable_offset() if horizon is None else horizon
    files = tuple(cleanable_files(log_, lso))
    schema = log_.table.schema
    pieces, index = [], []
    for position, entry in enumerate(files):
        rows = log_.table.read_file(entry).select(schema.names).cast(schema)
        pieces.append(rows)
        index.append(np.full(rows.num_rows, position, dtype=np.int64))
    rows = pa.concat_tables(pieces) if pieces else schema.empty_table()
    file_index = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
    return CleanableRows(log_, files, rows, file_index, lso)


def rewrite_below_lso(
    log_: PartitionLog,
    choose: Choose,
    *,
    below_log_end: bool = False,
    progress: Callable[[CleanableRows, np.ndarray], dict[str, int]] | None = None,
    timeout_s: float = COMPACTION_TIMEOUT_S,
    backoff: Backoff | None = None,
) -> CompactionResult | None:
    """Drop the rows `choose` does not keep from the files wholly below the LSO, in one strict commit.

    `choose(rows)` returns a boolean mask over `rows.rows` (True: keep). Each run of
    consecutive files that loses a row becomes one file claiming the run's offset
    range. None if nothing is dropped (a second run right after the first does
    nothing). A lost race waits on `backoff`, reloads and decides again;
    KafkaTimeout past its deadline. `below_log_end` cleans up to the LEO: for the
    internal logs, whose rows are never transactional data (their LSO is the LEO).
    `progress(rows, keep)` gives `txn` versions to record with the decision; if they
    changed, they are committed even when no row is dropped (a commit of them alone).
    """
    backoff = DEFAULT_POLICY.start(timeout_s) if backoff is None else backoff
    while True:
        log_.refresh()
        try:
            cleanable = read_cleanable(log_, log_.log_end_offset() if below_log_end else None)
        except CorruptRecord:
            # A file removed after our snapshot (retention, another cleaner): decide again on the latest.
            if not backoff.wait():
                raise
            continue
        if not cleanable.files:
            return None
        keep = np.asarray(choose(cleanable), dtype=bool)
        if keep.shape != (cleanable.rows.num_rows,):
            raise ValueError(f"a compaction plan must give one flag per row, not {keep.shape}")
        versions = progress(cleanable, keep) if progress is not None else {}
        versions = {app_id: value for app_id, value in versions.items() if log_.table.app_version(app_id) != value}
        if keep.all() and not versions:
            return None
        removed, added = _runs(cleanable, keep) if not keep.all() else ([], [])
        before = sum(entry.num_records for entry in removed)
        after = sum(item[0].num_rows for item in added)
        try:
            version = log_.table.rewrite(
                removed,
                added,
                app_versions=versions or None,
                metadata={"lakelog.operation": OPERATION},
                compression=log_.config.compression_type,
            )
        except CommitConflict:
            after_lost_race(backoff, f"{log_.topic}-{log_.partition}: compaction", logger)
            continue
        # A checkpoint may be due at this version: reopen from it and clean the log, as after an append.
        log_.last_maintenance = maintain(log_.table, log_.maintenance)
        if not removed:
            logger.debug("%s-%d: compaction found nothing to drop; recorded %s", log_.topic, log_.partition, versions)
            return None
        result = CompactionResult(
            version=version,
            files_before=len(removed),
            files_after=len(added),
            records_before=before,
            records_after=after,
            first_offset=removed[0].min_offset,
            last_offset=removed[-1].max_offset,
        )
        logger.info(
            "%s-%d: compacted offsets %d-%d by key in version %d: %d files / %d records -> %d files / %d records",
            log_.topic,
            log_.partition,
            result.first_offset,
            result.last_offset,
            version,
            result.files_before,
            result.records_before,
            result.files_after,
            result.records_after,
        )
        return result


def _runs(
    cleanable: CleanableRows, keep: np.ndarray
) -> tuple[list[PartitionFile], list[tuple[pa.Table, dict[str, tuple[int, int]], int | None]]]:
    """The files that lose rows, and per run of consecutive such files the kept rows, the run's range and its newest time."""
    files = cleanable.files
    losing = np.zeros(len(files), dtype=bool)
    losing[np.unique(cleanable.file_index[~keep])] = True
    _anchor_empty_runs(losing, cleanable.file_index, keep)
    removed: list[PartitionFile] = []
    added: list[tuple[pa.Table, dict[str, tuple[int, int]], int | None]] = []
    start = None
    for position in range(len(files) + 1):
        if position < len(files) and losing[position]:
            if start is None:
                start = position
            continue
        if start is not None:
            run = files[start:position]
            in_run = (cleanable.file_index >= start) & (cleanable.file_index < position) & keep
            added.append(
                (
                    cleanable.rows.filter(pa.array(in_run)),
                    {OFFSET: (run[0].min_offset, run[-1].max_offset)},
                    newest_modification(run),
                )
            )
            removed.extend(run)
            start = None
    return removed, added


def _anchor_empty_runs(losing: np.ndarray, file_index: np.ndarray, keep: np.ndarray) -> None:
    """Give every run of losing files a kept row: a file with no rows has no producer-id statistics.

    A run that would lose every row takes in the next file (else the one before) as it is; a clean
    section that loses every row keeps its last one.
    """
    kept_per_file = np.bincount(file_index[keep], minlength=len(losing))
    position = 0
    while position < len(losing):
        if not losing[position]:
            position += 1
            continue
        end = position
        while end < len(losing) and losing[end]:
            end += 1
        if not kept_per_file[position:end].any():
            if end < len(losing):
                losing[end] = True  # joins the run: the while loop goes on past it
                continue
            if position > 0:
                losing[position - 1] = True
            else:
                keep[np.flatnonzero(file_index < end)[-1]] = True
        position = end


# -- the topic cleaner ------------------------------------------------------------------


def compact_partition(log_: PartitionLog, now_ms: int, *, timeout_s: float = COMPACTION_TIMEOUT_S) -> CompactionResult | None:
    """Compact a topic-partition by key (S9.3) if its `cleanup.policy` holds `compact`; see the module docstring.

    `now_ms` is the clock tombstones are aged on (`delete.retention.ms`).
    """
    if not log_.config.compacts:
        return None
    retention_ms = log_.config.values["delete.retention.ms"]
    if not _due(log_, now_ms):
        return None

    def choose(cleanable: CleanableRows) -> np.ndarray:
        end = cleanable.files[-1].max_offset + 1
        aborted = cleanable.log.aborted_transactions(cleanable.files[0].min_offset, end)
        last_data, last_marker = last_rows_by_producer(cleanable)
        expired = expired_producers(cleanable, last_data, last_marker, now_ms, log_.config.producer_id_expiration_ms)
        last_data = {pid: offset for pid, offset in last_data.items() if pid not in expired}
        last_marker = {pid: offset for pid, offset in last_marker.items() if pid not in expired}
        return plan_keep(
            cleanable.rows, cleanable.file_index, aborted, last_data, last_marker, now_ms=now_ms, delete_retention_ms=retention_ms
        )

    def progress(cleanable: CleanableRows, keep: np.ndarray) -> dict[str, int]:
        return {
            CLEANED_OFFSET_APP_ID: cleanable.files[-1].max_offset + 1,
            TOMBSTONES_DUE_APP_ID: _tombstones_due_ms(cleanable.rows, keep, retention_ms),
        }

    return rewrite_below_lso(log_, choose, progress=progress, timeout_s=timeout_s)


def _due(log_: PartitionLog, now_ms: int) -> bool:
    """Whether a pass may drop anything: files below the LSO past the cleaned offset, or a tombstone due.

    Kafka cleans only a dirty log (its min.cleanable.dirty.ratio): a pass over a clean section reads no data.
    """
    log_.refresh()
    files = cleanable_files(log_, log_.last_stable_offset())
    if not files:
        return False
    cleaned = log_.table.app_version(CLEANED_OFFSET_APP_ID)
    due_ms = log_.table.app_version(TOMBSTONES_DUE_APP_ID)
    return cleaned is None or files[-1].max_offset >= cleaned or due_ms is None or now_ms >= due_ms


def _tombstones_due_ms(rows: pa.Table, keep: np.ndarray, retention_ms: int) -> int:
    """The first moment a kept tombstone expires (NO_TOMBSTONE_DUE if none is kept)."""
    kept = rows.filter(pa.array(keep))
    tombstones = kept.filter(
        pc.and_(pc.and_(kept.column("value").is_null(), kept.column("key").is_valid()), kept.column("control").is_null())
    )
    if not tombstones.num_rows:
        return NO_TOMBSTONE_DUE
    oldest_ms = pc.min(pc.cast(tombstones.column("timestamp"), pa.int64())).as_py() // 1000
    return oldest_ms + retention_ms + 1


def last_rows_by_producer(cleanable: CleanableRows) -> tuple[dict[int, int], dict[int, int]]:
    """Producer id -> offset of its last data row, and of its last marker, in the whole snapshot (below the LEO).

    Rows past the clean section are read as header columns only: only their producer ids and offsets matter.
    """
    pieces = [cleanable.rows.select(["offset", "producer_id", "control"])]
    end = cleanable.files[-1].max_offset if cleanable.files else -1
    for entry in partition_files(cleanable.log.table):
        if entry.min_offset > end:
            pieces.append(cleanable.log.table.read_file(entry, ["offset", "producer_id", "control"]))
    headers = pa.concat_tables(pieces)
    offsets = headers.column("offset").to_numpy()
    producers = headers.column("producer_id").to_numpy()
    is_marker = headers.column("control").is_valid().to_numpy(zero_copy_only=False)
    return _last_by(producers, offsets, ~is_marker & (producers >= 0)), _last_by(producers, offsets, is_marker & (producers >= 0))


def expired_producers(
    cleanable: CleanableRows, last_data: dict[int, int], last_marker: dict[int, int], now_ms: int, expiration_ms: int
) -> set[int]:
    """Producer ids whose state has expired at `now_ms` (S9.4), judged as the partition judges it: the last row
    is in the clean section, no transaction of theirs is open, and the later of that row's timestamp and its
    file's append time is more than `producer.id.expiration.ms` ago. Their last batch and marker carry no state
    any more (the partition answers UnknownProducerId either way), so compaction need not keep them: without
    this, every producer id that ever wrote a compacted topic left a row for good (one per unit load in
    `__sink_batches`)."""
    if cleanable.rows.num_rows == 0:
        return set()
    offsets = cleanable.rows.column("offset").to_numpy()
    timestamps_ms = pc.cast(cleanable.rows.column("timestamp"), pa.int64()).fill_null(0).to_numpy(zero_copy_only=False) // 1000
    transactional = cleanable.rows.column("is_transactional").to_numpy(zero_copy_only=False)
    is_marker = cleanable.rows.column("control").is_valid().to_numpy(zero_copy_only=False)
    append_ms = np.array([entry.modification_time_ms for entry in cleanable.files], dtype=np.int64)[cleanable.file_index]
    expired = set()
    for producer_id in set(last_data) | set(last_marker):
        last = max(last_data.get(producer_id, -1), last_marker.get(producer_id, -1))
        row = int(np.searchsorted(offsets, last))
        if row >= len(offsets) or offsets[row] != last:
            continue  # past the clean section: recent, or part of an open transaction
        if transactional[row] and not is_marker[row]:
            continue  # its transaction is open: Kafka never expires a producer mid-transaction
        if now_ms - max(int(timestamps_ms[row]), int(append_ms[row])) > expiration_ms:
            expired.add(producer_id)
    return expired


def _last_by(producers: np.ndarray, offsets: np.ndarray, mask: np.ndarray) -> dict[int, int]:
    found: dict[int, int] = {}
    if not mask.any():
        return found
    table = pa.table({"p": producers[mask], "o": offsets[mask]}).group_by("p").aggregate([("o", "max")])
    for producer_id, offset in zip(table.column("p").to_pylist(), table.column("o_max").to_pylist(), strict=True):
        found[producer_id] = offset
    return found


__all__ = [
    "CleanableRows",
    "CompactionResult",
    "OPERATION",
    "cleanable_files",
    "compact_partition",
    "last_rows_by_producer",
    "plan_keep",
    "read_cleanable",
    "rewrite_below_lso",
]
