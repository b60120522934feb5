"""A transactional id's batch records in `__sink_batches`, read from the rows they are (S9.4, S10.2).

The batch writer's transaction appends one record row per batch to the
`__sink_batches` partition its transactional id hashes to: key = the id, value
= JSON (`batch`, `before`: the last batch committed before it, `records`,
`offsets` and `protects`: per partition the last offset of this batch and every
earlier one, `note`). The record commits or aborts with the batch's rows, so the
last committed batch is read from the rows alone, newest first from the log end
down to the log start:

- a record whose transaction is still open: its batch is not decided, but its
  `before` is committed whatever it decides;
- an aborted record: the next older record of the key decides (or, when none
  is left, its `before`);
- a committed record: its batch is the last committed one;
- a tombstone (a null value): nothing older counts.

Nothing but rows: a record lives as long as its row, and `__sink_batches` is
compacted by key (S9.3), so a transactional id keeps its newest record only.
`sweep_sink_records` (a sweep step) deletes a record once every partition
it protects has moved its log start past what it protects: the rows are gone,
so the unit they were may load again.

Tables written before this format also recorded each record in three Delta
`txn` ids (`lakelog.sink.<id>.batch/.offset/.before`); they are still read,
never written, for a record row of the old format or when no row is left.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.coordinator.transaction import partition_for_transactional_id
from lakelog.errors import (
    ConcurrentTransactions,
    CorruptRecord,
    KafkaException,
    KafkaTimeout,
    OffsetMismatch,
    UnknownTopicOrPartition,
)
from lakelog.log import BatchHeader, PartitionLog, open_partition, payload_table
from lakelog.log.compaction import CompactionResult, compact_partition
from lakelog.log.partition_file import PartitionFile, partition_files
from lakelog.log.topics import existing_internal_partitions, open_internal_partition
from lakelog.store import Location
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff, RetryPolicy
from lakelog.typedef import TopicPartitionKey

logger = logging.getLogger(__name__)

SINK_BATCHES_LOG = "__sink_batches"
SINK_BATCHES_PARTITIONS = 8
# Records are compacted by key (S9.3): a transactional id keeps its newest record, a tombstone none.
SINK_BATCHES_CONFIG = {"cleanup.policy": "compact"}
# The `txn` app ids of the older format (read only).
OLD_APP_PREFIX = "lakelog.sink."
TOMBSTONE_TIMEOUT_S = 60.0
_COLUMNS = ["offset", "key", "value", "producer_id", "control"]


@dataclass(frozen=True)
class CommittedBatch:
    """The last committed batch of a transactional id, as its record tells it.

    `protects` is, per partition, the last offset of this batch's rows and of every
    earlier batch's that the record knew of (empty for a record of the older format).
    """

    batch_id: int
    records: Mapping[TopicPartitionKey, int]
    offsets: Mapping[TopicPartitionKey, tuple[int, int]]
    note: Mapping[str, Any]
    protects: Mapping[TopicPartitionKey, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordState:
    """What a transactional id's records say: its last committed batch, and the batch of a record still open."""

    committed: CommittedBatch | None
    open_batch: int | None = None


@dataclass(frozen=True)
class SpentRecords:
    """What one sweep pass did to one `__sink_batches` partition: the ids it tombstoned, its compaction, or the error met."""

    partition: int
    transactional_ids: tuple[str, ...] = ()
    compaction: CompactionResult | None = None
    error: str | None = None


def open_batches_log(root: str | Location, transactional_id: str) -> PartitionLog:
    """The `__sink_batches` partition of `transactional_id` (created, compacted by key, on first use)."""
    count = open_internal_partition(root, SINK_BATCHES_LOG, 0, SINK_BATCHES_PARTITIONS, config=SINK_BATCHES_CONFIG)
    partition = partition_for_transactional_id(transactional_id, count.config.num_partitions)
    if partition == 0:
        return count
    return open_internal_partition(root, SINK_BATCHES_LOG, partition, SINK_BATCHES_PARTITIONS, config=SINK_BATCHES_CONFIG)


