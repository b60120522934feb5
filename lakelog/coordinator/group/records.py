"""The records of `__consumer_offsets` and their codecs, one per record kind (S6, S7; KIP-848).

A record is one row: key = the group id, value = the record's fields as JSON,
with its `kind` and the version `"v"` of the codec that wrote it
(lakelog.coordinator.runtime.record_codec). Decoding reads every version up to the
codec's own (a row without a version is one written before versions existed),
ignores fields it does not know, and gives a field that an older writer did not
write its default; any other row is `CorruptRecord`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.runtime.record_codec import (
    RecordCodec,
    flag,
    integer,
    mapping,
    optional_text,
    sequence,
    text,
)
from lakelog.errors import CorruptRecord
from lakelog.typedef import TopicPartitionKey

# A member's lease is renewed once at most 1/LEASE_RENEW_DIVISOR of its session is left: a settled member
# writes about once per session.timeout.ms, not once per heartbeat (Kafka keeps liveness in timers).
LEASE_RENEW_DIVISOR = 3
# The version of every group record kind this code writes.
GROUP_RECORD_VERSION = 1


class RecordKind(enum.Enum):
    GROUP = "group"
    MEMBER = "member"
    TARGET = "target"
    CURRENT = "current"
    OFFSET = "offset"


class _Record:
    """What every record of this log has: `to_row` for the log (`from_row` reads it back)."""

    kind: RecordKind

    def to_row(self) -> dict[str, Any]:
        return CODECS[self.kind].encode(self)


@dataclass(frozen=True)
class GroupRecord(_Record):
    """The group epoch and assignor (Kafka's ConsumerGroupMetadataValue); `deleted` removes the group."""

    group_id: str
    group_epoch: int
    assignor: str = "uniform"
    deleted: bool = False
    kind: RecordKind = RecordKind.GROUP


@dataclass(frozen=True)
class MemberRecord(_Record):
    """A member's subscription and timeouts (ConsumerGroupMemberMetadataValue); `removed` is the tombstone.

    `last_heartbeat_ms` is the last renewal of the member's liveness lease, not its last heartbeat:
    the lease runs until `lease_expires_ms` and is renewed only when due (S6.5).
    """

    group_id: str
    member_id: str
    instance_id: str | None
    subscribed_topics: tuple[str, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heartbeat_ms: int
    removed: bool = False
    kind: RecordKind = RecordKind.MEMBER

    @property
    def lease_expires_ms(self) -> int:
        """The last moment the member is alive without a renewal: last renewal + session.timeout.ms."""
        return self.last_heartbeat_ms + self.session_timeout_ms

    def lease_expired(self, now_ms: int) -> bool:
        """S6.5: past its lease the member is removed (by the sweep)."""
        return now_ms > self.lease_expires_ms

    def lease_due(self, now_ms: int) -> bool:
        """The lease needs renewing: at most a third of the session is left (or it ran out)."""
        return self.lease_expires_ms - now_ms <= self.session_timeout_ms // LEASE_RENEW_DIVISOR


@dataclass(frozen=True)
class TargetRecord(_Record):
    """The target assignment of every member at `assignment_epoch`."""

    group_id: str
    assignment_epoch: int
    assignment: Mapping[str, frozenset[TopicPartitionKey]]
    kind: RecordKind = RecordKind.TARGET


@dataclass(frozen=True)
class CurrentRecord(_Record):
    """A member's current assignment and epochs (ConsumerGroupCurrentMemberAssignmentValue + KAFKA-19779)."""

    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    revocation_epoch: int
    assigned: frozenset[TopicPartitionKey]
    pending_revocation: frozenset[TopicPartitionKey]
    # Partition -> the member epoch it was last revoked from this member at.
    partition_revocation_epochs: Mapping[TopicPartitionKey, int]
    # When the member was asked to revoke (for the rebalance timeout); -1 if nothing is pending.
    revocation_started_ms: int = -1
    kind: RecordKind = RecordKind.CURRENT


@dataclass(frozen=True)
class OffsetRecord(_Record):
    """A committed offset (S6.1); with `producer_id` >= 0 a transactional one, pending until its marker (S7.1)."""

    group_id: str
    topic: str
    partition: int
    offset: int
    # The committer's metadata as given: None when it gave none (Kafka keeps None and '' apart).
    metadata: str | None
    commit_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    removed: bool = False
    kind: RecordKind = RecordKind.OFFSET


GroupLogRecord = GroupRecord | MemberRecord | TargetRecord | CurrentRecord | OffsetRecord


# -- codecs -------------------------------------------------------------------------------------


def _fields(record: GroupLogRecord) -> dict[str, Any]:
    """A record's fields as JSON-able values (partitions as "topic:partition")."""
    row: dict[str, Any] = {}
    for item in dataclasses.fields(record):
        value = getattr(record, item.name)
        if isinstance(value, enum.Enum):
            value = value.value
        elif item.name in ("assigned", "pending_revocation"):
            value = sorted(_tp_text(tp) for tp in value)
        elif item.name == "assignment":
            value = {member: sorted(_tp_text(tp) for tp in tps) for member, tps in sorted(value.items())}
        elif item.name == "partition_revocation_epochs":
            value = {_tp_text(tp): epoch for tp, epoch in sorted(value.items())}
        elif isinstance(value, tuple):
            value = list(value)
        row[item.name] = value
    return row


def _group(row: Mapping[str, Any]) -> GroupRecord:
    return GroupRecord(text(row, "group_id"), integer(row, "group_epoch"), text(row, "assignor", "uniform"), flag(row, "deleted"))


def _member(row: Mapping[str, Any]) -> MemberRecord:
    return MemberRecord(
        text(row, "group_id"),
        text(row, "member_id"),
        optional_text(row, "instance_id"),
        tuple(_texts(sequence(row, "subscribed_topics"), "subscribed_topics")),
        integer(row, "session_timeout_ms"),
        integer(row, "rebalance_timeout_ms"),
        integer(row, "last_heartbeat_ms"),
        flag(row, "removed"),
    )


def _target(row: Mapping[str, Any]) -> TargetRecord:
    assignment = {str(member): _tp_set(tps, "assignment") for member, tps in mapping(row, "assignment").items()}
    return TargetRecord(text(row, "group_id"), integer(row, "assignment_epoch"), assignment)


def _current(row: Mapping[str, Any]) -> CurrentRecord:
    revoked_at = mapping(row, "partition_revocation_epochs")
    return CurrentRecord(
        text(row, "group_id"),
        text(row, "member_id"),
        integer(row, "member_epoch"),
        integer(row, "previous_member_epoch"),
        integer(row, "revocation_epoch"),
        _tp_set(sequence(row, "assigned"), "assigned"),
        _tp_set(sequence(row, "pending_revocation"), "pending_revocation"),
        {_tp_parse(tp): integer(revoked_at, tp) for tp in revoked_at},
        integer(row, "revocation_started_ms", -1),
    )


def _offset(row: Mapping[str, Any]) -> OffsetRecord:
    return OffsetRecord(
        text(row, "group_id"),
        text(row, "topic"),
        integer(row, "partition"),
        integer(row, "offset"),
        optional_text(row, "metadata"),
        integer(row, "commit_ms"),
        integer(row, "producer_id", -1),
        integer(row, "producer_epoch", -1),
        flag(row, "removed"),
    )


CODECS: dict[RecordKind, RecordCodec[Any]] = {
    kind: RecordCodec(f"__consumer_offsets {kind.value}", GROUP_RECORD_VERSION, _fields, build)
    for kind, build in (
        (RecordKind.GROUP, _group),
        (RecordKind.MEMBER, _member),
        (RecordKind.TARGET, _target),
        (RecordKind.CURRENT, _current),
        (RecordKind.OFFSET, _offset),
    )
}


def from_row(row: Any) -> GroupLogRecord:
    """The record of a `__consumer_offsets` row (any version up to ours); CorruptRecord if it is not one."""
    if not isinstance(row, Mapping):
        raise CorruptRecord(f"a __consumer_offsets record is a JSON object, not {type(row).__name__}", reason="not an object")
    try:
        kind = RecordKind(row.get("kind"))
    except ValueError:
        raise CorruptRecord(f"a __consumer_offsets record of unknown kind {row.get('kind')!r}", reason="unknown kind") from None
    return CODECS[kind].decode(row)


def record_key(record: GroupLogRecord) -> str:
    return record.group_id


def _texts(values: list[Any], name: str) -> list[str]:
    if not all(isinstance(value, str) for value in values):
        raise TypeError(f"field {name!r} holds a value that is not a string")
    return values


def _tp_set(values: Any, name: str) -> frozenset[TopicPartitionKey]:
    if not isinstance(values, list):
        raise TypeError(f"field {name!r} is {values!r}, not a list")
    return frozenset(_tp_parse(value) for value in _texts(values, name))


def _tp_text(tp: TopicPartitionKey) -> str:
    return f"{tp[0]}:{tp[1]}"


def _tp_parse(value: str) -> TopicPartitionKey:
    topic, separator, partition = value.rpartition(":")
    if not separator or not topic or not partition.isdigit():
        raise ValueError(f"partition {value!r} is not 'topic:partition'")
    return topic, int(partition)


__all__ = [
    "CODECS",
    "GROUP_RECORD_VERSION",
    "CurrentRecord",
    "GroupLogRecord",
    "GroupRecord",
    "MemberRecord",
    "OffsetRecord",
    "RecordKind",
    "TargetRecord",
    "TopicPartitionKey",
    "from_row",
    "record_key",
]
