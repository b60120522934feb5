"""Offsets: commits, transactional commits (KIP-447) and fetches, validated against member epochs (S6.4, S7.2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakelog.coordinator.group.membership import lease_renewal
from lakelog.coordinator.group.records import OffsetRecord
from lakelog.coordinator.group.state import Group, GroupState
from lakelog.coordinator.group.types import (
    NO_MEMBER_EPOCH,
    GroupConfig,
    GroupMetadata,
    GroupOutcome,
    check_group_id,
    fenced_instance,
    unknown_member,
)
from lakelog.coordinator.runtime.outcome import Outcome
from lakelog.errors import (
    IllegalGeneration,
    InvalidRequest,
    KafkaException,
    ProducerFenced,
    StaleMemberEpoch,
    UnstableOffsetCommit,
)
from lakelog.typedef import TopicPartitionKey

# -- offsets ----------------------------------------------------------------------------------


def validate_commit(
    group: Group | None,
    group_id: str,
    member_id: str,
    member_epoch: int,
    partitions: Iterable[TopicPartitionKey],
    transactional: bool,
    instance_id: str | None = None,
    config: GroupConfig = GroupConfig(),
) -> KafkaException | None:
    """S6.4 / S7.2: `RevocationEpoch < client epoch <= broker epoch`, member-level or per partition.

    A commit with no member id and epoch -1 comes from outside the group protocol
    (manual assignment) and is accepted only while the group has no members.
    Errors: UnknownMemberId, FencedInstanceId, StaleMemberEpoch (plain) or
    IllegalGeneration (transactional).
    """
    if not member_id and member_epoch == NO_MEMBER_EPOCH:
        if group is None or group.is_empty():
            return None
        return _stale(group_id, member_epoch, transactional, "the group has members: commit as one of them")
    member = group.members.get(member_id) if group is not None else None
    if member is None:
        if instance_id is not None and group is not None and group.member_by_instance(instance_id) is not None:
            return fenced_instance(group_id, instance_id)
        return unknown_member(group_id, member_id)
    if instance_id is not None and member.metadata.instance_id != instance_id:
        return fenced_instance(group_id, instance_id)
    current = member.current
    if member_epoch > current.member_epoch:
        return _stale(group_id, member_epoch, transactional, f"the member's epoch is {current.member_epoch}")
    for tp in partitions:
        bound = (
            current.partition_revocation_epochs.get(tp, 0)
            if config.partition_level_revocation_epochs
            else current.revocation_epoch
        )
        if not bound < member_epoch:
            why = (
                f"{tp[0]}-{tp[1]} was revoked from the member at epoch {bound}"
                if config.partition_level_revocation_epochs
                else f"the member revoked partitions at epoch {bound} (its revocation epoch)"
            )
            return _stale(group_id, member_epoch, transactional, why)
    return None


def commit_offsets(
    group: Group | None,
    group_id: str,
    member_id: str,
    member_epoch: int,
    offsets: Mapping[TopicPartitionKey, tuple[int, str | None]],
    now_ms: int,
    instance_id: str | None = None,
    config: GroupConfig = GroupConfig(),
) -> GroupOutcome[dict[TopicPartitionKey, int]]:
    """OffsetCommit (S6.1, S6.4): one record per partition, after validation; nothing on refusal."""
    error = check_group_id(group_id) or check_offsets(offsets)
    if error is None:
        error = validate_commit(group, group_id, member_id, member_epoch, offsets, False, instance_id, config)
    if error is not None:
        return Outcome(error=error)
    records = tuple(
        OffsetRecord(group_id, topic, partition, offset, metadata, now_ms)
        for (topic, partition), (offset, metadata) in sorted(offsets.items())
    )
    return Outcome(lease_renewal(group, member_id, now_ms) + records, {tp: offset for tp, (offset, _) in offsets.items()})


def commit_transactional_offsets(
    state: GroupState,
    metadata: GroupMetadata,
    producer_id: int,
    producer_epoch: int,
    offsets: Mapping[TopicPartitionKey, tuple[int, str | None]],
    now_ms: int,
    config: GroupConfig = GroupConfig(),
) -> GroupOutcome[dict[TopicPartitionKey, int]]:
    """TxnOffsetCommit (S7.1, S7.2): pending offsets of the producer's transaction.

    Group metadata is checked as a transactional commit (IllegalGeneration,
    FencedInstanceId, UnknownMemberId); a producer epoch at or below a marker
    below the last marker written here for this producer is a finished
    transaction's (markers carry the next transaction's epoch, S4.6): ProducerFenced.
    """
    group_id = metadata.group_id
    error = check_group_id(group_id) or check_offsets(offsets)
    if error is not None:
        return Outcome(error=error)
    if producer_epoch < state.marker_epochs.get(producer_id, -1):
        return Outcome(
            error=ProducerFenced(
                f"producer id {producer_id} epoch {producer_epoch}: its transaction already ended here",
                producer_id=producer_id,
                producer_epoch=state.marker_epochs[producer_id],
            )
        )
    group = state.group(group_id)
    error = validate_commit(
        group, group_id, metadata.member_id, metadata.generation_id, offsets, True, metadata.group_instance_id, config
    )
    if error is not None:
        return Outcome(error=error)
    records = tuple(
        OffsetRecord(group_id, topic, partition, offset, text, now_ms, producer_id, producer_epoch)
        for (topic, partition), (offset, text) in sorted(offsets.items())
    )
    renewal = lease_renewal(group, metadata.member_id, now_ms)
    return Outcome(renewal + records, {tp: offset for tp, (offset, _) in offsets.items()})


def fetch_offsets(
    group: Group | None, partitions: Iterable[TopicPartitionKey] | None, require_stable: bool
) -> GroupOutcome[dict[TopicPartitionKey, OffsetRecord | None]]:
    """OffsetFetch (S6.1, S7.3): committed offsets; with `require_stable`, UnstableOffsetCommit while a
    transactional commit of any asked partition is pending."""
    if group is None:
        return Outcome(response=dict.fromkeys(partitions or ()))
    wanted = list(partitions) if partitions is not None else sorted(group.offsets)
    if require_stable:
        pending = sorted({tp for offsets in group.pending.values() for tp in offsets} & set(wanted))
        if pending:
            return Outcome(
                error=UnstableOffsetCommit(
                    f"group {group.group_id!r} has a transactional offset commit pending for {pending}; retry",
                    partitions=pending,
                )
            )
    return Outcome(response={tp: group.offsets.get(tp) for tp in wanted})


def check_offsets(offsets: Mapping[TopicPartitionKey, tuple[int, str | None]]) -> KafkaException | None:
    for (topic, partition), (offset, _metadata) in offsets.items():
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            return InvalidRequest(f"offset for {topic}-{partition} must be a non-negative integer, not {offset!r}")
        if not isinstance(partition, int) or partition < 0:
            return InvalidRequest(f"partition of {topic} must be a non-negative integer, not {partition!r}")
    return None


def _stale(group_id: str, epoch: int, transactional: bool, why: str) -> KafkaException:
    error = IllegalGeneration if transactional else StaleMemberEpoch
    return error(f"commit to group {group_id!r} at member epoch {epoch} is refused: {why}", member_epoch=epoch)