def record_value(
    batch_id: int,
    before: int | None,
    records: Mapping[TopicPartitionKey, int],
    offsets: Mapping[TopicPartitionKey, tuple[int, int]],
    note: Mapping[str, Any],
    protects: Mapping[TopicPartitionKey, int],
) -> bytes:
    """A batch record's value (JSON)."""
    value = {
        "batch": batch_id,
        "before": before,
        "records": {_tp_text(tp): count for tp, count in sorted(records.items())},
        "offsets": {_tp_text(tp): list(span) for tp, span in sorted(offsets.items())},
        "protects": {_tp_text(tp): last for tp, last in sorted(protects.items())},
        "note": dict(note),
    }
    return json.dumps(value, sort_keys=True).encode()


def protected_after(
    committed: CommittedBatch | None, offsets: Mapping[TopicPartitionKey, tuple[int, int]]
) -> dict[TopicPartitionKey, int]:
    """What a new record protects: the last committed batch's protected offsets, raised by the new batch's rows."""
    protects: dict[TopicPartitionKey, int] = {}
    if committed is not None:
        protects.update(committed.protects or {tp: span[1] for tp, span in committed.offsets.items()})
    for tp, (_, last) in offsets.items():
        protects[tp] = max(protects.get(tp, last), last)
    return protects


def read_records(log: PartitionLog, transactional_id: str) -> RecordState:
    """The last committed batch of `transactional_id` in its `__sink_batches` partition, read on the latest snapshot."""
    log.refresh()
    key = transactional_id.encode()
    open_batch: int | None = None
    # The `before` of the newest record not known committed: what is committed if no older record decides.
    floor: int | None = None
    undecided = False
    for offset, producer_id, value in _newest_first(log, key):
        if value is None:
            break  # a tombstone: older records no longer protect anything
        decoded = _decode(value)
        if decoded is None or "before" not in decoded:
            return RecordState(_from_app_ids(log, transactional_id), open_batch)
        # The transaction index is read only once a record is found: an id never seen costs the key scan alone.
        open_first = log.open_transactions().get(producer_id)
        is_open = producer_id >= 0 and open_first is not None and open_first <= offset
        if not is_open and not _aborted(log, producer_id, offset):
            return RecordState(_committed(decoded, log, offset), open_batch)
        if is_open and open_batch is None and not undecided:
            open_batch = _batch_of(decoded, log, offset)
        if not undecided:
            floor = decoded.get("before")
            undecided = True
    else:
        if not undecided:
            # No row of the key at or above the log start: the older format's `txn` ids, if they name a row still there.
            return RecordState(_from_app_ids(log, transactional_id), None)
    if floor is None:
        return RecordState(None, open_batch)
    return RecordState(CommittedBatch(_as_int(floor, log, -1), {}, {}, {}), open_batch)


def sweep_sink_records(
    root: str | Location, now_ms: int, *, policy: RetryPolicy = DEFAULT_POLICY, timeout_s: float = TOMBSTONE_TIMEOUT_S
) -> list[SpentRecords]:
    """One sweep pass over `__sink_batches`: tombstone spent records, then compact by key (S9.3, S9.4).

    A committed record is spent once every partition it protects has its log
    start past what it protects. Per partition, the tombstones are one
    conditional append at the log end offset they were decided on (KIP-27): a
    writer that recorded a newer batch meanwhile wins, and the pass decides again.
    Compaction then keeps each id's newest record and drops tombstones
    `delete.retention.ms` after `now_ms`. Safe beside writers and other sweeps
    (S8.2); an error on one partition is reported and logged. Returns the
    partitions where something was done.
    """
    report: list[SpentRecords] = []
    starts: dict[TopicPartitionKey, int | None] = {}
    for partition in existing_internal_partitions(root, SINK_BATCHES_LOG):
        try:
            log = open_internal_partition(root, SINK_BATCHES_LOG, partition, SINK_BATCHES_PARTITIONS)
            spent = _tombstone_partition(root, log, starts, policy.start(timeout_s))
            compaction = compact_partition(log, now_ms, timeout_s=timeout_s)
        except KafkaException as error:
            logger.warning("sink records: %s-%d skipped: %s", SINK_BATCHES_LOG, partition, error)
            report.append(SpentRecords(partition, error=str(error)))
            continue
        if spent or compaction is not None:
            report.append(SpentRecords(partition, tuple(spent), compaction))
    return report


