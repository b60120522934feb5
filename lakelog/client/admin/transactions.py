"""Admin operations on transactions, as Kafka's `kafka-transactions.sh` (S8.1, KIP-664).

`list_transactions`, `describe_transactions` read the coordinator's state;
`describe_producers` reads a partition's producer state; `find_hanging_transactions`
compares the two: a transaction open in a partition (data with no marker yet)
that no ongoing or decided coordinator transaction covers would hold the LSO
forever, and `abort_transaction` closes it with an ABORT marker.

The abort is a compare-and-set, as KIP-664's WriteTxnMarkers carries the producer
id and epoch the admin saw: the marker is decided on a snapshot of the partition
that shows the very transaction observed (producer id, epoch, first offset) still
open, and committed as that snapshot's next version. If its producer closed it,
or joined it at a new epoch, in between, the abort is refused and writes nothing
(S4.8, S8.3): else it would abort here a transaction committed elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.compute as pc

from lakelog.coordinator import TransactionMetadata, TxnState
from lakelog.coordinator.transaction.coordinator import FaultHook, TransactionCoordinator
from lakelog.errors import InvalidRequest, InvalidTxnState, KafkaTimeout, OffsetMismatch, UnknownProducerId
from lakelog.log import ControlType, PartitionLog, list_topics, open_partition, plan_handles, topic_config
from lakelog.log.partition import APPEND_TIMEOUT_S, wall_clock_ms
from lakelog.log.partition_file import partition_files
from lakelog.log.records import MAX_EPOCH
from lakelog.store import Location
from lakelog.store.io.retry import DEFAULT_POLICY, RetryPolicy

logger = logging.getLogger(__name__)


# Fault point of `abort_transaction`, met after each decision, before its marker's commit (tests interleave there).
FAULT_BEFORE_ABORT_MARKER = "before_abort_marker"
# Coordinator states whose transaction still holds its partitions: its end, or the sweep, writes their markers.
_COVERING = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass(frozen=True)
class TransactionListing:
    """One row of `transactions list`."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    """`transactions describe`: the coordinator's metadata of one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    last_update_time_ms: int
    topic_partitions: list[tuple[str, int]]


@dataclass(frozen=True)
class ProducerState:
    """`transactions describe-producers`: what a partition knows of one producer id."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    current_transaction_start_offset: int


@dataclass(frozen=True)
class HangingTransaction:
    """A transaction open in a partition that no coordinator transaction will ever close."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_stable_offset: int
    reason: str
    # True if no coordinator transaction covers it, so only `abort_hanging_transaction` closes it;
    # False if its coordinator transaction is past its timeout and the sweep will abort it.
    needs_admin_abort: bool


def list_transactions(root: str | Location) -> list[TransactionListing]:
    return [
        TransactionListing(m.transactional_id, m.producer_id, m.state.value)
        for m in TransactionCoordinator(root).list_transactions()
    ]


def describe_transaction(root: str | Location, transactional_id: str) -> TransactionDescription | None:
    """The id's metadata, or None if the id is unknown (never initialised, or expired)."""
    metadata = TransactionCoordinator(root).describe(transactional_id)
    return None if metadata is None else _description(metadata)


def describe_producers(root: str | Location, topic: str, partition: int) -> list[ProducerState]:
    """Every producer id with state in the partition (S3.5), with the start of its open transaction (-1 if none)."""
    with plan_handles.kept(root, topic, partition) as log:  # at its latest version, refreshed if kept
        open_transactions = log.open_transactions()
        states = []
        for producer_id in _producer_ids(log):
            entry = log.producer_entry(producer_id)
            if entry is None:
                continue
            states.append(
                ProducerState(
                    producer_id=producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_sequence,
                    last_timestamp_ms=entry.last_timestamp_ms,
                    current_transaction_start_offset=open_transactions.get(producer_id, -1),
                )
            )
    return states


def find_hanging_transactions(
    root: str | Location,
    topic: str | None = None,
    now_ms: int | None = None,
    partitions: Iterable[tuple[str, int]] | None = None,
) -> list[HangingTransaction]:
    """Transactions that hold a partition's LSO and that no live producer will close (S8.1).

    Two kinds: open in a partition with no ongoing or decided coordinator
    transaction covering it (`needs_admin_abort`), and covered by an ongoing
    coordinator transaction past its transaction.timeout.ms (its producer died
    or stalls; the coordinator sweep aborts it).

    The coordinator is read between two reads of the partitions, and only
    transactions open in both with the same start offset are reported: a live
    transaction is covered from before its first write until after its last
    marker, so it cannot look hanging in that window.

    `partitions` (topic, partition) limits the search to those (a caller that knows which partitions have an LSO
    below their high watermark: only they can hold a transaction open); default every partition of `topic`, or
    of every topic.
    """
    with contextlib.ExitStack() as kept:
        # The process's kept handles (lakelog.log.plan_handles), refreshed: a console's refresh does not open every
        # partition cold.
        if partitions is None:
            partitions = [
                (name, partition)
                for name in ([topic] if topic is not None else list_topics(root))
                for partition in range(topic_config(root, name).num_partitions)
            ]
        logs = [kept.enter_context(plan_handles.kept(root, name, partition)) for name, partition in partitions]
        return _hanging(logs, root, now_ms)


