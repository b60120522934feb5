"""The consumer group coordinator on the tables: `__consumer_offsets` logs (S6, S7).

Every request runs a pure handler (`membership`, `offsets`) on the state replayed from the
group's `__consumer_offsets/<n>` partition and appends its records with
`CoordinatorLog.run`, decided on the exact log end offset it follows. The
transaction coordinator writes COMMIT/ABORT markers into the same partition
(a transaction that sent offsets has added `("__consumer_offsets", n)`), and
replay turns a producer's pending offsets into committed ones or drops them.

A row that does not decode sets its group aside (lakelog.coordinator.group.replay_corrupt):
every request to that group, and its description, is `CorruptRecord` naming the
table and offset of the row; the other groups of the partition are served as before.
The way out is explicit: `delete_group(..., discard_corrupt=True)` writes the group's
deletion, which replay takes even from a set-aside group, discarding its offsets.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakelog import config as config_module
from lakelog.coordinator import group as handlers
from lakelog.coordinator.group import (
    Group,
    GroupConfig,
    GroupMetadata,
    GroupState,
    Heartbeat,
    HeartbeatResponse,
    OffsetRecord,
    TopicPartitionKey,
)
from lakelog.coordinator.group.types import GroupOutcome
from lakelog.coordinator.runtime.state_log import CoordinatorLog, StateCodec
from lakelog.errors import (
    CorruptRecord,
    FencedInstanceId,
    FencedMemberEpoch,
    IllegalGeneration,
    KafkaException,
    StaleMemberEpoch,
    UnknownMemberId,
    UnknownTopicOrPartition,
)
from lakelog.log import PartitionLog, topic_config
from lakelog.log.partition import Clock, wall_clock_ms
from lakelog.log.topics import existing_internal_partitions, open_internal_partition
from lakelog.log.verification import TransactionVerification, verify_write
from lakelog.store import Location
from lakelog.store.io.retry import DEFAULT_POLICY, RetryPolicy

logger = logging.getLogger(__name__)

CONSUMER_OFFSETS_LOG = "__consumer_offsets"


class GroupCoordinator:
    """The group coordinator of one root; cheap to create, safe to use from many processes at once."""

    def __init__(
        self,
        root: str | Location,
        broker_config: Mapping[str, Any] | None = None,
        *,
        assignor: str | None = None,
        group_config: GroupConfig | None = None,
        clock: Clock = wall_clock_ms,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        """Settings come from the broker config (`lakelog/conf/broker.properties`), with the `assignor` a
        member asked for; `group_config` replaces them all (tests). `retry` times the retries of lost races."""
        self.root = root
        self.retry = retry
        broker = config_module.load("broker", broker_config)
        self._requested_partitions = broker["offsets.topic.num.partitions"]
        self.group_config = group_config or GroupConfig.from_broker_config(broker, assignor)
        self._clock = clock
        self._logs: dict[int, CoordinatorLog[GroupState]] = {}
        self._num_partitions: int | None = None
        self._topic_partitions: dict[str, int] = {}

    # -- membership (S6.2, S6.3, S6.5) ------------------------------------------------------

    def heartbeat(self, request: Heartbeat) -> HeartbeatResponse:
        """Join, heartbeat or leave; the response carries the member's epoch and the partitions it owns now."""
        # KIP-1082: a joining member brings the id its client made; one without (or one the group still holds) gets one.
        new_member_id = (request.member_id or uuid.uuid4().hex) if request.member_epoch == 0 else None

        def decide(state: GroupState) -> GroupOutcome[HeartbeatResponse]:
            group = state.group(request.group_id)
            joining = new_member_id
            if joining is not None and group is not None and joining in group.members:
                joining = uuid.uuid4().hex
            # A new target assigns the topics of every member, not only the requester's.
            topics = set(request.subscribed_topics)
            if group is not None:
                topics.update(t for member in group.members.values() for t in member.metadata.subscribed_topics)
            counts = self._partition_counts(topics)
            # S6.5 without a sweep: the other members past their session timeout are removed in this write.
            return handlers.heartbeat_expiring(group, request, counts, self._clock(), self.group_config, joining)

        return self._run(request.group_id, decide)

    # -- offsets (S6.1, S6.4, S7) -------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        offsets: Mapping[TopicPartitionKey, tuple[int, str | None]],
        instance_id: str | None = None,
    ) -> dict[TopicPartitionKey, int]:
        """Commit offsets (the next offset to read) as the member at `member_epoch`; S6.4 decides."""
        return self._run(
            group_id,
            lambda state: handlers.commit_offsets(
                state.group(group_id),
                group_id,
                member_id,
                member_epoch,
                offsets,
                self._clock(),
                instance_id,
                self.group_config,
            ),
        )

    def commit_transactional_offsets(
        self,
        metadata: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartitionKey, tuple[int, str | None]],
        *,
        transaction: TransactionVerification | None = None,
    ) -> dict[TopicPartitionKey, int]:
        """Write offsets pending in the producer's transaction (S7.1); group metadata checked as S7.2 says.

        The transaction must hold the group's `__consumer_offsets` partition, verified with
        `transaction`'s coordinator (S4.4; InvalidTxnState without one): offsets no marker
        would ever reach are never written. A decision at a new log position verifies again."""
        group_log = self._log_of(metadata.group_id)
        topic, partition = self.offsets_partition(metadata.group_id)
        verified_at: set[int] = set()

        def decide(state: GroupState) -> GroupOutcome[dict[TopicPartitionKey, int]]:
            outcome = handlers.commit_transactional_offsets(
                state, metadata, producer_id, producer_epoch, offsets, self._clock(), self.group_config
            )
            if outcome.records and group_log.position not in verified_at:
                try:
                    verify_write(transaction, producer_id, producer_epoch, topic, partition, group_log.log.version)
                except KafkaException as error:
                    return handlers.Outcome(error=error)
                verified_at.add(group_log.position)
            return outcome

        return self._run(metadata.group_id, decide)

    def check_transactional_offsets(
        self,
        metadata: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartitionKey, tuple[int, str | None]],
    ) -> None:
        """Raise what `commit_transactional_offsets` would refuse for the group metadata (S7.2), writing nothing:
        checked before a transaction adds the offsets partition (S8.3). A refusal holds on the latest state; a pass
        on the state in hand costs no read (the commit decides again on the latest)."""
        group_log = self._log_of(metadata.group_id)

        def check(state: GroupState) -> GroupOutcome[Any]:
            return handlers.commit_transactional_offsets(
                state, metadata, producer_id, producer_epoch, offsets, self._clock(), self.group_config
            )

        outcome = check(group_log.state)
        if not outcome.ok:
            outcome = check(group_log.catch_up())
        if outcome.error is not None:
            raise outcome.error

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartitionKey] | None = None, require_stable: bool = True
    ) -> dict[TopicPartitionKey, OffsetRecord | None]:
        """Committed offsets; with `require_stable` (read_committed consumers) UnstableOffsetCommit while a
        transactional commit of an asked partition is pending (S7.3)."""
        partitions = None if partitions is None else list(partitions)
        return self._run(group_id, lambda state: handlers.fetch_offsets(state.group(group_id), partitions, require_stable))

    def offsets_partition(self, group_id: str) -> TopicPartitionKey:
        """The `__consumer_offsets` partition a transaction adds before it sends this group's offsets."""
        return CONSUMER_OFFSETS_LOG, handlers.partition_for_group(group_id, self.num_partitions)

    def offsets_log(self, partition: int) -> PartitionLog:
        """The open `__consumer_offsets` partition, to lend to the transaction coordinator for its markers."""
        return self._log(partition).log

    # -- admin and the sweep ----------------------------------------------------------------------

    def describe(self, group_id: str) -> Group | None:
        """The group's state, None if it does not exist; CorruptRecord if a row of it does not decode."""
        state = self._log_of(group_id).catch_up()
        if group_id in state.corrupt:
            raise state.corrupt[group_id].error(group_id)
        return state.group(group_id)

    def corrupt_groups(self) -> dict[str, CorruptRecord]:
        """Every group set aside by a row that does not decode, with the error its requests get."""
        corrupt: dict[str, CorruptRecord] = {}
        for partition in existing_internal_partitions(self.root, CONSUMER_OFFSETS_LOG):
            for group_id, row in self._log(partition).catch_up().corrupt.items():
                corrupt[group_id] = row.error(group_id)
        return dict(sorted(corrupt.items()))

    def list_groups(self) -> list[Group]:
        groups: list[Group] = []
        for partition in existing_internal_partitions(self.root, CONSUMER_OFFSETS_LOG):
            groups.extend(self._log(partition).catch_up().groups.values())
        return sorted(groups, key=lambda group: group.group_id)

    def delete_group(self, group_id: str, *, discard_corrupt: bool = False) -> None:
        """Delete an empty group and its committed offsets (GroupIdNotFound, NonEmptyGroup).

        A group set aside by a row that does not decode is refused with that CorruptRecord like every other
        request to it, unless `discard_corrupt`: then its deletion record is written (one conditional append,
        decided on the latest state), its committed offsets are discarded with a WARNING naming the row, and
        the group starts again empty. `discard_corrupt` on a group that is not set aside is InvalidRequest.
        Nothing is written by a refusal (S8.3).
        """
        if not discard_corrupt:
            self._run(group_id, lambda state: handlers.delete_group(state.group(group_id), group_id))
            return
        row = self._run(
            group_id, lambda state: handlers.delete_corrupt_group(state.corrupt.get(group_id), group_id), served=False
        )
        logger.warning(
            "group %s deleted with its corrupt record at %s offset %d (%s): its committed offsets are discarded, "
            "it starts again empty",
            group_id,
            row.table,
            row.offset,
            row.reason,
        )

    def sweep(self) -> list[tuple[str, str]]:
        """Remove members past their session or rebalance timeout (S6.5, S8.2); returns (group, member) removed."""
        removed = []
        for partition in existing_internal_partitions(self.root, CONSUMER_OFFSETS_LOG):
            offsets_log = self._log(partition)
            for group_id, group in list(offsets_log.catch_up().groups.items()):
                if not handlers.expire_members(group, {}, self._clock()).records:
                    continue
                subscribed = {t for m in group.members.values() for t in m.metadata.subscribed_topics}
                counts = self._partition_counts(subscribed)
                outcome = offsets_log.run(
                    _served(
                        group_id,
                        # Defaults bind this iteration's group and counts (the closure runs within it).
                        lambda state, group_id=group_id, counts=counts: handlers.expire_members(
                            state.group(group_id) or Group(group_id), counts, self._clock()
                        ),
                    )
                )
                for member_id in outcome.response or []:
                    # S6.5: its lease ran out; its next heartbeat or commit is fenced (UnknownMemberId).
                    logger.info("group %s: member %s removed, its liveness lease ran out", group_id, member_id)
                    removed.append((group_id, member_id))
        return removed

    # -- internals -------------------------------------------------------------------------------

    def _run(self, group_id: str, handler: Any, *, served: bool = True) -> Any:
        """Decide `handler` on the group's latest state and append its records; `served=False` only for a
        handler that decides on the set-aside state itself (deleting a corrupt group)."""
        group_log = self._log_of(group_id)
        if served:
            handler = _served(group_id, handler)
        # Rows our handle holds already (a transaction's marker written through it) first: a look at a state
        # behind them would be answered again after them (a transactional offset commit verified twice).
        if handler(group_log.replay_held()).records:
            # It will write: decide on the latest snapshot, or the append loses a race to the rows this
            # process has not read yet and backs off (every member's writes made every other one wait).
            group_log.catch_up()
        before = _summary(group_log.state.group(group_id))
        outcome = group_log.run(handler)
        if outcome.records:
            _log_transition(group_id, before, _summary(group_log.state.group(group_id)))
        if not outcome.ok:
            if isinstance(outcome.error, _FENCING):
                logger.info("group %s: refused a fenced member: %s", group_id, outcome.error)
            raise outcome.error
        return outcome.response

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        counts = {}
        for topic in topics:
            if topic not in self._topic_partitions:
                try:
                    # A topic's partition count is fixed at creation: read once per coordinator.
                    self._topic_partitions[topic] = topic_config(self.root, topic).num_partitions
                except UnknownTopicOrPartition:
                    counts[topic] = 0  # subscribed before it exists: assigned once it is created
                    continue
            counts[topic] = self._topic_partitions[topic]
        return counts

    @property
    def num_partitions(self) -> int:
        if self._num_partitions is None:
            self._num_partitions = self._log(0).log.config.num_partitions
        return self._num_partitions

    def _log_of(self, group_id: str) -> CoordinatorLog[GroupState]:
        error = handlers.check_group_id(group_id)
        if error is not None:
            raise error
        return self._log(handlers.partition_for_group(group_id, self.num_partitions))

    def _log(self, partition: int) -> CoordinatorLog[GroupState]:
        if partition not in self._logs:
            partition_log = open_internal_partition(
                self.root, CONSUMER_OFFSETS_LOG, partition, self._requested_partitions, self._clock
            )
            self._logs[partition] = CoordinatorLog(
                partition_log,
                GroupState(),
                lambda row: handlers.from_row(row),
                handlers.replay,
                handlers.record_key,
                apply_marker=handlers.replay_marker,
                codec=StateCodec(handlers.snapshot_of, handlers.state_from_snapshot),
                retry=self.retry,
                on_corrupt=handlers.replay_corrupt,
            )
        return self._logs[partition]