# -- internals ------------------------------------------------------------------------


def _tombstone_partition(
    root: str | Location, log: PartitionLog, starts: dict[TopicPartitionKey, int | None], backoff: Backoff
) -> list[str]:
    while True:
        log.refresh()
        leo = log.log_end_offset()
        open_transactions = log.open_transactions()
        newest: dict[bytes, tuple[int, int, bytes | None]] = {}
        for offset, key, producer_id, value in _keyed_rows(log):
            newest[key] = (offset, producer_id, value)
        spent = []
        for key, (offset, producer_id, value) in sorted(newest.items()):
            if value is None:
                continue
            open_first = open_transactions.get(producer_id)
            if producer_id >= 0 and open_first is not None and open_first <= offset:
                continue
            if _aborted(log, producer_id, offset):
                continue  # compaction drops it; the committed record under it is decided on then
            decoded = _decode(value)
            if decoded is None or "before" not in decoded:
                continue  # the older format: it does not say which earlier batches' rows it protects
            if _all_below_log_start(root, _committed(decoded, log, offset).protects, starts):
                spent.append(key)
        if not spent:
            return []
        header = BatchHeader(expected_offset=leo)
        try:
            log.append(payload_table([None] * len(spent), keys=spent), header, backoff=backoff)
        except OffsetMismatch:
            if backoff.expired():
                raise KafkaTimeout(
                    f"{SINK_BATCHES_LOG}-{log.partition}: tombstones lost their offset past the deadline"
                ) from None
            continue
        names = [key.decode("utf-8", "replace") for key in spent]
        logger.info(
            "%s-%d: tombstoned the records of %s: every row they protect is below its log start",
            SINK_BATCHES_LOG,
            log.partition,
            ", ".join(names),
        )
        return names


def _all_below_log_start(
    root: str | Location, protects: Mapping[TopicPartitionKey, int], starts: dict[TopicPartitionKey, int | None]
) -> bool:
    """Whether every protected offset is below its partition's log start (a record that protects nothing is kept)."""
    if not protects:
        return False
    for tp, last in protects.items():
        start = _log_start(root, tp, starts)
        if start is not None and last >= start:
            return False
    return True


def _log_start(root: str | Location, tp: TopicPartitionKey, starts: dict[TopicPartitionKey, int | None]) -> int | None:
    """A partition's log start offset (None: the topic or partition is gone, and its rows with it)."""
    if tp not in starts:
        try:
            starts[tp] = open_partition(root, *tp).log_start_offset()
        except UnknownTopicOrPartition:
            starts[tp] = None
    return starts[tp]


def _keyed_rows(log: PartitionLog) -> Iterator[tuple[int, bytes, int, bytes | None]]:
    """(offset, key, producer id, value) of every keyed data row at or above the log start, in offset order."""
    start = log.log_start_offset()
    for entry in partition_files(log.table):
        if entry.max_offset < start or entry.null_keys == entry.num_records:
            continue
        rows = _data_rows(log, entry, pc.field("key").is_valid(), start)
        yield from zip(*(rows.column(name).to_pylist() for name in ("offset", "key", "producer_id", "value")), strict=True)


