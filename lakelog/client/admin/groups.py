"""Admin operations on consumer groups, as Kafka's `kafka-consumer-groups.sh` (S6).

`list_groups` and `describe_group` read the group coordinator's state;
`group_offsets` sets each committed offset beside the partition's high watermark
and last stable offset, so lag is shown both ways: against the HW (what a
read_uncommitted member still has to read) and against the LSO (what a
read_committed member can read now). `plan_reset` computes new offsets as
`--reset-offsets` does and `alter_offsets` commits them, only while the group has
no members (a commit from outside the group protocol, S6.4); `delete_group`
removes an empty group and its offsets. The types mirror confluent-kafka's
(`ConsumerGroupTopicPartitions`, `ConsumerGroupListing`, ...).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import cast

from lakelog.client.admin.types import NODE_ID, ConsumerGroupType, MemberAssignment, Node
from lakelog.client.types import OFFSET_INVALID, TopicPartition
from lakelog.config import validate_name
from lakelog.coordinator.group import NO_MEMBER_EPOCH, Group, TopicPartitionKey
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG, GroupCoordinator
from lakelog.errors import GroupIdNotFound, InvalidGroupId, InvalidRequest, KafkaException, NonEmptyGroup, UnknownTopicOrPartition
from lakelog.log import open_partition, topic_config
from lakelog.log.topics import existing_internal_partitions
from lakelog.store import Location
from lakelog.store.io.retry import DEFAULT_POLICY, RetryPolicy

logger = logging.getLogger(__name__)

RESET_STRATEGIES = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by")


class ConsumerGroupState(enum.Enum):
    """KIP-848's group states, as confluent-kafka names them."""

    EMPTY = "EMPTY"
    ASSIGNING = "ASSIGNING"
    RECONCILING = "RECONCILING"
    STABLE = "STABLE"
    # confluent-kafka's UNKNOWN: here a group set aside because a row of it does not decode (describe names the row).
    UNKNOWN = "UNKNOWN"
    # confluent-kafka's names of the classic protocol's states, as aliases of KIP-848's nearest ones (and its
    # deprecated misspelling), so handlers that name them run: a new assignment is being computed, then taken up.
    PREPARING_REBALANCING = "ASSIGNING"  # noqa: PIE796  alias on purpose (confluent-kafka's classic-protocol name)
    COMPLETING_REBALANCING = "RECONCILING"  # noqa: PIE796  alias on purpose (confluent-kafka's classic-protocol name)
    UNKOWN = "UNKNOWN"  # noqa: PIE796  alias on purpose (confluent-kafka's deprecated misspelling)


@dataclass
class ConsumerGroupTopicPartitions:
    """A group and some of its partitions (with offsets), as confluent-kafka's type of that name."""

    group_id: str
    topic_partitions: list[TopicPartition] | None = None


@dataclass(frozen=True)
class ConsumerGroupListing:
    group_id: str
    is_simple_consumer_group: bool
    state: ConsumerGroupState
    type: ConsumerGroupType = ConsumerGroupType.CONSUMER


@dataclass(frozen=True)
class ListConsumerGroupsResult:
    valid: list[ConsumerGroupListing]
    errors: list[KafkaException] = field(default_factory=list)


