"""A `Consumer` as a member of a group (S6): subscribe, heartbeat, reconcile, lose, leave.

Over KIP-848's heartbeats in both protocols (`protocol`): the consumer protocol and classic cooperative-sticky
reconcile incrementally; classic range and roundrobin eagerly (`_reconcile_eager`).

The client's half of the protocol: `Membership` is what the member knows of
itself, and each heartbeat's response is reconciled, revoking first and then
assigning (S6.2). The coordinator's half is `lakelog.coordinator.group`.

`max.poll.interval.ms` is enforced as librdkafka enforces it: an application
that goes longer than it between two polls (on the consumer's clock, from the
end of one poll to the start of the next) has left the group. Its next poll
leaves (member epoch -1, -2 for a static member) and returns one message
carrying _MAX_POLL_EXCEEDED; the poll after loses the partitions (`on_lost`,
else `on_revoke`; nothing is committed) and joins again with epoch 0.
"""

from __future__ import annotations

import logging

from lakelog.client.consumer.fetcher import Fetcher
from lakelog.client.consumer.metadata import Metadata
from lakelog.client.consumer.offsets import OffsetCommits
from lakelog.client.consumer.state import ConsumerState, Membership, RebalanceCallback, state_error
from lakelog.client.consumer.subscription import Subscription
from lakelog.client.types import OFFSET_INVALID, Message, TopicPartition
from lakelog.coordinator.group import LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH, GroupMetadata, Heartbeat
from lakelog.errors import (
    FencedInstanceId,
    FencedMemberEpoch,
    InvalidRequest,
    InvalidType,
    KafkaError,
    KafkaException,
    RetriableError,
    UnknownMemberId,
)
from lakelog.typedef import TopicPartitionKey

logger = logging.getLogger(__name__)

# Heartbeats one poll may send in a row to finish a revocation (each reports a smaller owned set).
MAX_HEARTBEATS_PER_POLL = 4


