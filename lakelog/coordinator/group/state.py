"""The state of one `__consumer_offsets` partition, rebuilt by replaying its records and markers (S6, S7).

`replay` folds one record into the state, `replay_marker` a transaction marker
written into the same log (S7.1), `replay_corrupt` a row that does not decode
(its group is set aside, the others are served). `snapshot_of` and
`state_from_snapshot` are the state's snapshot codec (lakelog.coordinator.runtime.state_log).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lakelog.coordinator.group.records import (
    CurrentRecord,
    GroupLogRecord,
    GroupRecord,
    MemberRecord,
    OffsetRecord,
    TargetRecord,
    TopicPartitionKey,
    from_row,
)
from lakelog.errors import CorruptRecord
from lakelog.log.records import ControlType

logger = logging.getLogger(__name__)


@dataclass
class Member:
    """A member as the coordinator knows it: metadata plus current assignment."""

    metadata: MemberRecord
    current: CurrentRecord


@dataclass
class Group:
    """One group's state, rebuilt by replay."""

    group_id: str
    group_epoch: int = 0
    assignor: str = "uniform"
    target: TargetRecord | None = None
    members: dict[str, Member] = field(default_factory=dict)
    offsets: dict[TopicPartitionKey, OffsetRecord] = field(default_factory=dict)
    # Producer id -> its pending transactional offsets (S7.1).
    pending: dict[int, dict[TopicPartitionKey, OffsetRecord]] = field(default_factory=dict)

    @property
    def target_epoch(self) -> int:
        return self.target.assignment_epoch if self.target else 0

    def owner_of(self, tp: TopicPartitionKey) -> str | None:
        """The member holding `tp` now, as owner or while revoking it."""
        for member_id, member in self.members.items():
            if tp in member.current.assigned or tp in member.current.pending_revocation:
                return member_id
        return None

    def member_by_instance(self, instance_id: str) -> Member | None:
        for member in self.members.values():
            if member.metadata.instance_id == instance_id:
                return member
        return None

    def is_empty(self) -> bool:
        return not self.members


@dataclass(frozen=True)
class CorruptGroupRow:
    """The first row of a group that did not decode: the group's state is unknown from there on."""

    table: str
    offset: int
    reason: str

    def error(self, group_id: str) -> CorruptRecord:
        """What a request to the group, or a description of it, gets instead."""
        return CorruptRecord(
            f"group {group_id!r} is not served: its record at {self.table} offset {self.offset} does not decode ({self.reason})",
            group_id=group_id,
            table=self.table,
            offset=self.offset,
        )


@dataclass
class GroupState:
    """Every group of one `__consumer_offsets` partition, plus the transaction markers seen there.

    A group with a row that does not decode is in `corrupt` instead of `groups`: it is refused,
    the other groups of the partition are served.
    """

    groups: dict[str, Group] = field(default_factory=dict)
    # Producer id -> the epoch of the last marker written for it to this partition (fences late offsets).
    marker_epochs: dict[int, int] = field(default_factory=dict)
    corrupt: dict[str, CorruptGroupRow] = field(default_factory=dict)

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)


def replay_corrupt(state: GroupState, group_id: str | None, error: CorruptRecord) -> GroupState:
    """A row of `group_id` that does not decode: that group is set aside; raises `error` if no group is named."""
    if not group_id:
        raise error
    if group_id not in state.corrupt:
        logger.warning("group %s is not served from now on: %s", group_id, error)
        # The located CorruptRecord (record_codec) carries these as its details.
        details = error.details
        state.corrupt[group_id] = CorruptGroupRow(details["table"], details["offset"], str(details["reason"]))
    state.groups.pop(group_id, None)
    return state


