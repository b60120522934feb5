"""Membership: joins, heartbeats, leaves and reconciliation toward the target assignment, and the sweep's expiry (S6.1-S6.3, S6.5).

Epochs, as KIP-848 and KAFKA-19779 define them:

- The group epoch rises with every change of membership or subscriptions. The
  target assignment (computed by the server-side assignor) carries the group
  epoch it was computed at.
- A member's epoch rises to the target assignment epoch once it has revoked
  every partition it must give up (S6.2). It then owns only partitions that no
  other member still holds: a partition moves to a new owner only after its old
  owner revoked it.
- The member's revocation epoch is the member epoch before the last bump that
  revoked partitions (S6.3): `RevocationEpoch < MemberEpoch <= TargetAssignmentEpoch
  <= GroupEpoch`. Each revoked partition also remembers the epoch it was revoked
  at (the partition-level revocation epoch of KAFKA-19779).
- An offset commit is accepted iff `RevocationEpoch < client epoch <= member
  epoch` (S6.4); with `partition_level=True` the revocation epoch is the
  partition's own, which accepts commits the member-level bound refuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from lakelog.coordinator.group.assignors import assign
from lakelog.coordinator.group.records import CurrentRecord, GroupLogRecord, GroupRecord, MemberRecord, TargetRecord
from lakelog.coordinator.group.state import CorruptGroupRow, Group, GroupState, Member, replay
from lakelog.coordinator.group.types import (
    LEAVE_GROUP_EPOCH,
    LEAVE_GROUP_STATIC_EPOCH,
    GroupConfig,
    GroupOutcome,
    Heartbeat,
    HeartbeatResponse,
    check_group_id,
    fenced_instance,
    unknown_member,
)
from lakelog.coordinator.runtime.outcome import Outcome
from lakelog.errors import (
    FencedMemberEpoch,
    GroupIdNotFound,
    InvalidRequest,
    NonEmptyGroup,
)
from lakelog.typedef import TopicPartitionKey

# -- handlers -------------------------------------------------------------------------------


def heartbeat(
    group: Group | None,
    request: Heartbeat,
    topic_partitions: Mapping[str, int],
    now_ms: int,
    config: GroupConfig = GroupConfig(),
    new_member_id: str | None = None,
) -> GroupOutcome[HeartbeatResponse]:
    """Join (epoch 0), heartbeat, or leave (-1; -2 for a static member's temporary leave), and
    reconcile the member toward the target assignment (S6.2, S6.3).

    `topic_partitions` holds the partition count of every subscribed topic;
    `new_member_id` names a joining member (the caller makes a unique id).
    A static member joining under a `group.instance.id` that another member
    holds replaces it; the old member id is fenced from then on (S6.5).
    """
    error = check_group_id(request.group_id)
    if error is not None:
        return Outcome(error=error)
    group_id, epoch = request.group_id, request.member_epoch
    group = base = group if group is not None else Group(group_id, assignor=config.assignor)
    member = group.members.get(request.member_id) if request.member_id else None
    records: list[GroupLogRecord] = []

    if epoch in (LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH):
        if member is None:
            return Outcome(error=unknown_member(group_id, request.member_id))
        if epoch == LEAVE_GROUP_STATIC_EPOCH and member.metadata.instance_id is not None:
            # The member stays (until its session times out) so that its next instance finds its assignment.
            return Outcome(response=HeartbeatResponse(request.member_id, LEAVE_GROUP_STATIC_EPOCH, frozenset()))
        records.extend(_remove_member(group, request.member_id))
        after = _apply(group, records)
        records.extend(_new_target(after, topic_partitions, group.group_epoch + 1))
        records.extend(_reconcile_others(group, records, None, now_ms))
        return Outcome(tuple(records), HeartbeatResponse(request.member_id, LEAVE_GROUP_EPOCH, frozenset()))

    if epoch == 0:
        if new_member_id is None:
            raise ValueError("joining needs a new_member_id")
        previous = group.member_by_instance(request.instance_id) if request.instance_id is not None else None
        if previous is not None:
            records.extend(_remove_member(group, previous.metadata.member_id))
        records.append(
            MemberRecord(
                group_id,
                new_member_id,
                request.instance_id,
                tuple(sorted(request.subscribed_topics)),
                request.session_timeout_ms,
                request.rebalance_timeout_ms,
                now_ms,
            )
        )
        after = _apply(group, records)
        records.extend(_new_target(after, topic_partitions, group.group_epoch + 1))
        group = _apply(group, records)
        member = group.members[new_member_id]
        owned: frozenset[TopicPartitionKey] = frozenset()
    else:
        if member is None:
            if request.instance_id is not None and group.member_by_instance(request.instance_id) is not None:
                return Outcome(error=fenced_instance(group_id, request.instance_id))
            return Outcome(error=unknown_member(group_id, request.member_id))
        if request.instance_id is not None and member.metadata.instance_id != request.instance_id:
            return Outcome(error=fenced_instance(group_id, request.instance_id))
        # The epoch the member knows: its own, the one before its last bump, or one it was moved past
        # without being asked to revoke (see _reconcile_others).
        if not member.current.previous_member_epoch <= epoch <= member.current.member_epoch:
            return Outcome(
                error=FencedMemberEpoch(
                    f"member {request.member_id} of group {group_id!r} sent epoch {epoch}; its epoch is "
                    f"{member.current.member_epoch}: rejoin with epoch 0",
                    member_epoch=member.current.member_epoch,
                )
            )
        subscription = tuple(sorted(request.subscribed_topics))
        changed = subscription != member.metadata.subscribed_topics
        if changed:
            records.append(dataclasses.replace(member.metadata, last_heartbeat_ms=now_ms, subscribed_topics=subscription))
        if changed or _untargeted_partitions(group, topic_partitions):
            after = _apply(group, records)
            records.extend(_new_target(after, topic_partitions, group.group_epoch + 1))
            group = _apply(group, records)
            member = group.members[request.member_id]
        owned = request.owned
        if member.current.pending_revocation & owned:
            # Still revoking: nothing moves until the client stops reporting those partitions.
            current = member.current
            records = _with_lease(records, member.metadata, now_ms)
            return Outcome(tuple(records), HeartbeatResponse(request.member_id, current.member_epoch, current.assigned))

    current = _reconcile(group, member, now_ms)
    if current != member.current:
        records.append(current)
    if records:
        records.extend(_reconcile_others(base, records, member.metadata.member_id, now_ms))
    if epoch != 0:
        records = _with_lease(records, member.metadata, now_ms)
    return Outcome(tuple(records), HeartbeatResponse(member.metadata.member_id, current.member_epoch, current.assigned))


def heartbeat_expiring(
    group: Group | None,
    request: Heartbeat,
    topic_partitions: Mapping[str, int],
    now_ms: int,
    config: GroupConfig = GroupConfig(),
    new_member_id: str | None = None,
) -> GroupOutcome[HeartbeatResponse]:
    """`heartbeat`, after removing the other members past their session or rebalance timeout (S6.5): the
    broker's session timer, run by the members themselves, in the same write as the heartbeat's own records.

    The sweep's rule (`expire_members`) on the snapshot this heartbeat decides on, so a root needs no scheduler
    for a group to move on from a dead member. A refused heartbeat writes nothing, the expiry included (S8.3)."""
    records: tuple[GroupLogRecord, ...] = ()
    if group is not None:
        expired = expire_members(group, topic_partitions, now_ms, keep=request.member_id or None)
        if expired.records:
            records = expired.records
            group = _apply(group, records)
    outcome = heartbeat(group, request, topic_partitions, now_ms, config, new_member_id)
    if not outcome.ok or not records:
        return outcome
    return Outcome(records + tuple(outcome.records), outcome.response)


def _reconcile_others(group: Group, records: list[GroupLogRecord], requester: str | None, now_ms: int) -> list[GroupLogRecord]:
    """After `records`, move every other member that has nothing to revoke to its target in the same
    write: the epoch bump and any freed partitions of its target (S6.2, S6.3).

    Without this every member's epoch bump was a commit of its own, made at its next heartbeat, so one
    join cost a commit per member and every member replayed them all. A member learns of the move at its
    next heartbeat, which only reads; until then it may still send the epoch it knows, and its commits
    at that epoch stay valid, since nothing was revoked (KAFKA-19779). Revocations still start only at
    the member's own heartbeat, which reports what it owns.
    """
    after = _apply(group, records)
    moved: list[GroupLogRecord] = []
    for member_id in sorted(after.members):
        member = after.members[member_id]
        if member_id == requester or member.current.pending_revocation:
            continue
        current = _reconcile(after, member, now_ms)
        if current == member.current or current.pending_revocation:
            continue
        current = dataclasses.replace(current, previous_member_epoch=member.current.previous_member_epoch)
        after.members[member_id] = Member(member.metadata, current)
        moved.append(current)
    return moved


def _with_lease(records: list[GroupLogRecord], metadata: MemberRecord, now_ms: int) -> list[GroupLogRecord]:
    """The heartbeat's records, renewing the member's lease if it is due or if they are written anyway.

    A heartbeat that changes nothing and finds the lease fresh writes nothing: it only
    reads (S6.5, the liveness lease; Kafka's session timer).
    """
    if metadata.last_heartbeat_ms >= now_ms or not (records or metadata.lease_due(now_ms)):
        return records
    if any(isinstance(record, MemberRecord) and record.member_id == metadata.member_id for record in records):
        return records  # a subscription change renewed it
    return [dataclasses.replace(metadata, last_heartbeat_ms=now_ms), *records]


def _reconcile(group: Group, member: Member, now_ms: int) -> CurrentRecord:
    """Move the member toward its target: revoke first, bump the epoch, then take only free partitions (S6.2, S6.3)."""
    current = member.current
    member_id = member.metadata.member_id
    target_epoch = group.target_epoch
    target = group.target.assignment.get(member_id, frozenset()) if group.target else frozenset()
    if current.pending_revocation:
        # The client no longer reports them (the caller checked): they were revoked at this member epoch.
        current = dataclasses.replace(
            current,
            pending_revocation=frozenset(),
            partition_revocation_epochs={
                **current.partition_revocation_epochs,
                **dict.fromkeys(current.pending_revocation, current.member_epoch),
            },
            revocation_started_ms=-1,
        )
    if current.member_epoch < target_epoch:
        to_revoke = current.assigned - target
        if to_revoke:
            return dataclasses.replace(
                current, assigned=current.assigned & target, pending_revocation=to_revoke, revocation_started_ms=now_ms
            )
        revoked_at_this_epoch = current.member_epoch in current.partition_revocation_epochs.values()
        current = dataclasses.replace(
            current,
            member_epoch=target_epoch,
            previous_member_epoch=current.member_epoch,
            revocation_epoch=current.member_epoch if revoked_at_this_epoch else current.revocation_epoch,
        )
    # Take target partitions that nobody else holds (an old owner may still be revoking them).
    free = {tp for tp in target - current.assigned if group.owner_of(tp) in (None, member_id)}
    assigned = frozenset((current.assigned & target) | free)
    if assigned != current.assigned:
        current = dataclasses.replace(current, assigned=assigned)
    return current


def _untargeted_partitions(group: Group, topic_partitions: Mapping[str, int]) -> bool:
    """A subscribed topic has partitions the target assignment does not hold: it was created after the
    target was computed (KIP-848's coordinator bumps the group epoch when a subscribed topic's metadata
    changes). Only topics `topic_partitions` counts are checked."""
    subscribed = {topic for member in group.members.values() for topic in member.metadata.subscribed_topics}
    targeted = {tp for owned in (group.target.assignment.values() if group.target else ()) for tp in owned}
    return any((topic, partition) not in targeted for topic in subscribed for partition in range(topic_partitions.get(topic, 0)))


def _new_target(group: Group, topic_partitions: Mapping[str, int], group_epoch: int) -> list[GroupLogRecord]:
    """A group epoch bump and the target assignment computed at it."""
    members = {m.metadata.member_id: m.metadata.subscribed_topics for m in group.members.values()}
    previous = group.target.assignment if group.target else {}
    assignment = assign(group.assignor, members, topic_partitions, previous)
    return [GroupRecord(group.group_id, group_epoch, group.assignor), TargetRecord(group.group_id, group_epoch, assignment)]


def _remove_member(group: Group, member_id: str) -> list[GroupLogRecord]:
    return [dataclasses.replace(group.members[member_id].metadata, removed=True)]


def _apply(group: Group, records: Iterable[GroupLogRecord]) -> Group:
    """The group after `records`, without touching `group` (handlers are pure)."""
    state = GroupState({group.group_id: _copy_group(group)})
    for record in records:
        replay(state, record)
    return state.groups.get(group.group_id) or Group(group.group_id)


def _copy_group(group: Group) -> Group:
    return dataclasses.replace(
        group,
        members={k: Member(v.metadata, v.current) for k, v in group.members.items()},
        offsets=dict(group.offsets),
        pending={k: dict(v) for k, v in group.pending.items()},
    )


def lease_renewal(group: Group | None, member_id: str, now_ms: int) -> tuple[GroupLogRecord, ...]:
    """The committing member's lease renewal, if due: a commit is written anyway, so it renews for free."""
    member = group.members.get(member_id) if group is not None and member_id else None
    if member is None or member.metadata.last_heartbeat_ms >= now_ms or not member.metadata.lease_due(now_ms):
        return ()
    return (dataclasses.replace(member.metadata, last_heartbeat_ms=now_ms),)


# -- timeouts (the sweep) ----------------------------------------------------------------------


def expire_members(
    group: Group, topic_partitions: Mapping[str, int], now_ms: int, keep: str | None = None
) -> GroupOutcome[list[str]]:
    """S6.5: remove members past their lease (last renewal + session.timeout.ms), or stuck revoking past
    their rebalance timeout; never `keep` (the member whose request is deciding: it is alive)."""
    expired = []
    for member_id, member in sorted(group.members.items()):
        if member_id == keep:
            continue
        metadata, current = member.metadata, member.current
        if metadata.lease_expired(now_ms):
            expired.append(member_id)
        elif current.revocation_started_ms >= 0 and current.revocation_started_ms + metadata.rebalance_timeout_ms < now_ms:
            expired.append(member_id)
    if not expired:
        return Outcome(response=[])
    records: list[GroupLogRecord] = []
    for member_id in expired:
        records.extend(_remove_member(group, member_id))
    after = _apply(group, records)
    records.extend(_new_target(after, topic_partitions, group.group_epoch + 1))
    records.extend(_reconcile_others(group, records, None, now_ms))
    return Outcome(tuple(records), expired)


def delete_group(group: Group | None, group_id: str) -> GroupOutcome[None]:
    """Delete an empty group and its offsets (kafka-consumer-groups.sh --delete)."""
    if group is None:
        return Outcome(error=GroupIdNotFound(f"group {group_id!r} does not exist"))
    if not group.is_empty():
        return Outcome(error=NonEmptyGroup(f"group {group_id!r} has {len(group.members)} member(s); stop them first"))
    records: list[GroupLogRecord] = [dataclasses.replace(record, removed=True) for record in group.offsets.values()]
    records.append(GroupRecord(group_id, group.group_epoch, group.assignor, deleted=True))
    return Outcome(tuple(records))


def delete_corrupt_group(corrupt: CorruptGroupRow | None, group_id: str) -> GroupOutcome[CorruptGroupRow]:
    """Delete a group set aside by a row that does not decode, discarding its committed offsets (the way out).

    Replay dropped the group's state at its first corrupt row (`replay_corrupt`: no offset of it is known here
    to write a removal for) and folds none of its later rows but its deletion, which ends the set-aside and
    leaves none of its earlier rows in effect: the deletion record alone wipes the group, which starts again
    empty. The response is the corrupt row, for the audit line. A group that is served (or does not exist)
    is InvalidRequest, writing nothing (S8.3): this never discards a healthy group's offsets.
    """
    if corrupt is None:
        return Outcome(
            error=InvalidRequest(
                f"group {group_id!r} is not set aside by a corrupt record: discarding is only for such a group "
                "(delete a healthy group without it)"
            )
        )
    return Outcome((GroupRecord(group_id, 0, deleted=True),), corrupt)
