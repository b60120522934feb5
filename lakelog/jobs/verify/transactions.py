"""Transactions and committed offsets of a root, against what the partitions hold.

Every transaction open in a partition (data of a transactional producer with no marker yet) must be covered by
its coordinator's transaction (S4.4), within its `transaction.timeout.ms` (S4.7); a decided one must get its
markers (S4.5). Every group's committed offset must lie within [log start, HW] of its partition (S6.1, S9.1).
The coordinators' state is read through their own replay (lakelog.coordinator), which only reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.coordinator.transaction import TransactionMetadata, TxnState
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import KafkaException
from lakelog.jobs.verify import findings as kinds
from lakelog.jobs.verify.findings import Finding
from lakelog.store import Location
from lakelog.typedef import TopicPartitionKey

# Coordinator states whose transaction holds its partitions until its markers are written.
_COVERING = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass
class PartitionState:
    """What verify found of one partition: its table's name in the report, offsets and open transactions."""

    table: str
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int | None
    # Producer id -> (first offset, epoch) of its open transaction.
    open_transactions: dict[int, tuple[int, int]] = field(default_factory=dict)


def check_transactions(
    root: Location, partitions: Mapping[TopicPartitionKey, PartitionState], now_ms: int
) -> tuple[list[Finding], list[Finding]]:
    """Findings about transactions open in the partitions, and notes; `now_ms` judges the timeouts."""
    findings: list[Finding] = []
    try:
        coordinated = TransactionCoordinator(root).list_transactions()
    except KafkaException as error:
        return [Finding("__transaction_state", "-", kinds.UNREADABLE_COORDINATOR, f"its state does not replay: {error}")], []
    covering: dict[int, TransactionMetadata] = {m.producer_id: m for m in coordinated if m.state in _COVERING}
    for key, state in sorted(partitions.items()):
        if state.last_stable_offset is not None and state.last_stable_offset > state.high_watermark:
            findings.append(
                Finding(
                    state.table,
                    f"offset {state.last_stable_offset}",
                    kinds.LSO_ABOVE_HW,
                    f"LSO {state.last_stable_offset} is above the HW {state.high_watermark}",
                )
            )
        for producer_id, (first_offset, epoch) in sorted(state.open_transactions.items()):
            finding = _judge(state.table, key, producer_id, first_offset, epoch, covering.get(producer_id), now_ms)
            if finding is not None:
                findings.append(finding)
    return findings, []


def _judge(
    table: str,
    key: TopicPartitionKey,
    producer_id: int,
    first_offset: int,
    epoch: int,
    cover: TransactionMetadata | None,
    now_ms: int,
) -> Finding | None:
    where = f"offset {first_offset}"
    held = f"producer id {producer_id} (epoch {epoch}) has a transaction open from offset {first_offset}"
    if cover is None or key not in cover.partitions:
        why = (
            "no transactional id maps to this producer id with an open transaction"
            if cover is None
            else f"transactional id {cover.transactional_id!r} has not added this partition"
        )
        return Finding(
            table,
            where,
            kinds.HANGING_TRANSACTION,
            f"{held}: {why}; it holds the LSO for good (`lakelog transactions abort` closes it)",
        )
    if cover.state is TxnState.ONGOING and now_ms > cover.txn_start_ms + cover.transaction_timeout_ms:
        return Finding(
            table,
            where,
            kinds.TRANSACTION_TIMED_OUT,
            f"{held}: transactional id {cover.transactional_id!r} is open {now_ms - cover.txn_start_ms} ms, past "
            f"transaction.timeout.ms={cover.transaction_timeout_ms} (the sweep aborts it)",
        )
    if cover.state.is_prepared and now_ms > cover.txn_last_update_ms + cover.transaction_timeout_ms:
        return Finding(
            table,
            where,
            kinds.UNRESOLVED_TRANSACTION,
            f"{held}: transactional id {cover.transactional_id!r} decided {cover.state.value} "
            f"{now_ms - cover.txn_last_update_ms} ms ago and its marker is not here (the sweep writes it)",
        )
    return None


def check_group_offsets(
    root: Location, partitions: Mapping[TopicPartitionKey, PartitionState]
) -> tuple[list[Finding], list[Finding]]:
    """Findings (a committed offset above the HW, a group that does not replay) and notes (below the log start)."""
    findings: list[Finding] = []
    notes: list[Finding] = []
    try:
        coordinator = GroupCoordinator(root)
        groups = coordinator.list_groups()
        corrupt = coordinator.corrupt_groups()
    except KafkaException as error:
        return [Finding("__consumer_offsets", "-", kinds.UNREADABLE_COORDINATOR, f"its state does not replay: {error}")], []
    for group_id, corrupt_record in corrupt.items():
        findings.append(Finding("__consumer_offsets", f"group {group_id}", kinds.CORRUPT_GROUP, str(corrupt_record)))
    for group in groups:
        for key, record in sorted(group.offsets.items()):
            state = partitions.get(key)
            if state is None:
                continue  # a topic not verified, or deleted: its offsets stay until the group is deleted (as Kafka's)
            where = f"group {group.group_id}"
            if record.offset > state.high_watermark:
                findings.append(
                    Finding(
                        state.table,
                        where,
                        kinds.COMMITTED_OFFSET_OUT_OF_RANGE,
                        f"committed offset {record.offset} is above the HW {state.high_watermark}: records it "
                        "consumed are gone, or the next ones will reuse their offsets",
                    )
                )
            elif record.offset < state.log_start_offset:
                notes.append(
                    Finding(
                        state.table,
                        where,
                        kinds.COMMITTED_OFFSET_OUT_OF_RANGE,
                        f"committed offset {record.offset} is below the log start {state.log_start_offset} "
                        "(retention passed it: the consumer resets by auto.offset.reset)",
                    )
                )
    return findings, notes


__all__ = ["PartitionState", "check_group_offsets", "check_transactions"]
