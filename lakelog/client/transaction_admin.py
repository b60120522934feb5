"""Admin operations on transactions, as Kafka's `kafka-transactions.sh` (S8.1, KIP-664).

`list_transactions`, `describe_transactions` read the coordinator's state;
`describe_producers` reads a partition's producer state; `find_hanging_transactions`
compares the two: a transaction open in a partition (data with no marker yet)
that no ongoing or decided coordinator transaction covers would hold the LSO
forever, and `abort_hanging_transaction` closes it with an ABORT marker.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from lakelog.coordinator import TransactionMetadata, TxnState
from lakelog.coordinator.transaction_coordinator import TransactionCoordinator
from lakelog.errors import InvalidTxnState, UnknownProducerId
from lakelog.log import ControlType, PartitionLog, list_topics, open_partition, topic_config
from lakelog.log.partition import APPEND_TIMEOUT_S, wall_clock_ms
from lakelog.log.records import MAX_EPOCH
from lakelog.store.retry import DEFAULT_POLICY, RetryPolicy


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


def list_transactions(root: str) -> list[TransactionListing]:
    return [
        TransactionListing(m.transactional_id, m.producer_id, m.state.value)
        for m in TransactionCoordinator(root).list_transactions()
    ]


def describe_transaction(root: str, transactional_id: str) -> TransactionDescription | None:
    """The id's metadata, or None if the id is unknown (never initialised, or expired)."""
    metadata = TransactionCoordinator(root).describe(transactional_id)
    return None if metadata is None else _description(metadata)


def describe_producers(root: str, topic: str, partition: int) -> list[ProducerState]:
    """Every producer id with state in the partition (S3.5), with the start of its open transaction (-1 if none)."""
    log = open_partition(root, topic, partition)
    log.refresh()
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


def find_hanging_transactions(root: str, topic: str | None = None, now_ms: int | None = None) -> list[HangingTransaction]:
    """Transactions that hold a partition's LSO and that no live producer will close (S8.1).

    Two kinds: open in a partition with no ongoing or decided coordinator
    transaction covering it (`needs_admin_abort`), and covered by an ongoing
    coordinator transaction past its transaction.timeout.ms (its producer died
    or stalls; the coordinator sweep aborts it).

    The coordinator is read between two reads of the partitions, and only
    transactions open in both with the same start offset are reported: a live
    transaction is covered from before its first write until after its last
    marker, so it cannot look hanging in that window.
    """
    logs = [
        open_partition(root, name, partition)
        for name in ([topic] if topic is not None else list_topics(root))
        for partition in range(topic_config(root, name).num_partitions)
    ]
    now = wall_clock_ms() if now_ms is None else now_ms
    before = [set(log.open_transactions().items()) for log in logs]
    covering: dict[int, TransactionMetadata] = {}
    for metadata in TransactionCoordinator(root).list_transactions():
        if metadata.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            covering[metadata.producer_id] = metadata
    hanging = []
    for log, opened_before in zip(logs, before):
        log.refresh()
        for producer_id, start_offset in sorted(opened_before & set(log.open_transactions().items())):
            metadata = covering.get(producer_id)
            covered = metadata is not None and (log.topic, log.partition) in metadata.partitions
            if covered:
                assert metadata is not None
                deadline = metadata.txn_start_ms + metadata.transaction_timeout_ms
                if metadata.state is not TxnState.ONGOING or now < deadline:
                    continue
                reason = (
                    f"transactional id {metadata.transactional_id!r} is open {now - metadata.txn_start_ms} ms, past its "
                    f"transaction.timeout.ms={metadata.transaction_timeout_ms}: the coordinator sweep aborts it"
                )
            elif metadata is None:
                reason = "no transactional id maps to this producer id with an open transaction"
            else:
                reason = f"transactional id {metadata.transactional_id!r} has not added this partition"
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


def abort_hanging_transaction(
    root: str, topic: str, partition: int, producer_id: int, *, retry: RetryPolicy = DEFAULT_POLICY
) -> int:
    """Close a hanging transaction with an ABORT marker one epoch above the partition's (KIP-664).

    Refused (InvalidTxnState) if the coordinator still covers the transaction:
    its own end or the sweep will close it. Returns the marker's offset.
    """
    for found in find_hanging_transactions(root, topic):
        if (found.partition, found.producer_id) == (partition, producer_id) and found.needs_admin_abort:
            break
    else:
        raise InvalidTxnState(
            f"{topic}-{partition} has no hanging transaction of producer id {producer_id}: "
            "it is closed, or its coordinator transaction will close it (run the sweep)",
            producer_id=producer_id,
        )
    log = open_partition(root, topic, partition)
    entry = log.producer_entry(producer_id)
    if entry is None or entry.producer_epoch >= MAX_EPOCH:
        raise UnknownProducerId(f"{topic}-{partition} has no usable epoch for producer id {producer_id}", producer_id=producer_id)
    return log.append_marker(
        producer_id, entry.producer_epoch + 1, ControlType.ABORT, backoff=retry.start(APPEND_TIMEOUT_S)
    ).base_offset


def _producer_ids(log: PartitionLog) -> list[int]:
    found: set[int] = set()
    for entry in log.table.files():
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
    "abort_hanging_transaction",
    "describe_producers",
    "describe_transaction",
    "find_hanging_transactions",
    "list_transactions",
]
