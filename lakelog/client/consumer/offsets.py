"""A `Consumer`'s offsets in its group: commit, committed, store_offsets, auto-commit, and the
committed offset a newly assigned partition starts at (S6.1, S6.4, S6.6, S7.3)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from lakelog.client.consumer.fetcher import Fetcher, fetched_key, fetched_offset, partition_list
from lakelog.client.consumer.state import ConsumerState, state_error
from lakelog.client.types import OFFSET_INVALID, Message, TopicPartition
from lakelog.coordinator.group import NO_MEMBER_EPOCH, OffsetRecord
from lakelog.errors import (
    InvalidRequest,
    KafkaError,
    KafkaException,
    StaleMemberEpoch,
    UnknownMemberId,
    UnstableOffsetCommit,
)
from lakelog.log import READ_COMMITTED, PartitionLog
from lakelog.typedef import TopicPartitionKey

logger = logging.getLogger(__name__)

# confluent-kafka's "no timeout" for blocking calls, capped so that nothing waits forever.
FOREVER_S = 86_400.0


class OffsetCommits:
    """A Consumer's offset commits and committed offsets (its state's `stored`, `last_committed`, `commit_reports`).

    `report_revocation()`: a heartbeat that reports a revocation, so the member epoch moves past it (S6.6)."""

    def __init__(self, state: ConsumerState, fetcher: Fetcher, report_revocation: Callable[[], None]) -> None:
        self._state = state
        self._fetcher = fetcher
        self._report_revocation = report_revocation

    # -- offsets (S6.1, S6.4, S6.6, S7.3) ---------------------------------------------

    def commit(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None, asynchronous: bool = True
    ) -> list[TopicPartition] | None:
        """Commit `message.offset() + 1`, or `offsets` as given, or else the stored offsets of the assignment.

        Synchronous: returns the committed partitions or raises (StaleMemberEpoch,
        UnknownMemberId, ...). Asynchronous: returns None; the result (error or
        None, partitions) goes to `on_commit`, served by the next poll.
        """
        self._state.check_open()
        self._state.require_group("commit")
        if message is not None and offsets is not None:
            raise InvalidRequest("commit takes a message or offsets, not both")
        wanted: dict[TopicPartitionKey, tuple[int, str | None]]
        if message is not None:
            wanted = dict([_next_offset(message, "commit")])
        elif offsets is not None:
            wanted = {}
            for tp in partition_list(offsets):
                if not isinstance(tp.offset, int) or isinstance(tp.offset, bool) or tp.offset < 0:
                    raise InvalidRequest(f"offset for {tp.topic}-{tp.partition} must be >= 0, not {tp.offset!r}")
                wanted[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        else:
            wanted = {tp: stored for tp, stored in self._state.stored.items() if tp in self._state.assigned}
        try:
            if not wanted:
                raise KafkaException(KafkaError(KafkaError._NO_OFFSET, "no stored offsets to commit"))
            committed = self._commit_offsets(wanted)
        except KafkaException as error:
            if not asynchronous:
                raise
            self._state.commit_reports.append((error.error, _topic_partitions(wanted)))
            return None
        if asynchronous:
            self._state.commit_reports.append((None, committed))
            return None
        return committed

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offsets (OFFSET_INVALID where none). In read_committed the fetch asks for
        stable offsets and retries while a transaction holds pending ones, up to `timeout`; then it
        raises UnstableOffsetCommit (S7.3)."""
        self._state.check_open()
        group_id = self._state.require_group("committed")
        keys = [(tp.topic, tp.partition) for tp in partition_list(partitions)]
        backoff = self._state.retry.start(FOREVER_S if timeout is None or timeout < 0 else timeout)
        while True:
            try:
                records = self._state.coordinator().fetch_offsets(group_id, keys, require_stable=self._require_stable)
                break
            except UnstableOffsetCommit:
                if not backoff.wait():
                    raise
        return [_committed_partition(key, records.get(key)) for key in keys]

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store `message.offset() + 1` (or `offsets`) for the next commit; needs enable.auto.offset.store=false."""
        self._state.check_open()
        if self._state.config["enable.auto.offset.store"]:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "store_offsets() needs enable.auto.offset.store=false"))
        if (message is None) == (offsets is None):
            raise InvalidRequest("store_offsets takes a message or offsets")
        wanted: dict[TopicPartitionKey, tuple[int, str | None]]
        if message is not None:
            wanted = dict([_next_offset(message, "store_offsets")])
        else:
            wanted = {}
            for tp in partition_list(offsets):
                if not isinstance(tp.offset, int) or isinstance(tp.offset, bool) or tp.offset < 0:
                    raise InvalidRequest(f"offset for {tp.topic}-{tp.partition} must be >= 0, not {tp.offset!r}")
                wanted[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        missing = sorted(tp for tp in wanted if tp not in self._state.assigned)
        if missing:
            raise state_error(f"cannot store offsets of partitions that are not assigned: {_names(missing)}")
        self._state.stored.update(wanted)

    # -- internals: offsets --------------------------------------------------------------

    @property
    def _require_stable(self) -> bool:
        return self._state.config["isolation.level"] == READ_COMMITTED

    def _commit_offsets(self, offsets: dict[TopicPartitionKey, tuple[int, str | None]]) -> list[TopicPartition]:
        """Commit as this member (or, assigned by hand, from outside the group protocol) after S6.6's check."""
        group_id = self._state.require_group("commit")
        membership = self._state.membership
        member_id, member_epoch = "", NO_MEMBER_EPOCH
        if membership is not None:
            if membership.on_revocation_epoch() and membership.in_callback != "on_revoke":
                if not membership.busy:
                    self._report_revocation()  # report the revocation: the coordinator moves the epoch past it
                if membership.on_revocation_epoch():
                    raise StaleMemberEpoch(
                        f"not committed: partitions were revoked at member epoch {membership.revocation_epoch} and "
                        "the coordinator has not moved the member past it yet (S6.6); poll, then commit again",
                        member_epoch=membership.member_epoch,
                    )
            member_id, member_epoch = membership.member_id, membership.member_epoch
        request = dict(offsets)  # metadata as given: None and '' come back from committed() as they went in
        try:
            self._state.coordinator().commit_offsets(group_id, member_id, member_epoch, request, self._state.instance_id)
        except UnknownMemberId as error:
            if membership is not None and member_id:
                membership.fenced = error
            raise
        for tp, (offset, _) in offsets.items():
            self._state.last_committed[tp] = offset
        return _topic_partitions(offsets)

    def maybe_auto_commit(self) -> None:
        if self._state.now_s() < self._state.next_auto_commit:
            return
        self._state.next_auto_commit = self._state.now_s() + self._state.config["auto.commit.interval.ms"] / 1000
        self.auto_commit(list(self._state.assigned))

    def auto_commit(self, partitions: list[TopicPartitionKey]) -> None:
        """enable.auto.commit: commit the stored offsets of `partitions` that moved; the result goes to on_commit."""
        if not self._state.config["enable.auto.commit"] or self._state.group_id is None:
            return
        wanted = {
            tp: self._state.stored[tp]
            for tp in partitions
            if tp in self._state.stored and self._state.last_committed.get(tp) != self._state.stored[tp][0]
        }
        if not wanted:
            return
        try:
            self._state.commit_reports.append((None, self._commit_offsets(wanted)))
        except KafkaException as error:
            self._state.commit_reports.append((error.error, _topic_partitions(wanted)))

    def serve_commit_reports(self) -> None:
        while self._state.commit_reports:
            error, partitions = self._state.commit_reports.popleft()
            if self._state.on_commit is not None:
                self._state.on_commit(error, partitions)

    def resolve_positions(self) -> None:
        """Start partitions without a position at the group's committed offset; in read_committed the
        fetch is stable, and partitions a pending transaction holds are asked again later (S7.3)."""
        now = self._state.now_s()
        wanted = [tp for tp, state in self._state.assigned.items() if state.position is None and state.resolve_after <= now]
        if not wanted or self._state.group_id is None:
            return
        try:
            records = self._state.coordinator().fetch_offsets(self._state.group_id, wanted, require_stable=self._require_stable)
        except UnstableOffsetCommit as error:
            held = {tuple(tp) for tp in getattr(error, "partitions", wanted)}
            # The broker's timer: a transaction past its timeout that holds these offsets is aborted (S4.7).
            finished = self._state.transaction_timer.held(f"group {self._state.group_id}'s committed offsets")
            for tp in wanted:
                if tp in held:
                    state = self._state.assigned[tp]
                    state.resolve_after = now if finished else now + self._state.retry.delay_s(state.resolve_retries)
                    state.resolve_retries += 1
            rest = [tp for tp in wanted if tp not in held]
            if not rest:
                return
            try:
                records = self._state.coordinator().fetch_offsets(self._state.group_id, rest, require_stable=self._require_stable)
            except UnstableOffsetCommit:
                return  # another transaction got there in between: next round
        for tp, record in records.items():
            assigned = self._state.assigned.get(tp)
            if assigned is not None and assigned.position is None:
                assigned.position = self._committed_start(assigned.log, record)

    def _committed_start(self, log: PartitionLog, record: OffsetRecord | None) -> int:
        if record is None:
            return self._fetcher.reset(log)
        log.refresh()
        if not log.log_start_offset() <= record.offset <= log.high_watermark():
            return self._fetcher.reset(log)
        return record.offset


def _topic_partitions(offsets: Mapping[TopicPartitionKey, tuple[int, str | None]]) -> list[TopicPartition]:
    return [
        TopicPartition(topic, partition, offset, metadata) for (topic, partition), (offset, metadata) in sorted(offsets.items())
    ]


def _committed_partition(tp: TopicPartitionKey, record: OffsetRecord | None) -> TopicPartition:
    if record is None:
        return TopicPartition(*tp, OFFSET_INVALID)
    return TopicPartition(*tp, record.offset, record.metadata)


def _names(partitions: list[TopicPartitionKey]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in partitions)


def _next_offset(message: Message, call: str) -> tuple[TopicPartitionKey, tuple[int, str | None]]:
    """The partition of a message poll() returned without an error, and the offset after it (what to commit)."""
    if not isinstance(message, Message) or message.error() is not None or message.offset() is None:
        raise InvalidRequest(f"{call}(message=...) takes a Message that poll() returned without an error")
    return fetched_key(message), (fetched_offset(message) + 1, None)