def _served(group_id: str, handler: Any) -> Any:
    """`handler`, refused with CorruptRecord while the group is set aside by a row that does not decode."""

    def decide(state: GroupState) -> GroupOutcome[Any]:
        corrupt = state.corrupt.get(group_id)
        return handlers.Outcome(error=corrupt.error(group_id)) if corrupt is not None else handler(state)

    return decide


__all__ = ["CONSUMER_OFFSETS_LOG", "GroupCoordinator"]


# Refusals that fence a member (S6.4, S6.5, S7.2): each is an INFO line.
_FENCING = (FencedMemberEpoch, FencedInstanceId, UnknownMemberId, IllegalGeneration, StaleMemberEpoch)


@dataclass(frozen=True)
class _GroupSummary:
    """What a transition line compares: the group's epochs and each member's epoch."""

    group_epoch: int = 0
    target_epoch: int = 0
    member_epochs: tuple[tuple[str, int], ...] = ()


def _summary(group: Group | None) -> _GroupSummary:
    if group is None:
        return _GroupSummary()
    members = tuple(sorted((member_id, member.current.member_epoch) for member_id, member in group.members.items()))
    return _GroupSummary(group.group_epoch, group.target_epoch, members)


def _log_transition(group_id: str, before: _GroupSummary, after: _GroupSummary) -> None:
    """INFO lines for a committed change of membership or assignment (S6.2, S6.3); a lease renewal alone is DEBUG."""
    was, now = dict(before.member_epochs), dict(after.member_epochs)
    for member_id in sorted(now.keys() - was.keys()):
        logger.info("group %s: member %s joined (group epoch %d)", group_id, member_id, after.group_epoch)
    for member_id in sorted(was.keys() - now.keys()):
        logger.info("group %s: member %s left (group epoch %d)", group_id, member_id, after.group_epoch)
    if after.target_epoch != before.target_epoch:
        logger.info("group %s: new target assignment at epoch %d for %d member(s)", group_id, after.target_epoch, len(now))
    moved = sorted(m for m in now.keys() & was.keys() if now[m] != was[m])
    for member_id in moved:
        logger.info("group %s: member %s reconciled to epoch %d", group_id, member_id, now[member_id])
    if after == before:
        logger.debug("group %s: a write that changed no epoch (a lease renewal or an offset commit)", group_id)
