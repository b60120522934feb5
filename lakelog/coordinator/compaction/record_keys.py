"""The compaction keys of the internal logs' records, and which rows a compacted internal log keeps (S9.3).

Kafka compacts `__consumer_offsets` and `__transaction_state` by record key, one
key per record kind (`CoordinatorRecordHelpers`): a group's metadata, a
member, a member's current assignment, a group's target assignment, an offset
per (group, topic, partition), a transactional id. A row's `key` column holds
the coordinator key (the group id) only, so compaction reads the key from the
decoded record with the helpers below, for old rows and new alike.

Replay here is not a plain last-value-per-key map: deleting a group wipes all
its keys, removing a member wipes its current assignment, a current assignment
only lands on a member present at its offset, a transactional offset becomes
the committed one at its COMMIT marker's offset, and any record brings its
group into existence. So `live_group_offsets` folds the rows as replay does
and tracks, for every piece of the state, the rows that produce it (with the
rows they depend on); the rest is dropped. `lakelog.coordinator.runtime.state_log`
checks every plan by replaying both logs before it commits, and keeps
everything when they differ: the property is state(compact(log)) == state(log).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lakelog.coordinator.group.records import CurrentRecord, GroupRecord, MemberRecord, OffsetRecord, TargetRecord
from lakelog.coordinator.runtime.state_log import Marker
from lakelog.coordinator.transaction import TransactionMetadata, TxnState
from lakelog.log.records import ControlType

# -- one key per record kind -------------------------------------------------------------


def group_metadata_key(group_id: str) -> tuple[str, ...]:
    return ("group", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("member", group_id, member_id)


def current_assignment_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("current", group_id, member_id)


def target_assignment_key(group_id: str) -> tuple[str, ...]:
    return ("target", group_id)


def offset_key(group_id: str, topic: str, partition: int) -> tuple[Any, ...]:
    return ("offset", group_id, topic, partition)


def transaction_key(transactional_id: str) -> tuple[str, ...]:
    return ("transaction", transactional_id)


def record_key(record: Any) -> tuple[Any, ...]:
    """The compaction key of any internal-log record."""
    if isinstance(record, GroupRecord):
        return group_metadata_key(record.group_id)
    if isinstance(record, MemberRecord):
        return member_key(record.group_id, record.member_id)
    if isinstance(record, CurrentRecord):
        return current_assignment_key(record.group_id, record.member_id)
    if isinstance(record, TargetRecord):
        return target_assignment_key(record.group_id)
    if isinstance(record, OffsetRecord):
        return offset_key(record.group_id, record.topic, record.partition)
    if isinstance(record, TransactionMetadata):
        return transaction_key(record.transactional_id)
    raise TypeError(f"{type(record).__name__} is not an internal-log record")


# -- which rows a compacted log keeps --------------------------------------------------


def live_transaction_offsets(entries: Iterable[tuple[int, Any]]) -> set[int]:
    """`__transaction_state`: the last record of every transactional id that is not DEAD."""
    live: dict[tuple[str, ...], int] = {}
    for offset, record in entries:
        if isinstance(record, Marker):
            continue
        key = record_key(record)
        if record.state is TxnState.DEAD:
            live.pop(key, None)
        else:
            live[key] = offset
    return set(live.values())


def live_group_offsets(entries: Iterable[tuple[int, Any]]) -> set[int]:
    """`__consumer_offsets`: the rows that make up the replayed state, with the rows they depend on.

    Per group: its metadata, target, every present member's metadata and current
    assignment (with the member row in effect when the assignment was written),
    every committed offset (a transactional one with its COMMIT marker), every
    pending transactional offset; per producer id the marker of its highest
    epoch (the fence, S4.6); and the last row of every group that exists, which
    alone brings an otherwise empty group into being as replay does.
    """
    slots: dict[tuple[Any, ...], tuple[int, ...]] = {}
    present: set[tuple[str, str]] = set()
    marker_epochs: dict[int, int] = {}
    marker_rows: dict[int, int] = {}
    pending: dict[tuple[str, int], dict[tuple[str, int], int]] = {}
    # The marker that decided each transactional offset row (or fenced it), once one did.
    decided_by: dict[int, int] = {}
    last_row: dict[str, int] = {}
    for offset, item in entries:
        if isinstance(item, Marker):
            if item.producer_epoch >= marker_epochs.get(item.producer_id, -1):
                marker_epochs[item.producer_id] = item.producer_epoch
                marker_rows[item.producer_id] = offset
            for group_id, producer_id in [key for key in pending if key[1] == item.producer_id]:
                for tp, row in pending.pop((group_id, producer_id)).items():
                    decided_by[row] = offset
                    if item.control is ControlType.COMMIT:
                        slots[offset_key(group_id, *tp)] = (row, offset)
            continue
        group_id = item.group_id
        last_row[group_id] = offset
        if isinstance(item, GroupRecord):
            if item.deleted:
                for key in [key for key in slots if key[1] == group_id]:
                    del slots[key]
                present = {member for member in present if member[0] != group_id}
                for key in [key for key in pending if key[0] == group_id]:
                    del pending[key]
                del last_row[group_id]
            else:
                slots[group_metadata_key(group_id)] = (offset,)
        elif isinstance(item, MemberRecord):
            member = (group_id, item.member_id)
            if item.removed:
                slots.pop(member_key(*member), None)
                slots.pop(current_assignment_key(*member), None)
                present.discard(member)
            else:
                if member not in present:
                    slots.pop(current_assignment_key(*member), None)
                    present.add(member)
                slots[member_key(*member)] = (offset,)
        elif isinstance(item, TargetRecord):
            slots[target_assignment_key(group_id)] = (offset,)
        elif isinstance(item, CurrentRecord):
            member = (group_id, item.member_id)
            if member in present:
                slots[current_assignment_key(*member)] = (offset, slots[member_key(*member)][0])
        elif isinstance(item, OffsetRecord):
            tp = (item.topic, item.partition)
            if item.producer_id >= 0:
                if item.producer_epoch >= marker_epochs.get(item.producer_id, -1):
                    pending.setdefault((group_id, item.producer_id), {})[tp] = offset
                else:
                    decided_by[offset] = marker_rows[item.producer_id]  # fenced by that marker's epoch (S4.6)
            elif item.removed:
                slots.pop(offset_key(group_id, *tp), None)
            else:
                slots[offset_key(group_id, *tp)] = (offset,)
    live = {row for rows in slots.values() for row in rows}
    live.update(marker_rows.values())
    live.update(row for rows in pending.values() for row in rows.values())
    for row in last_row.values():
        live.add(row)
        if row in decided_by:
            live.add(decided_by[row])
    return live


__all__ = [
    "current_assignment_key",
    "group_metadata_key",
    "live_group_offsets",
    "live_transaction_offsets",
    "member_key",
    "offset_key",
    "record_key",
    "target_assignment_key",
    "transaction_key",
]