def _hanging(logs: list[PartitionLog], root: str | Location, now_ms: int | None) -> list[HangingTransaction]:
    now = wall_clock_ms() if now_ms is None else now_ms
    before = [set(log.open_transactions().items()) for log in logs]
    covering: dict[int, TransactionMetadata] = {}
    for metadata in TransactionCoordinator(root).list_transactions():
        if metadata.state in _COVERING:
            covering[metadata.producer_id] = metadata
    hanging = []
    for log, opened_before in zip(logs, before, strict=True):
        log.refresh()
        for producer_id, start_offset in sorted(opened_before & set(log.open_transactions().items())):
            cover = covering.get(producer_id)
            covered = cover is not None and (log.topic, log.partition) in cover.partitions
            if covered:
                assert cover is not None
                deadline = cover.txn_start_ms + cover.transaction_timeout_ms
                if cover.state is not TxnState.ONGOING or now <= deadline:  # the sweep aborts once now > deadline (S4.7)
                    continue
                reason = (
                    f"transactional id {cover.transactional_id!r} is open {now - cover.txn_start_ms} ms, past its "
                    f"transaction.timeout.ms={cover.transaction_timeout_ms}: the coordinator sweep aborts it"
                )
            elif cover is None:
                reason = "no transactional id maps to this producer id with an open transaction"
            else:
                reason = f"transactional id {cover.transactional_id!r} has not added this partition"
            entry = log.producer_entry(producer_id)
            hanging.append(
                HangingTransaction(
                    topic=log.topic,
                    partition=log.partition,
                    producer_id=producer_id,
                    producer_epoch=-1 if entry is None else entry.producer_epoch,
                    start_offset=start_offset,
                    last_stable_offset=log.last_stable_offset(),
                    reason=reason,
                    needs_admin_abort=not covered,
                )
            )
    return hanging


def find_hanging_transaction(
    root: str | Location,
    topic: str,
    partition: int,
    producer_id: int | None = None,
    *,
    producer_epoch: int | None = None,
    start_offset: int | None = None,
) -> HangingTransaction:
    """The one transaction in topic-partition that only an admin abort closes, named by any of its fields.

    At least the producer id or the start offset (as `transactions find-hanging` prints
    them). Refused with InvalidTxnState if none matches: closed, never open, or covered
    by its coordinator transaction (whose end or the sweep closes it).
    """
    if producer_id is None and start_offset is None:
        raise InvalidRequest("name the hanging transaction by its producer id or its start offset")
    wanted = {"producer_id": producer_id, "producer_epoch": producer_epoch, "start_offset": start_offset}
    for found in find_hanging_transactions(root, topic):
        if (
            found.partition == partition
            and found.needs_admin_abort
            and all(value is None or getattr(found, name) == value for name, value in wanted.items())
        ):
            return found
    named = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in wanted.items() if value is not None)
    raise InvalidTxnState(
        f"{topic}-{partition} has no hanging transaction with {named}: "
        "it is closed, or its coordinator transaction will close it (run the sweep)",
        **wanted,
    )


def abort_transaction(
    root: str | Location, hanging: HangingTransaction, *, retry: RetryPolicy = DEFAULT_POLICY, fault: FaultHook | None = None
) -> int:
    """Close the observed hanging transaction with an ABORT marker one epoch above its own (KIP-664, S4.8).

    A compare-and-set: decided on a snapshot of the partition showing that transaction
    (same producer id, epoch and first offset) still open and no coordinator
    transaction covering it, committed as exactly the next version; after a lost race
    the latest snapshot is checked again. Refused with InvalidTxnState, writing nothing
    (S8.3), once it no longer holds; the error carries what was observed and what holds
    now (`current_producer_epoch`, `current_start_offset`: -1 if closed). Returns the
    marker's offset.
    """
    topic, partition, producer_id = hanging.topic, hanging.partition, hanging.producer_id
    observed = (hanging.producer_epoch, hanging.start_offset)
    if not 0 <= hanging.producer_epoch < MAX_EPOCH:
        raise UnknownProducerId(f"{topic}-{partition} has no usable epoch for producer id {producer_id}", producer_id=producer_id)
    partition_log = open_partition(root, topic, partition)
    backoff = retry.start(APPEND_TIMEOUT_S)
    while True:
        version = partition_log.version
        current = _open_transaction(partition_log, producer_id)
        if partition_log.version != version:
            continue  # a lookup reloaded the snapshot (compaction removed a file): check on the one in hand
        if current != observed:
            # Refused only on the latest snapshot: a handle behind the observation may not show it yet.
            if partition_log.refresh() and not backoff.expired():
                continue
            raise _no_longer_open(hanging, current)
        _check_not_covered(root, hanging)
        expected_offset = partition_log.log_end_offset()
        if fault is not None:
            fault(FAULT_BEFORE_ABORT_MARKER, {"topic": topic, "partition": partition, "producer_id": producer_id})
        try:
            marker = partition_log.append_marker(
                producer_id,
                hanging.producer_epoch + 1,
                ControlType.ABORT,
                expected_offset=expected_offset,
                backoff=backoff,
            )
        except OffsetMismatch:
            # The partition moved on past the snapshot checked; the handle holds the latest: check again on it.
            if backoff.expired():
                raise KafkaTimeout(f"{topic}-{partition}: the abort lost every race until its deadline") from None
            logger.debug(
                "%s-%d: abort of producer id %d lost a race; checking the latest snapshot", topic, partition, producer_id
            )
            continue
        logger.info(
            "%s-%d: aborted the hanging transaction of producer id %d (epoch %d, from offset %d): ABORT marker "
            "at offset %d, epoch %d (KIP-664)",
            topic,
            partition,
            producer_id,
            hanging.producer_epoch,
            hanging.start_offset,
            marker.base_offset,
            hanging.producer_epoch + 1,
        )
        return marker.base_offset