def replay(state: GroupState, record: GroupLogRecord) -> GroupState:
    """Fold one record into the state (in place) and return it.

    A group set aside by a corrupt row folds no later row (its state is unknown), except its deletion,
    which wipes every row of the group before it: the group starts again empty.
    """
    if record.group_id in state.corrupt:
        if isinstance(record, GroupRecord) and record.deleted:
            del state.corrupt[record.group_id]
        return state
    group = state.groups.get(record.group_id)
    if group is None:
        group = state.groups[record.group_id] = Group(record.group_id)
    if isinstance(record, GroupRecord):
        if record.deleted:
            del state.groups[record.group_id]
        else:
            group.group_epoch, group.assignor = record.group_epoch, record.assignor
    elif isinstance(record, MemberRecord):
        if record.removed:
            group.members.pop(record.member_id, None)
        elif record.member_id in group.members:
            group.members[record.member_id].metadata = record
        else:
            group.members[record.member_id] = Member(record, _fresh_current(record.group_id, record.member_id))
    elif isinstance(record, TargetRecord):
        group.target = record
    elif isinstance(record, CurrentRecord):
        if record.member_id in group.members:
            group.members[record.member_id].current = record
    elif isinstance(record, OffsetRecord):
        tp = (record.topic, record.partition)
        if record.producer_id >= 0:
            # Markers carry the epoch the next transaction uses (S4.6): older epochs are finished ones.
            if record.producer_epoch >= state.marker_epochs.get(record.producer_id, -1):
                group.pending.setdefault(record.producer_id, {})[tp] = record
        elif record.removed:
            group.offsets.pop(tp, None)
        else:
            group.offsets[tp] = record
    return state


def replay_marker(state: GroupState, producer_id: int, producer_epoch: int, control: ControlType) -> GroupState:
    """A transaction marker in this log: the producer's pending offsets become committed or vanish (S7.1)."""
    state.marker_epochs[producer_id] = max(producer_epoch, state.marker_epochs.get(producer_id, -1))
    for group in state.groups.values():
        pending = group.pending.pop(producer_id, None)
        if pending and control is ControlType.COMMIT:
            for tp, record in pending.items():
                group.offsets[tp] = dataclasses.replace(record, producer_id=-1, producer_epoch=-1)
    return state


def snapshot_of(state: GroupState) -> dict[str, Any]:
    """The state as JSON-able rows: per group its epoch, target, members, offsets and pending offsets."""
    groups = []
    for group_id in sorted(state.groups):
        group = state.groups[group_id]
        groups.append(
            {
                "group_id": group.group_id,
                "group_epoch": group.group_epoch,
                "assignor": group.assignor,
                "target": group.target.to_row() if group.target is not None else None,
                "members": [[m.metadata.to_row(), m.current.to_row()] for _, m in sorted(group.members.items())],
                "offsets": [record.to_row() for _, record in sorted(group.offsets.items())],
                "pending": [
                    record.to_row() for _, pending in sorted(group.pending.items()) for _, record in sorted(pending.items())
                ],
            }
        )
    corrupt = [[group_id, row.table, row.offset, row.reason] for group_id, row in sorted(state.corrupt.items())]
    return {"groups": groups, "marker_epochs": sorted(state.marker_epochs.items()), "corrupt": corrupt}


def state_from_snapshot(body: Mapping[str, Any]) -> GroupState:
    """The state `snapshot_of` dumped; ValueError if a row is not the record its place says."""
    state = GroupState(marker_epochs={int(producer_id): int(epoch) for producer_id, epoch in body["marker_epochs"]})
    for item in body["groups"]:
        group = Group(item["group_id"], int(item["group_epoch"]), str(item["assignor"]))
        group.target = _record_of(item["target"], TargetRecord) if item["target"] is not None else None
        for metadata_row, current_row in item["members"]:
            metadata = _record_of(metadata_row, MemberRecord)
            group.members[metadata.member_id] = Member(metadata, _record_of(current_row, CurrentRecord))
        for row in item["offsets"]:
            record = _record_of(row, OffsetRecord)
            group.offsets[(record.topic, record.partition)] = record
        for row in item["pending"]:
            record = _record_of(row, OffsetRecord)
            group.pending.setdefault(record.producer_id, {})[(record.topic, record.partition)] = record
        state.groups[group.group_id] = group
    for group_id, table, offset, reason in body.get("corrupt", []):
        state.corrupt[str(group_id)] = CorruptGroupRow(str(table), int(offset), str(reason))
    return state


RecordT = TypeVar("RecordT", GroupRecord, MemberRecord, TargetRecord, CurrentRecord, OffsetRecord)


def _record_of(row: Mapping[str, Any], kind: type[RecordT]) -> RecordT:
    record = from_row(row)
    if not isinstance(record, kind):
        raise ValueError(f"a group snapshot holds a {type(record).__name__} where a {kind.__name__} belongs")
    return record


def _fresh_current(group_id: str, member_id: str) -> CurrentRecord:
    return CurrentRecord(group_id, member_id, 0, -1, 0, frozenset(), frozenset(), {})


__all__ = [
    "CorruptGroupRow",
    "Group",
    "GroupState",
    "Member",
    "replay",
    "replay_corrupt",
    "replay_marker",
    "snapshot_of",
    "state_from_snapshot",
]