class GroupMembership:
    """A Consumer as a group member (its state's `membership`), over its fetcher, metadata and offsets.

    `consumer`: what rebalance callbacks get as their first argument."""

    def __init__(
        self, state: ConsumerState, fetcher: Fetcher, metadata: Metadata, offsets: OffsetCommits, consumer: object
    ) -> None:
        self._state = state
        self._fetcher = fetcher
        self._metadata = metadata
        self._offsets = offsets
        self._consumer = consumer

    # -- group membership (S6) -----------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join (or change the subscription of) the group `group.id`; partitions come through `poll()`.

        A name starting with `^` is a regular expression over the root's topics
        (`metadata`). Callbacks get `(consumer, [TopicPartition])` for the
        partitions added, revoked, or lost (fenced; `on_revoke` is called if
        `on_lost` is not set).
        """
        self._state.check_open()
        self._state.require_group("subscribe")
        if not isinstance(topics, (list, tuple)):
            raise InvalidType("expected list of topic unicode strings")
        if not topics:
            raise InvalidRequest("subscribe takes a non-empty list of topic names")
        subscription = Subscription.parse(topics)
        for name, callback in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)):
            if callback is not None and not callable(callback):
                raise InvalidType(f"{name} expects a callable")
        if self._state.membership is None and self._state.assigned:
            raise state_error("subscribe() while partitions are assigned by assign(): unassign() first")
        # The names are resolved (patterns matched, missing topics reported) by the next poll, before it heartbeats.
        if self._state.membership is None:
            self._state.membership = Membership(subscription.names, subscription, on_assign, on_revoke, on_lost)
            self._state.last_poll_s = None
        else:
            membership = self._state.membership
            membership.subscription, membership.next_heartbeat = subscription, 0.0
            membership.on_assign, membership.on_revoke, membership.on_lost = on_assign, on_revoke, on_lost

    def unsubscribe(self) -> None:
        """Revoke every partition (`on_revoke`) and leave the group (member epoch -1)."""
        self._state.check_open()
        if self._state.membership is not None:
            self.leave(LEAVE_GROUP_EPOCH)

    def memberid(self) -> str | None:
        """This member's id: made by the client when it was created (KIP-848 with KIP-1082), so set before the first
        poll; the one the coordinator holds once joined. Under the classic protocol the coordinator's, None until
        joined. None without group.id."""
        self._state.check_open()
        membership = self._state.membership
        if membership is not None and membership.member_id:
            return membership.member_id
        return None if self._state.protocol.classic else self._state.client_member_id

    def consumer_group_metadata(self) -> GroupMetadata:
        """Who commits, at which member epoch (KIP-447): pass it to `Producer.send_offsets_to_transaction`.

        If partitions were revoked and the coordinator has not yet moved the
        member epoch past that revocation, the revocation is reported first, so
        a transaction never sends offsets at a revocation epoch (S6.6).
        """
        self._state.check_open()
        group_id = self._state.require_group("consumer_group_metadata")
        membership = self._state.membership
        if membership is None:
            return GroupMetadata(group_id)
        if membership.on_revocation_epoch() and not membership.busy:
            self.poll_group(force=True)
        return GroupMetadata(group_id, membership.member_id, membership.member_epoch, self._state.instance_id)

    # -- internals: the group protocol -------------------------------------------------

    def poll_group(self, force: bool = False) -> None:
        """Heartbeat when due (or `force`), and once more at once after every revocation, so the member
        epoch moves past the revocation before poll returns (S6.2, S6.6)."""
        membership = self._state.membership
        if membership is None or membership.busy:
            return
        membership.busy = True
        try:
            if membership.fenced is not None:
                self._lose(membership.fenced)
                force = True
            resolved = self._metadata.refresh_subscription(membership.subscription)
            if resolved is not None and resolved != membership.topics:
                self._state.logger.info(
                    "group %s: the subscription now stands for topics %s", self._state.group_id, list(resolved)
                )
                membership.topics = resolved
                force = True
            for _ in range(MAX_HEARTBEATS_PER_POLL):
                if not force and self._state.now_s() < membership.next_heartbeat:
                    return
                force = self._heartbeat(membership)
        finally:
            membership.busy = False

    def _heartbeat(self, membership: Membership) -> bool:
        """One heartbeat and what follows from its response; True if another one should follow at once."""
        request = Heartbeat(
            self._state.require_group("subscribe"),  # a member has a group.id: subscribe() required it
            # Joining: the id this client made (KIP-1082); under classic the coordinator makes it.
            membership.member_id or ("" if self._state.protocol.classic else self._state.client_member_id or ""),
            membership.member_epoch,
            membership.topics,
            frozenset(self._state.assigned),
            self._state.instance_id,
            self._state.config["session.timeout.ms"],
            self._state.config["max.poll.interval.ms"],
        )
        membership.next_heartbeat = self._state.now_s() + self._state.config["heartbeat.interval.ms"] / 1000
        try:
            response = self._state.coordinator().heartbeat(request)
        except (UnknownMemberId, FencedMemberEpoch) as error:
            self._lose(error)
            return True
        except FencedInstanceId:
            self._state.assigned, self._state.stored, self._state.membership = {}, {}, None
            raise
        except RetriableError as error:
            if self._state.error_cb is not None:
                self._state.error_cb(error.error)
            return False
        known_epoch = membership.member_epoch
        membership.member_id, membership.member_epoch = response.member_id, response.member_epoch
        if self._state.protocol.eager:
            return self._reconcile_eager(membership, known_epoch, response.assignment)
        return self._reconcile(membership, response.assignment)

    def _reconcile_eager(self, membership: Membership, known_epoch: int, target: frozenset[TopicPartitionKey]) -> bool:
        """The classic eager protocol (range, roundrobin): any rebalance (a new member epoch, or a changed
        assignment) revokes every owned partition (`on_revoke` with all of them) and then gives the whole new
        assignment (`on_assign`), which the callback may take with assign(); True to heartbeat again at once.

        The coordinator still decides with its rules (S6.2): only what it took away is a revocation there (S6.6),
        and the whole assignment is given once the coordinator has moved the member past it."""
        owned = set(self._state.assigned)
        if membership.member_epoch == known_epoch and owned == target:
            return False
        taken = sorted(owned - target)
        if owned:
            revoked = [TopicPartition(*tp, self._fetcher.position_of(tp)) for tp in sorted(owned)]
            self._state.logger.info(
                "group %s member %s (epoch %d): rebalance, revoking all of %s",
                self._state.group_id,
                membership.member_id,
                membership.member_epoch,
                _names(sorted(owned)),
            )
            if taken:
                membership.next_heartbeat = 0.0
                membership.revocation_epoch = membership.member_epoch  # S6.6, as in _reconcile
            try:
                membership.in_callback = "on_revoke"
                try:
                    self._offsets.auto_commit(sorted(owned))
                finally:
                    membership.in_callback = None
                self._callback(membership, "on_revoke", membership.on_revoke, revoked)
            finally:
                self._state.assigned, self._state.stored = {}, {}
            if taken:
                return True  # the whole assignment comes once the coordinator took the revocation
        partitions = [TopicPartition(*tp) for tp in sorted(target)]
        self._state.logger.info(
            "group %s member %s (epoch %d): assigned %s",
            self._state.group_id,
            membership.member_id,
            membership.member_epoch,
            _names(sorted(target)),
        )
        membership.assigned_by_callback = False
        try:
            self._callback(membership, "on_assign", membership.on_assign, partitions)
        finally:
            if not membership.assigned_by_callback:
                self._fetcher.add(partitions)
        return False

    def _reconcile(self, membership: Membership, target: frozenset[TopicPartitionKey]) -> bool:
        """Revoke first, then assign (S6.2); True if partitions were revoked (to be reported at once)."""
        revoked = sorted(set(self._state.assigned) - target)
        if revoked:
            self._state.logger.info(
                "group %s member %s (epoch %d): revoking %s",
                self._state.group_id,
                membership.member_id,
                membership.member_epoch,
                _names(revoked),
            )
            membership.next_heartbeat = 0.0
            # S6.6: no commit outside on_revoke until the member epoch moves past this one.
            membership.revocation_epoch = membership.member_epoch
            partitions = [TopicPartition(*tp, self._fetcher.position_of(tp)) for tp in revoked]
            try:
                # Like a commit inside on_revoke: the coordinator holds the epoch bump until the report.
                membership.in_callback = "on_revoke"
                try:
                    self._offsets.auto_commit(revoked)
                finally:
                    membership.in_callback = None
                self._callback(membership, "on_revoke", membership.on_revoke, partitions)
            finally:
                for tp in revoked:
                    self._state.assigned.pop(tp, None)
                    self._state.stored.pop(tp, None)
        added = sorted(target - set(self._state.assigned))
        # A revocation is followed by an assign callback even when nothing is added (an empty list), as
        # librdkafka ends every incremental rebalance with one.
        if added or revoked:
            if added:
                self._state.logger.info(
                    "group %s member %s (epoch %d): assigned %s",
                    self._state.group_id,
                    membership.member_id,
                    membership.member_epoch,
                    _names(added),
                )
            partitions = [TopicPartition(*tp) for tp in added]
            try:
                self._callback(membership, "on_assign", membership.on_assign, partitions)
            finally:
                self._fetcher.add([tp for tp in partitions if (tp.topic, tp.partition) not in self._state.assigned])
        return bool(revoked)

    def max_poll_exceeded(self) -> Message | None:
        """The application went longer than max.poll.interval.ms without polling: leave the group and return
        the _MAX_POLL_EXCEEDED message this poll delivers; the next poll loses the partitions and joins again."""
        membership, last = self._state.membership, self._state.last_poll_s
        if membership is None or last is None or not membership.member_id or membership.fenced is not None:
            return None
        limit_ms = self._state.config["max.poll.interval.ms"]
        exceeded_ms = round((self._state.now_s() - last) * 1000) - limit_ms
        if exceeded_ms <= 0:
            return None
        reason = f"Application maximum poll interval ({limit_ms}ms) exceeded by {exceeded_ms}ms"
        self._state.logger.warning(
            "group %s member %s: %s: leaving the group", self._state.group_id, membership.member_id, reason
        )
        self._send_leave(membership, LEAVE_GROUP_EPOCH if self._state.instance_id is None else LEAVE_GROUP_STATIC_EPOCH)
        error = KafkaError(KafkaError._MAX_POLL_EXCEEDED, reason)
        # Out of the group now: the next poll loses the partitions (on_lost, nothing committed) and joins again.
        membership.fenced = KafkaException(error)
        return Message(None, None, OFFSET_INVALID, error=error)

    def _lose(self, error: KafkaException) -> None:
        """The coordinator fenced this member: its partitions are lost (`on_lost`, else `on_revoke`), and it
        joins again with epoch 0 under its own member id."""
        membership = self._state.membership
        assert membership is not None
        if isinstance(error, FencedMemberEpoch) and membership.member_id:
            # The member is still in the group under its old id: leave, so its partitions move on now.
            self._send_leave(membership, LEAVE_GROUP_EPOCH)
        lost = [TopicPartition(*tp, self._fetcher.position_of(tp)) for tp in sorted(self._state.assigned)]
        self._state.logger.info(
            "group %s member %s (epoch %d) was fenced, its partitions %s are lost; joining again: %s",
            self._state.group_id,
            membership.member_id,
            membership.member_epoch,
            _names(sorted(self._state.assigned)),
            error,
        )
        membership.member_id, membership.member_epoch = "", 0
        # It joins again under the id it made at creation (KIP-1082: a client keeps its member id for life).
        membership.revocation_epoch, membership.fenced, membership.next_heartbeat = None, None, 0.0
        try:
            if lost:
                callback = membership.on_lost if membership.on_lost is not None else membership.on_revoke
                self._callback(membership, "on_lost", callback, lost)
        finally:
            self._state.assigned, self._state.stored = {}, {}

    def leave(self, epoch: int) -> None:
        membership = self._state.membership
        assert membership is not None
        try:
            if self._state.assigned:
                self._offsets.auto_commit(list(self._state.assigned))
                if membership.member_id:
                    membership.revocation_epoch = membership.member_epoch
                revoked = [TopicPartition(*tp, self._fetcher.position_of(tp)) for tp in sorted(self._state.assigned)]
                self._callback(membership, "on_revoke", membership.on_revoke, revoked)
        finally:
            self._state.assigned, self._state.stored = {}, {}
            if membership.member_id:
                self._send_leave(membership, epoch)
            self._state.membership = None

    def _send_leave(self, membership: Membership, epoch: int) -> None:
        request = Heartbeat(
            self._state.require_group("subscribe"),  # a member has a group.id: subscribe() required it
            membership.member_id,
            epoch,
            membership.topics,
            frozenset(),
            self._state.instance_id,
            self._state.config["session.timeout.ms"],
            self._state.config["max.poll.interval.ms"],
        )
        try:
            self._state.coordinator().heartbeat(request)
        except (UnknownMemberId, FencedMemberEpoch, FencedInstanceId, RetriableError):
            pass  # already out of the group, or the session timeout will remove it

    def _callback(
        self, membership: Membership, name: str, callback: RebalanceCallback | None, partitions: list[TopicPartition]
    ) -> None:
        if callback is None:
            return
        membership.in_callback = name
        try:
            callback(self._consumer, partitions)
        finally:
            membership.in_callback = None


def _names(partitions: list[TopicPartitionKey]) -> str:
    """`[orders-0, orders-1]`, as a log line shows partitions."""
    return "[" + ", ".join(f"{topic}-{partition}" for topic, partition in partitions) + "]"
