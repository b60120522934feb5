"""Retention and delete-records: moving a partition's log start forward (S9.1, S9.2).

As in Kafka, retention removes whole files from the start of the log: the oldest
files whose every record is older than `retention.ms` (by the records' timestamps
and a passed-in clock), and the oldest files while the partition holds more than
`retention.bytes`. `delete_records` moves the log start to any offset up to the
last stable offset, also into a file, and removes the files wholly below it.

Each trim is decided on the snapshot in hand and committed as exactly its next
version (`Table.rewrite`): the removed files and the new log start (the `txn`
action `lakelog.log_start_offset`) in one commit. A lost race waits out the retry
policy's backoff, reloads, and decides again. Nothing at or above the LSO is ever
removed (S9.2): no open transaction's rows, and the LSO and aborted-transaction
index never refer below the log start. Removed files stay readable by fetches on
older snapshots until vacuum deletes them, after the table's grace
(`file.delete.delay.ms`, `delete.retention.ms`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow.compute as pc

from lakelog.errors import (
    CommitConflict,
    CorruptRecord,
    InvalidRequest,
    KafkaException,
    OffsetOutOfRange,
    PolicyViolation,
)
from lakelog.log import compaction, plan_handles
from lakelog.log.compaction import CompactionResult
from lakelog.log.partition import LOG_START_OFFSET_APP_ID, PartitionLog
from lakelog.log.partition_file import PartitionFile, partition_files
from lakelog.log.topics import list_topics, open_partition, partition_path, topic_config
from lakelog.store import Location
from lakelog.store.delta.lost_race import after_lost_race
from lakelog.store.delta.table import storage_errors
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff, RetryPolicy
from lakelog.store.upkeep.maintenance import maintain, vacuum

logger = logging.getLogger(__name__)

# How long a trim keeps retrying lost commit races by default.
TRIM_TIMEOUT_S = 60.0
# Partitions the log cleaner cleans at once: each waits on the store for a few small reads (and a commit if it changes).
CLEAN_THREADS = 8
# The operation a trim's commit names in its metadata (Delta's commitInfo).
RETENTION_OPERATION = "lakelog.retention"
DELETE_RECORDS_OPERATION = "lakelog.delete_records"
# delete_records' offset that stands for the high watermark, as in Kafka.
HIGH_WATERMARK = -1


@dataclass(frozen=True)
class Trim:
    """A committed trim: the version, the new log start offset, and how many files and bytes it removed."""

    version: int
    log_start_offset: int
    files_removed: int
    bytes_removed: int


def files_past_retention(
    files: Sequence[PartitionFile],
    max_timestamp_ms: Callable[[PartitionFile], int],
    *,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
    last_stable_offset: int,
) -> int:
    """How many of the oldest `files` retention removes (S9.1); pure.

    A file may go only if all its rows are below `last_stable_offset` (S9.2). Of
    those, by time: the leading files whose newest record is more than
    `retention_ms` old at `now_ms`; by size: the leading files Kafka would drop,
    each only while the partition stays at or above `retention_bytes` without it.
    -1 turns a limit off. `max_timestamp_ms` is asked only of files it needs.
    """
    eligible = 0
    while eligible < len(files) and files[eligible].max_offset < last_stable_offset:
        eligible += 1
    by_time = 0
    if retention_ms >= 0:
        while by_time < eligible and now_ms - max_timestamp_ms(files[by_time]) > retention_ms:
            by_time += 1
    by_size = 0
    if retention_bytes >= 0:
        excess = sum(entry.size_bytes for entry in files) - retention_bytes
        while by_size < eligible and excess - files[by_size].size_bytes >= 0:
            excess -= files[by_size].size_bytes
            by_size += 1
    return max(by_time, by_size)


def enforce_retention(log_: PartitionLog, now_ms: int, *, backoff: Backoff | None = None) -> Trim | None:
    """Apply `retention.ms` and `retention.bytes` to one partition in one strict commit; None if nothing is due.

    Decided on the latest snapshot; a lost race waits `backoff` (default: the retry
    policy's, for TRIM_TIMEOUT_S) and decides again on the newer snapshot, so it is
    idempotent and safe beside appends, fetches and other sweeps (S8.2).
    KafkaTimeout once the backoff's deadline passes.
    """
    config = log_.config
    if not config.deletes or (config.retention_ms < 0 and config.retention_bytes < 0):
        return None
    backoff = DEFAULT_POLICY.start(TRIM_TIMEOUT_S) if backoff is None else backoff
    while True:
        log_.refresh()
        files = partition_files(log_.table)
        try:
            count = files_past_retention(
                files,
                lambda entry: _max_timestamp_ms(log_, entry),
                now_ms=now_ms,
                retention_ms=config.retention_ms,
                retention_bytes=config.retention_bytes,
                last_stable_offset=log_.last_stable_offset(),
            )
        except CorruptRecord:
            # A file another trim removed after our snapshot was vacuumed already: decide on the latest.
            if not backoff.wait():
                raise
            continue
        if count == 0:
            return None
        start = files[count].min_offset if count < len(files) else log_.log_end_offset()
        trim = _commit_trim(log_, files[:count], max(start, log_.log_start_offset()), RETENTION_OPERATION, backoff)
        if trim is not None:
            logger.info(
                "%s-%d: retention removed %d file(s), %d bytes; log start offset %d (version %d)",
                log_.topic,
                log_.partition,
                trim.files_removed,
                trim.bytes_removed,
                trim.log_start_offset,
                trim.version,
            )
            return trim


def delete_records(log_: PartitionLog, offset: int, *, backoff: Backoff | None = None) -> int:
    """Move the log start offset to `offset` (HIGH_WATERMARK: the high watermark); returns the new low watermark.

    Removes the files wholly below it in the same commit. An offset at or below
    the log start changes nothing (the log start only moves forward, S9.1).
    Refused, with the table unchanged (S8.3): a negative offset other than -1 or one
    beyond the high watermark (OffsetOutOfRange), one above the last stable offset
    (OffsetOutOfRange: an open transaction's rows stay, S9.2), a topic whose
    cleanup.policy has no `delete` (PolicyViolation).
    """
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise InvalidRequest(f"offset must be an integer, not {offset!r}")
    if not log_.config.deletes:
        raise PolicyViolation(
            f"{log_.topic} has cleanup.policy={log_.config.values['cleanup.policy']}: records cannot be deleted"
        )
    backoff = DEFAULT_POLICY.start(TRIM_TIMEOUT_S) if backoff is None else backoff
    while True:
        log_.refresh()
        high_watermark, log_start = log_.high_watermark(), log_.log_start_offset()
        target = high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0 or target > high_watermark:
            raise OffsetOutOfRange(
                f"{log_.topic}-{log_.partition}: cannot delete records before {offset}: "
                f"it is outside [0, {high_watermark}] (the high watermark)",
                log_start_offset=log_start,
                log_end_offset=log_.log_end_offset(),
            )
        last_stable = log_.last_stable_offset()
        if target > last_stable:
            raise OffsetOutOfRange(
                f"{log_.topic}-{log_.partition}: cannot delete records before {target}: "
                f"it is above the last stable offset {last_stable}, held by an open transaction",
                log_start_offset=log_start,
                log_end_offset=log_.log_end_offset(),
                last_stable_offset=last_stable,
            )
        if target <= log_start:
            return log_start
        removed = [entry for entry in partition_files(log_.table) if entry.max_offset < target]
        trim = _commit_trim(log_, removed, target, DELETE_RECORDS_OPERATION, backoff)
        if trim is not None:
            logger.info(
                "%s-%d: delete_records moved the log start offset to %d, removing %d file(s) (version %d)",
                log_.topic,
                log_.partition,
                trim.log_start_offset,
                trim.files_removed,
                trim.version,
            )
            return trim.log_start_offset


@dataclass(frozen=True)
class PartitionCleaning:
    """What one sweep did to one partition: retention, compaction by key, files vacuumed, or the error it met."""

    topic: str
    partition: int
    retention: Trim | None = None
    compaction: CompactionResult | None = None
    files_vacuumed: int = 0
    error: str | None = None


def clean_topics(root: str | Location, now_ms: int, *, policy: RetryPolicy = DEFAULT_POLICY) -> list[PartitionCleaning]:
    """One pass of the log cleaner over every topic of `root`: the partitions it changed, or failed on.

    Per partition, by its `cleanup.policy`: compaction by key (S9.3), then
    retention (S9.1) on the clock `now_ms`; then vacuum deletes files removed
    longer ago than the table's grace, on the same clock. Idempotent and safe beside clients and
    other sweeps (S8.2); an error on one partition is reported (and logged) and
    the sweep carries on with the next. Partitions are cleaned CLEAN_THREADS at a time (each waits on the store,
    and each change is its own table's strict commit), through the handles the process keeps
    (lakelog.log.plan_handles): a pass after the first refreshes each partition instead of opening it cold.
    """
    slots: list[PartitionCleaning | tuple[str, int]] = []
    for topic in list_topics(root):
        try:
            count = topic_config(root, topic).num_partitions
        except KafkaException as error:
            logger.warning("log cleaner: topic %s skipped: %s", topic, error)
            slots.append(PartitionCleaning(topic, -1, error=str(error)))
            continue
        slots.extend((topic, partition) for partition in range(count))
    work = [slot for slot in slots if isinstance(slot, tuple)]
    with ThreadPoolExecutor(max(1, min(len(work), CLEAN_THREADS)), thread_name_prefix="lakelog-cleaner") as pool:
        cleaned = iter(list(pool.map(lambda item: _clean_kept(root, item[0], item[1], now_ms, policy), work)))
    report = []
    for slot in slots:
        done = next(cleaned) if isinstance(slot, tuple) else slot
        if done.retention or done.compaction or done.files_vacuumed or done.error:
            report.append(done)
    return report


def _clean_kept(root: str | Location, topic: str, partition: int, now_ms: int, policy: RetryPolicy) -> PartitionCleaning:
    location = partition_path(root, topic, partition)
    try:
        log_ = plan_handles.take(location, lambda: open_partition(root, topic, partition))
        done = _clean_partition(log_, now_ms, policy)
    except KafkaException as error:
        logger.warning("log cleaner: %s-%d skipped: %s", topic, partition, error)
        return PartitionCleaning(topic, partition, error=str(error))
    plan_handles.give_back(location, log_)
    return done


def _clean_partition(log_: PartitionLog, now_ms: int, policy: RetryPolicy) -> PartitionCleaning:
    compacted = compaction.compact_partition(log_, now_ms) if log_.config.compacts else None
    trimmed = enforce_retention(log_, now_ms, backoff=policy.start(TRIM_TIMEOUT_S))
    with storage_errors(log_.table.uri, "vacuuming", log_.version):
        vacuumed = vacuum(log_.table, now_ms=now_ms)
    if vacuumed:
        logger.info("%s-%d: vacuum deleted %d removed file(s)", log_.topic, log_.partition, len(vacuumed))
    return PartitionCleaning(log_.topic, log_.partition, trimmed, compacted, len(vacuumed))


def _commit_trim(
    log_: PartitionLog, removed: Sequence[PartitionFile], log_start: int, operation: str, backoff: Backoff
) -> Trim | None:
    """Commit the removal of `removed` and the log start `log_start` as exactly the next version.

    None after a lost race (waited out and reloaded: the caller decides again).
    """
    try:
        version = log_.table.rewrite(
            removed,
            app_versions={LOG_START_OFFSET_APP_ID: log_start},
            metadata={"lakelog.operation": operation},
        )
    except CommitConflict:
        after_lost_race(backoff, f"{log_.topic}-{log_.partition}: {operation}", logger)
        return None
    maintain(log_.table, log_.maintenance)
    return Trim(version, log_start, len(removed), sum(entry.size_bytes for entry in removed))


def _max_timestamp_ms(log_: PartitionLog, entry: PartitionFile) -> int:
    """The newest record timestamp of a file, in ms (a file holds no statistics of it)."""
    timestamps = log_.table.read_file(entry, ["timestamp"]).column("timestamp")
    newest = pc.max(timestamps.cast("int64")).as_py()
    return -(1 << 62) if newest is None else newest // 1000