@dataclass(frozen=True)
class MemberDescription:
    """A member: its id, epochs (S6.3), what it owns and what the target gives it."""

    member_id: str
    group_instance_id: str | None
    member_epoch: int
    revocation_epoch: int
    # MemberAssignment: a list of TopicPartition with confluent-kafka's `.topic_partitions` too.
    assignment: MemberAssignment
    target_assignment: MemberAssignment
    pending_revocation: list[TopicPartition]
    subscribed_topics: list[str]
    # The last renewal of the member's liveness lease (S6.5): heartbeats between renewals write nothing.
    last_heartbeat_ms: int
    # confluent-kafka's fields a root does not record: a member's client id and host are not kept.
    client_id: str = ""
    host: str = ""


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    is_simple_consumer_group: bool
    members: list[MemberDescription]
    partition_assignor: str
    state: ConsumerGroupState
    group_epoch: int
    target_assignment_epoch: int
    # confluent-kafka's fields: the coordinator is the root's one node; every group runs KIP-848's protocol.
    coordinator: Node | None = None
    authorized_operations: list | None = None
    type: ConsumerGroupType = ConsumerGroupType.CONSUMER


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition of a group: its committed offset and lag against the HW and the LSO."""

    topic: str
    partition: int
    committed_offset: int | None
    metadata: str
    # A transactional commit waiting for its transaction (S7.1), or None.
    pending_offset: int | None
    high_watermark: int
    last_stable_offset: int
    member_id: str | None

    @property
    def lag(self) -> int | None:
        """Records between the committed offset and the high watermark."""
        return None if self.committed_offset is None else max(0, self.high_watermark - self.committed_offset)

    @property
    def lag_lso(self) -> int | None:
        """Records between the committed offset and the last stable offset (what read_committed can read now)."""
        return None if self.committed_offset is None else max(0, self.last_stable_offset - self.committed_offset)


def group_state(group: Group) -> ConsumerGroupState:
    if group.is_empty():
        return ConsumerGroupState.EMPTY
    if group.target_epoch < group.group_epoch:
        return ConsumerGroupState.ASSIGNING
    target = group.target.assignment if group.target else {}
    for member_id, member in group.members.items():
        current = member.current
        if (
            current.member_epoch != group.target_epoch
            or current.pending_revocation
            or current.assigned != target.get(member_id, frozenset())
        ):
            return ConsumerGroupState.RECONCILING
    return ConsumerGroupState.STABLE


def read_group(root: str | Location, group_id: str) -> Group | None:
    """The group's state, or None if it does not exist; reads only (creates no internal table).

    CorruptRecord, naming the table and offset of the row, if a row of the group does not decode
    (the other groups of its `__consumer_offsets` partition are still read).
    """
    _check_group_id(group_id)
    existing = existing_internal_partitions(root, CONSUMER_OFFSETS_LOG)
    if 0 not in existing:
        return None
    coordinator = GroupCoordinator(root)
    if coordinator.offsets_partition(group_id)[1] not in existing:
        return None
    return coordinator.describe(group_id)


def list_groups(root: str | Location) -> list[ConsumerGroupListing]:
    """Every group, by id; one set aside by a row that does not decode is listed as UNKNOWN (and logged)."""
    coordinator = GroupCoordinator(root)
    listings = [ConsumerGroupListing(g.group_id, False, group_state(g)) for g in coordinator.list_groups()]
    for group_id, error in coordinator.corrupt_groups().items():
        logger.warning("group %s is listed as UNKNOWN: %s", group_id, error)
        listings.append(ConsumerGroupListing(group_id, False, ConsumerGroupState.UNKNOWN))
    return sorted(listings, key=lambda listing: listing.group_id)


def describe_group(root: str | Location, group_id: str) -> ConsumerGroupDescription:
    """The group's state, epochs and members; GroupIdNotFound, or CorruptRecord naming the bad row (read_group)."""
    group = _existing(root, group_id)
    target = group.target.assignment if group.target else {}
    members = [
        MemberDescription(
            member_id=member_id,
            group_instance_id=member.metadata.instance_id,
            member_epoch=member.current.member_epoch,
            revocation_epoch=member.current.revocation_epoch,
            assignment=MemberAssignment(_partitions(member.current.assigned)),
            target_assignment=MemberAssignment(_partitions(target.get(member_id, frozenset()))),
            pending_revocation=_partitions(member.current.pending_revocation),
            subscribed_topics=list(member.metadata.subscribed_topics),
            last_heartbeat_ms=member.metadata.last_heartbeat_ms,
        )
        for member_id, member in sorted(group.members.items())
    ]
    return ConsumerGroupDescription(
        group_id,
        False,
        members,
        group.assignor,
        group_state(group),
        group.group_epoch,
        group.target_epoch,
        coordinator=Node(NODE_ID, str(root)),
    )


def group_offsets(root: str | Location, group_id: str) -> list[PartitionOffsets]:
    """Every partition the group committed or its members subscribe to, with offsets and lag."""
    group = _existing(root, group_id)
    pending = {tp: record.offset for offsets in group.pending.values() for tp, record in offsets.items()}
    partitions = set(group.offsets) | set(pending)
    for member in group.members.values():
        for topic in member.metadata.subscribed_topics:
            try:
                partitions.update((topic, p) for p in range(topic_config(root, topic).num_partitions))
            except UnknownTopicOrPartition:
                continue
    rows = []
    for topic, partition in sorted(partitions):
        try:
            log = open_partition(root, topic, partition)
            high_watermark, last_stable = log.high_watermark(), log.last_stable_offset()
        except UnknownTopicOrPartition:
            high_watermark = last_stable = -1  # the topic is gone; its offsets stay until deleted
        record = group.offsets.get((topic, partition))
        rows.append(
            PartitionOffsets(
                topic,
                partition,
                None if record is None else record.offset,
                "" if record is None else record.metadata or "",
                pending.get((topic, partition)),
                high_watermark,
                last_stable,
                group.owner_of((topic, partition)),
            )
        )
    return rows