def abort_hanging_transaction(
    root: str | Location, topic: str, partition: int, producer_id: int, *, retry: RetryPolicy = DEFAULT_POLICY
) -> int:
    """`find_hanging_transaction` by producer id, then `abort_transaction` of what it found; the marker's offset."""
    return abort_transaction(root, find_hanging_transaction(root, topic, partition, producer_id), retry=retry)


def _open_transaction(partition_log: PartitionLog, producer_id: int) -> tuple[int, int] | None:
    """(epoch, first offset) of the producer's transaction open in the snapshot in hand, or None."""
    start_offset = partition_log.open_transactions().get(producer_id)
    if start_offset is None:
        return None
    entry = partition_log.producer_entry(producer_id)
    # Its last row is a data row of the open transaction, so the entry's epoch is that transaction's latest.
    return (-1 if entry is None else entry.producer_epoch), start_offset


def _no_longer_open(hanging: HangingTransaction, current: tuple[int, int] | None) -> InvalidTxnState:
    now = "it is closed" if current is None else f"it is now open at epoch {current[0]} from offset {current[1]}"
    return InvalidTxnState(
        f"{hanging.topic}-{hanging.partition}: the transaction of producer id {hanging.producer_id} seen open at epoch "
        f"{hanging.producer_epoch} from offset {hanging.start_offset} is no longer the one open ({now}); "
        "nothing was written: find it again",
        topic=hanging.topic,
        partition=hanging.partition,
        producer_id=hanging.producer_id,
        producer_epoch=hanging.producer_epoch,
        start_offset=hanging.start_offset,
        current_producer_epoch=-1 if current is None else current[0],
        current_start_offset=-1 if current is None else current[1],
    )


def _check_not_covered(root: str | Location, hanging: HangingTransaction) -> None:
    """Refuse if a coordinator transaction of the producer id now holds the partition: its own end closes it."""
    for metadata in TransactionCoordinator(root).list_transactions():
        if (
            metadata.producer_id == hanging.producer_id
            and metadata.state in _COVERING
            and (hanging.topic, hanging.partition) in metadata.partitions
        ):
            raise InvalidTxnState(
                f"{hanging.topic}-{hanging.partition}: producer id {hanging.producer_id} is in transactional id "
                f"{metadata.transactional_id!r}'s {metadata.state.value} transaction, which will close it",
                topic=hanging.topic,
                partition=hanging.partition,
                producer_id=hanging.producer_id,
                producer_epoch=hanging.producer_epoch,
                start_offset=hanging.start_offset,
                transactional_id=metadata.transactional_id,
            )


def _producer_ids(log: PartitionLog) -> list[int]:
    found: set[int] = set()
    for entry in partition_files(log.table):
        column = log.table.read_file(entry, ["producer_id"]).column("producer_id")
        found.update(pc.unique(column.filter(pc.greater_equal(column, 0))).to_pylist())
    return sorted(found)


def _description(metadata: TransactionMetadata) -> TransactionDescription:
    return TransactionDescription(
        transactional_id=metadata.transactional_id,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        state=metadata.state.value,
        transaction_timeout_ms=metadata.transaction_timeout_ms,
        transaction_start_time_ms=metadata.txn_start_ms,
        last_update_time_ms=metadata.txn_last_update_ms,
        topic_partitions=sorted(metadata.partitions),
    )


__all__ = [
    "HangingTransaction",
    "ProducerState",
    "TransactionDescription",
    "TransactionListing",
    "FAULT_BEFORE_ABORT_MARKER",
    "abort_hanging_transaction",
    "abort_transaction",
    "describe_producers",
    "describe_transaction",
    "find_hanging_transaction",
    "find_hanging_transactions",
    "list_transactions",
]
