"""The group coordinator's requests, responses and settings, and the refusals its handlers share (S6, S7)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from lakelog.config import validate_name
from lakelog.coordinator.group.records import GroupLogRecord
from lakelog.coordinator.runtime.hashing import partition_for_key
from lakelog.coordinator.runtime.outcome import Outcome
from lakelog.errors import (
    FencedInstanceId,
    InvalidGroupId,
    KafkaException,
    UnknownMemberId,
)
from lakelog.typedef import TopicPartitionKey

R = TypeVar("R")
# A group handler's answer: `__consumer_offsets` records, then a response or an error.
GroupOutcome = Outcome[GroupLogRecord, R]

LEAVE_GROUP_EPOCH = -1
# KIP-345/848: a static member's temporary leave keeps its assignment for a new instance.
LEAVE_GROUP_STATIC_EPOCH = -2
# A commit from outside the group protocol (manual assignment): no member, generation -1.
NO_MEMBER_EPOCH = -1


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets/<n>` of a group: Kafka's `Utils.abs(groupId.hashCode) % n`."""
    return partition_for_key(group_id, num_partitions)


@dataclass(frozen=True)
class GroupConfig:
    """Coordinator-side settings of groups (Kafka's group.consumer.* broker keys, and lakelog's own)."""

    assignor: str = "uniform"
    # KAFKA-19779 "precise" mode: validate commits against each partition's own revocation epoch.
    partition_level_revocation_epochs: bool = False

    @classmethod
    def from_broker_config(cls, broker: Mapping[str, Any], assignor: str | None = None) -> GroupConfig:
        """Settings from the broker config (`group.consumer.partition.revocation.epochs.enable`), and
        the assignor a member asked for (`group.remote.assignor`), if any."""
        return cls(
            assignor=assignor or cls.assignor,
            partition_level_revocation_epochs=broker["group.consumer.partition.revocation.epochs.enable"],
        )


@dataclass(frozen=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat: member_epoch 0 joins, -1 leaves (-2: a static member's temporary leave)."""

    group_id: str
    member_id: str
    member_epoch: int
    subscribed_topics: tuple[str, ...]
    owned: frozenset[TopicPartitionKey]
    instance_id: str | None = None
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000


@dataclass(frozen=True)
class HeartbeatResponse:
    member_id: str
    member_epoch: int
    # The partitions the member owns now; a member must revoke what it owns beyond this.
    assignment: frozenset[TopicPartitionKey]
    heartbeat_interval_ms: int = 1000


@dataclass(frozen=True)
class GroupMetadata:
    """What `consumer_group_metadata()` hands the producer (KIP-447): who commits, at which epoch."""

    group_id: str
    member_id: str = ""
    generation_id: int = NO_MEMBER_EPOCH
    group_instance_id: str | None = None


def check_group_id(group_id: Any) -> KafkaException | None:
    try:
        validate_name(group_id, what="group.id")
    except KafkaException as error:
        return InvalidGroupId(str(error))
    return None


def unknown_member(group_id: str, member_id: str) -> UnknownMemberId:
    return UnknownMemberId(f"member {member_id!r} is not in group {group_id!r}", member_id=member_id)


def fenced_instance(group_id: str, instance_id: str) -> FencedInstanceId:
    return FencedInstanceId(
        f"group.instance.id {instance_id!r} of group {group_id!r} belongs to a newer member", instance_id=instance_id
    )