def list_offsets(
    root: str | Location, group_id: str, partitions: Iterable[TopicPartitionKey] | None, require_stable: bool
) -> ConsumerGroupTopicPartitions:
    """Committed offsets (OFFSET_INVALID where none); with `require_stable`, UnstableOffsetCommit while pending."""
    partitions = None if partitions is None else list(partitions)
    if read_group(root, group_id) is None:
        records = dict.fromkeys(partitions or ())
    else:
        records = GroupCoordinator(root).fetch_offsets(group_id, partitions, require_stable=require_stable)
    listed = [
        TopicPartition(
            topic,
            partition,
            OFFSET_INVALID if record is None else record.offset,
            None if record is None else record.metadata,  # as committed: '' and None kept apart, as Kafka
        )
        for (topic, partition), record in sorted(records.items())
    ]
    return ConsumerGroupTopicPartitions(group_id, listed)


def plan_reset(
    root: str | Location, group_id: str, partitions: Iterable[TopicPartitionKey], strategy: str, value: int | None = None
) -> dict[TopicPartitionKey, int]:
    """New offsets as `--reset-offsets --<strategy>` computes them, clamped to [log start, high watermark].

    Raises on an unknown strategy, a missing value, or a partition that does not exist; writes nothing.
    """
    if strategy not in RESET_STRATEGIES:
        raise InvalidRequest(f"unknown reset strategy {strategy!r}; expected one of {', '.join(RESET_STRATEGIES)}")
    if (strategy in ("to-offset", "shift-by")) != (value is not None):
        raise InvalidRequest(f"--{strategy} {'needs' if value is None else 'takes no'} value")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise InvalidRequest(f"--{strategy} takes an integer, not {value!r}")
    group = read_group(root, group_id)
    plan = {}
    for topic, partition in sorted(set(partitions)):
        log = open_partition(root, topic, partition)
        low, high = log.log_start_offset(), log.high_watermark()
        current = group.offsets.get((topic, partition)) if group is not None else None
        if strategy == "to-earliest":
            offset = low
        elif strategy == "to-latest":
            offset = high
        elif strategy == "to-offset":
            offset = cast(int, value)  # checked above: --to-offset comes with a value
        elif current is None:
            raise InvalidRequest(f"--{strategy}: {topic}-{partition} has no committed offset in group {group_id!r}")
        else:
            offset = current.offset + (value or 0)
        plan[(topic, partition)] = min(max(offset, low), high)
    if not plan:
        raise InvalidRequest("no partitions to reset")
    return plan


def alter_offsets(
    root: str | Location,
    group_id: str,
    offsets: Mapping[TopicPartitionKey, tuple[int, str | None]],
    *,
    retry: RetryPolicy = DEFAULT_POLICY,
) -> ConsumerGroupTopicPartitions:
    """Commit `offsets` for a group with no members (NonEmptyGroup otherwise), all or nothing."""
    group = read_group(root, group_id)
    if group is not None and not group.is_empty():
        raise NonEmptyGroup(
            f"offsets of group {group_id!r} can only be altered while it has no members; it is "
            f"{group_state(group).value} with {len(group.members)} member(s)"
        )
    for (topic, partition), (offset, metadata) in offsets.items():
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise InvalidRequest(f"offset for {topic}-{partition} must be a non-negative integer, not {offset!r}")
        if metadata is not None and not isinstance(metadata, str):
            raise InvalidRequest(f"metadata for {topic}-{partition} must be a string or None, not {metadata!r}")
        open_partition(root, topic, partition)  # UnknownTopicOrPartition before anything is written
    # No member, epoch -1: the coordinator accepts it only while the group is still empty (S6.4).
    GroupCoordinator(root, retry=retry).commit_offsets(group_id, "", NO_MEMBER_EPOCH, dict(offsets))
    return ConsumerGroupTopicPartitions(
        group_id, [TopicPartition(t, p, offset, metadata) for (t, p), (offset, metadata) in sorted(offsets.items())]
    )


def delete_group(root: str | Location, group_id: str, *, retry: RetryPolicy = DEFAULT_POLICY) -> None:
    """Delete an empty group and its committed offsets (GroupIdNotFound, NonEmptyGroup)."""
    _existing(root, group_id)
    GroupCoordinator(root, retry=retry).delete_group(group_id)


def _existing(root: str | Location, group_id: str) -> Group:
    group = read_group(root, group_id)
    if group is None:
        raise GroupIdNotFound(f"group {group_id!r} does not exist")
    return group


def _check_group_id(group_id: object) -> str:
    try:
        return validate_name(group_id, what="group.id")
    except KafkaException as error:
        raise InvalidGroupId(str(error)) from None


def _partitions(partitions: Iterable[TopicPartitionKey]) -> list[TopicPartition]:
    return [TopicPartition(topic, partition) for topic, partition in sorted(partitions)]