def _newest_first(log: PartitionLog, key: bytes) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, producer id, value) of the rows keyed `key` at or above the log start, newest first.

    Files holding markers only (their statistics count every key null) are not read.
    """
    start = log.log_start_offset()
    for entry in reversed(partition_files(log.table)):
        if entry.max_offset < start:
            break
        if entry.null_keys == entry.num_records:
            continue
        rows = _data_rows(log, entry, pc.field("key") == pa.scalar(key, pa.binary()), start)
        found = list(zip(*(rows.column(name).to_pylist() for name in ("offset", "producer_id", "value")), strict=True))
        yield from reversed(found)


def _data_rows(log: PartitionLog, entry: PartitionFile, predicate: pc.Expression, start: int) -> pa.Table:
    rows = log.table.read_file(entry, _COLUMNS, predicate)
    rows = rows.filter(pc.and_(rows.column("control").is_null(), pc.greater_equal(rows.column("offset"), start)))
    return rows.sort_by("offset")


def _aborted(log: PartitionLog, producer_id: int, offset: int) -> bool:
    if producer_id < 0:
        return False
    return any(
        txn.producer_id == producer_id and txn.first_offset <= offset < txn.marker_offset
        for txn in log.aborted_transactions(offset, offset + 1)
    )


def _decode(value: bytes) -> dict[str, Any] | None:
    try:
        decoded = json.loads(value)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def _where(log: PartitionLog, offset: int) -> str:
    return f"{SINK_BATCHES_LOG}-{log.partition} offset {offset}"


def _as_int(value: Any, log: PartitionLog, offset: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptRecord(f"{_where(log, offset)}: a batch record holds {value!r} where a batch id belongs")
    return value


def _batch_of(decoded: Mapping[str, Any], log: PartitionLog, offset: int) -> int:
    return _as_int(decoded.get("batch"), log, offset)


def _committed(decoded: Mapping[str, Any], log: PartitionLog, offset: int) -> CommittedBatch:
    try:
        return CommittedBatch(
            _batch_of(decoded, log, offset),
            {_tp_key(text): int(count) for text, count in decoded.get("records", {}).items()},
            {_tp_key(text): (int(span[0]), int(span[1])) for text, span in decoded.get("offsets", {}).items()},
            dict(decoded.get("note") or {}),
            {_tp_key(text): int(last) for text, last in (decoded.get("protects") or {}).items()},
        )
    except (TypeError, ValueError, IndexError, AttributeError) as error:
        raise CorruptRecord(f"{_where(log, offset)}: the batch record does not decode: {error}") from error


def _from_app_ids(log: PartitionLog, transactional_id: str) -> CommittedBatch | None:
    """The older format: the last record named by the `txn` ids, if its row is still at or above the log start."""
    prefix = f"{OLD_APP_PREFIX}{transactional_id}."
    recorded = log.table.app_version(prefix + "batch")
    if recorded is None:
        return None
    offset = log.table.app_version(prefix + "offset")
    # Stored plus one: 0 says no batch had committed before.
    before = (log.table.app_version(prefix + "before") or 0) - 1
    row = None
    if offset is not None and log.log_start_offset() <= offset < log.log_end_offset():
        for found_offset, producer_id, value in _newest_first(log, transactional_id.encode()):
            if found_offset == offset:
                row = (producer_id, value)
                break
            if found_offset < offset:
                break
    if row is None or offset is None:  # (a row is found only at an offset)
        return None  # the record's row is gone (compacted under a tombstone, or below the log start): so are its rows
    producer_id, value = row
    open_first = log.open_transactions().get(producer_id)
    if producer_id >= 0 and open_first is not None and open_first <= offset:
        raise ConcurrentTransactions(f"the transaction that wrote batch {recorded} of {transactional_id!r} is still open; retry")
    if not _aborted(log, producer_id, offset):
        decoded = _decode(value or b"")
        return _committed(decoded, log, offset) if decoded is not None else CommittedBatch(recorded, {}, {}, {})
    return CommittedBatch(before, {}, {}, {}) if before >= 0 else None


def _tp_text(tp: TopicPartitionKey) -> str:
    return f"{tp[0]}:{tp[1]}"


def _tp_key(text: str) -> TopicPartitionKey:
    topic, _, partition = text.rpartition(":")
    return topic, int(partition)


__all__ = [
    "CommittedBatch",
    "RecordState",
    "SINK_BATCHES_LOG",
    "SINK_BATCHES_PARTITIONS",
    "SpentRecords",
    "open_batches_log",
    "protected_after",
    "read_records",
    "record_value",
    "sweep_sink_records",
]
