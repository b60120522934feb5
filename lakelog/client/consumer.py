"""`Consumer`: confluent-kafka's consumer API over partition logs, with manual assignment or a group.

Each assigned partition keeps a position and a buffer of fetched rows; `poll`
serves partitions in turn. `isolation.level` is librdkafka's: `read_committed`
(the default) reads up to the last stable offset and never returns rows of open
or aborted transactions; `read_uncommitted` reads up to the high watermark. In
both, control rows (transaction markers) take offsets but are never returned, so
offsets a reader sees have gaps (S5.4): positions move past whatever a fetch
read, returned or not.

With `group.id`, `subscribe()` makes the consumer a member of a KIP-848 group:
`poll()`/`consume()` heartbeat through the group coordinator every
`heartbeat.interval.ms`, revoke what the coordinator takes away (`on_revoke`, then
the smaller owned set is reported at once so the member epoch moves on, S6.2) and
then assign what it gives (`on_assign`). A new partition starts at the group's
committed offset, fetched as a stable offset in read_committed (S7.3: while a
transaction holds pending offsets for it, the fetch is retried after a backoff
growing from `retry.backoff.ms` to `retry.backoff.max.ms`), else by
`auto.offset.reset`. After a revocation the consumer
commits nothing until its member epoch has moved past the revocation epoch
(S6.6), except inside `on_revoke`, where the coordinator holds the bump. A member
the coordinator fenced (UnknownMemberId, FencedMemberEpoch) loses its partitions
(`on_lost`) and joins again with epoch 0.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog import config
from lakelog.client.producer import split_callbacks
from lakelog.client.types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    Message,
    TopicPartition,
)
from lakelog.config import validate_name
from lakelog.coordinator.group import (
    LEAVE_GROUP_EPOCH,
    LEAVE_GROUP_STATIC_EPOCH,
    NO_MEMBER_EPOCH,
    GroupMetadata,
    Heartbeat,
    OffsetRecord,
)
from lakelog.coordinator.group_coordinator import GroupCoordinator
from lakelog.errors import (
    FencedInstanceId,
    FencedMemberEpoch,
    InvalidConfig,
    InvalidRequest,
    KafkaError,
    KafkaException,
    OffsetOutOfRange,
    RetriableError,
    StaleMemberEpoch,
    UnknownMemberId,
    UnstableOffsetCommit,
)
from lakelog.log import READ_COMMITTED, PartitionLog, open_partition
from lakelog.config import storage_options
from lakelog.store import check_root
from lakelog.store.retry import RetryPolicy

CALLBACK_KEYS = ("on_commit", "error_cb")
# How long poll() sleeps between looks at a partition that has nothing new.
IDLE_BACKOFF_S = 0.05
# Heartbeats one poll may send in a row to finish a revocation (each reports a smaller owned set).
MAX_HEARTBEATS_PER_POLL = 4
# confluent-kafka's "no timeout" for blocking calls, capped so that nothing waits forever.
FOREVER_S = 86_400.0

TopicPartitionKey = tuple[str, int]
RebalanceCallback = Callable[["Consumer", list[TopicPartition]], None]


@dataclass
class _Assigned:
    log: PartitionLog
    # None: not known yet; taken from the group's committed offset before the first fetch.
    position: int | None
    buffer: list[Message] = field(default_factory=list)
    # The offset of the last partition-EOF event: one event per offset the end is reached at, as librdkafka.
    eof_offset: int | None = None
    # When to ask for the committed offset again after a pending transaction held it (S7.3), and how often it did.
    resolve_after: float = 0.0
    resolve_retries: int = 0


@dataclass
class _Membership:
    """What a subscribed consumer knows of its membership (KIP-848's client-side member state)."""

    topics: tuple[str, ...]
    on_assign: RebalanceCallback | None
    on_revoke: RebalanceCallback | None
    on_lost: RebalanceCallback | None
    member_id: str = ""
    member_epoch: int = 0
    # S6.6: the member epoch partitions were last revoked at; None until a revocation.
    revocation_epoch: int | None = None
    next_heartbeat: float = 0.0
    # Inside a rebalance callback (on_revoke may commit: the coordinator holds the bump meanwhile).
    in_callback: str | None = None
    # Inside a heartbeat and what follows from it (no second heartbeat may start meanwhile).
    busy: bool = False
    # An error that showed this member fenced (from a commit); handled by the next poll.
    fenced: KafkaException | None = None

    def on_revocation_epoch(self) -> bool:
        return self.revocation_epoch is not None and self.member_epoch <= self.revocation_epoch


class Consumer:
    """A consumer reading the topics of `lakelog.root`, shaped like confluent_kafka.Consumer."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        values, callbacks = split_callbacks(conf, CALLBACK_KEYS)
        self.config = config.load("consumer", values)
        self._root = check_root(self.config["lakelog.root"], storage_options(self.config))
        # retry.backoff.ms / retry.backoff.max.ms: every retry of this consumer and of the coordinator it calls.
        self._retry = RetryPolicy.from_config(self.config)
        self._group_id: str | None = self.config["group.id"]
        self._instance_id: str | None = self.config["group.instance.id"]
        if self._instance_id is not None and self._group_id is None:
            raise InvalidConfig("group.instance.id needs group.id", key="group.instance.id")
        self._on_commit: Callable[[KafkaError | None, list[TopicPartition]], None] | None = callbacks.get("on_commit")
        self._error_cb: Callable[[KafkaError], None] | None = callbacks.get("error_cb")
        self._assigned: dict[TopicPartitionKey, _Assigned] = {}
        self._turn = 0
        self._closed = False
        self._groups: GroupCoordinator | None = None
        self._membership: _Membership | None = None
        # store_offsets / enable.auto.offset.store: the next offset to commit per partition, and its metadata.
        self._stored: dict[TopicPartitionKey, tuple[int, str | None]] = {}
        # What this consumer last committed per partition (auto-commit sends only what changed).
        self._last_committed: dict[TopicPartitionKey, int] = {}
        self._commit_reports: deque[tuple[KafkaError | None, list[TopicPartition]]] = deque()
        self._next_auto_commit = time.monotonic() + self.config["auto.commit.interval.ms"] / 1000

    # -- group membership (S6) -----------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join (or change the subscription of) the group `group.id`; partitions come through `poll()`.

        Callbacks get `(consumer, [TopicPartition])` for the partitions added,
        revoked, or lost (fenced; `on_revoke` is called if `on_lost` is not set).
        """
        self._check_open()
        self._require_group("subscribe")
        if not isinstance(topics, (list, tuple)) or not topics:
            raise InvalidRequest("subscribe takes a non-empty list of topic names")
        for name in topics:
            validate_name(name)
        for name, callback in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)):
            if callback is not None and not callable(callback):
                raise InvalidRequest(f"{name} must be callable, not {callback!r}")
        if self._membership is None and self._assigned:
            raise _state_error("subscribe() while partitions are assigned by assign(): unassign() first")
        subscribed = tuple(sorted(set(topics)))
        if self._membership is None:
            self._membership = _Membership(subscribed, on_assign, on_revoke, on_lost)
        else:
            membership = self._membership
            membership.topics, membership.next_heartbeat = subscribed, 0.0
            membership.on_assign, membership.on_revoke, membership.on_lost = on_assign, on_revoke, on_lost

    def unsubscribe(self) -> None:
        """Revoke every partition (`on_revoke`) and leave the group (member epoch -1)."""
        self._check_open()
        if self._membership is not None:
            self._leave(LEAVE_GROUP_EPOCH)

    def consumer_group_metadata(self) -> GroupMetadata:
        """Who commits, at which member epoch (KIP-447): pass it to `Producer.send_offsets_to_transaction`.

        If partitions were revoked and the coordinator has not yet moved the
        member epoch past that revocation, the revocation is reported first, so
        a transaction never sends offsets at a revocation epoch (S6.6).
        """
        self._check_open()
        group_id = self._require_group("consumer_group_metadata")
        membership = self._membership
        if membership is None:
            return GroupMetadata(group_id)
        if membership.on_revocation_epoch() and not membership.busy:
            self._poll_group(force=True)
        return GroupMetadata(group_id, membership.member_id, membership.member_epoch, self._instance_id)

    # -- assignment ----------------------------------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment; each partition starts at its offset, the committed offset, or by auto.offset.reset."""
        self._check_open()
        self._check_manual("assign")
        partitions = _partition_list(partitions)
        self._assigned = {}
        self._stored = {}
        self._add(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        self._check_manual("incremental_assign")
        self._add(_partition_list(partitions))

    def unassign(self) -> None:
        self._check_open()
        self._check_manual("unassign")
        self._assigned = {}
        self._stored = {}

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        self._check_manual("incremental_unassign")
        for tp in _partition_list(partitions):
            self._assigned.pop((tp.topic, tp.partition), None)
            self._stored.pop((tp.topic, tp.partition), None)

    def assignment(self) -> list[TopicPartition]:
        self._check_open()
        return [TopicPartition(topic, partition) for topic, partition in self._assigned]

    # -- reading ---------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message (or partition-EOF event) of any assigned partition, or None on timeout."""
        messages = self.consume(1, -1 if timeout is None else timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to `num_messages` messages, waiting at most `timeout` seconds (-1: forever) for the first.

        In a group this is also where the consumer heartbeats, rebalances
        (callbacks run here) and auto-commits, as in confluent-kafka.
        """
        self._check_open()
        if not isinstance(num_messages, int) or isinstance(num_messages, bool) or not 1 <= num_messages <= 1_000_000:
            raise InvalidRequest(f"num_messages must be an integer from 1 to 1000000, not {num_messages!r}")
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            self._serve_commit_reports()
            self._poll_group()
            self._maybe_auto_commit()
            self._resolve_positions()
            out: list[Message] = []
            for state in self._in_turn():
                if state.position is None:
                    continue
                self._fill(state)
                while state.buffer and len(out) < num_messages:
                    out.append(state.buffer.pop(0))
                if len(out) >= num_messages:
                    break
            if out:
                if self.config["enable.auto.offset.store"] and self._group_id is not None:
                    for message in out:
                        if message.error() is None:
                            self._stored[(message.topic(), message.partition())] = (message.offset() + 1, None)
                return out
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return []
            wait = IDLE_BACKOFF_S
            if deadline is not None:
                wait = min(wait, deadline - now)
            if self._membership is not None:
                wait = min(wait, max(0.0, self._membership.next_heartbeat - now))
            time.sleep(max(0.0, wait))
            for state in self._assigned.values():
                state.log.refresh()

    def seek(self, partition: TopicPartition) -> None:
        """Move a partition's position; the next message read is at that offset (or after).

        `OFFSET_STORED` / `OFFSET_INVALID` go back to the group's committed offset.
        """
        self._check_open()
        state = self._assigned.get((partition.topic, partition.partition))
        if state is None:
            raise _state_error(f"{partition.topic}-{partition.partition} is not assigned")
        state.position = self._start_offset(state.log, partition.offset)
        state.buffer.clear()
        state.eof_offset = None
        state.resolve_after = 0.0
        state.resolve_retries = 0

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next message each partition will return (OFFSET_INVALID if not known yet)."""
        self._check_open()
        result = []
        for tp in _partition_list(partitions):
            state = self._assigned.get((tp.topic, tp.partition))
            offset = OFFSET_INVALID
            if state is not None and state.position is not None:
                offset = state.buffer[0].offset() if state.buffer else state.position
            result.append(TopicPartition(tp.topic, tp.partition, offset))
        return result

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high): the log start offset, and the end this consumer reads to.

        The end is the last stable offset in read_committed and the high
        watermark in read_uncommitted, as librdkafka reports it (S5.1).
        """
        self._check_open()
        state = self._assigned.get((partition.topic, partition.partition))
        log = state.log if state is not None else open_partition(self._root, partition.topic, partition.partition)
        if not cached:
            log.refresh()
        return log.log_start_offset(), self._end_offset(log)

    # -- offsets (S6.1, S6.4, S6.6, S7.3) ---------------------------------------------

    def commit(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None, asynchronous: bool = True
    ) -> list[TopicPartition] | None:
        """Commit `message.offset() + 1`, or `offsets` as given, or else the stored offsets of the assignment.

        Synchronous: returns the committed partitions or raises (StaleMemberEpoch,
        UnknownMemberId, ...). Asynchronous: returns None; the result (error or
        None, partitions) goes to `on_commit`, served by the next poll.
        """
        self._check_open()
        self._require_group("commit")
        if message is not None and offsets is not None:
            raise InvalidRequest("commit takes a message or offsets, not both")
        if message is not None:
            if not isinstance(message, Message) or message.error() is not None or message.offset() is None:
                raise InvalidRequest("commit(message=...) takes a Message that poll() returned without an error")
            wanted = {(message.topic(), message.partition()): (message.offset() + 1, None)}
        elif offsets is not None:
            wanted = {}
            for tp in _partition_list(offsets):
                if not isinstance(tp.offset, int) or isinstance(tp.offset, bool) or tp.offset < 0:
                    raise InvalidRequest(f"offset for {tp.topic}-{tp.partition} must be >= 0, not {tp.offset!r}")
                wanted[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        else:
            wanted = {tp: stored for tp, stored in self._stored.items() if tp in self._assigned}
        try:
            if not wanted:
                raise KafkaException(KafkaError(KafkaError._NO_OFFSET, "no stored offsets to commit"))
            committed = self._commit_offsets(wanted)
        except KafkaException as error:
            if not asynchronous:
                raise
            self._commit_reports.append((error.error, _topic_partitions(wanted)))
            return None
        if asynchronous:
            self._commit_reports.append((None, committed))
            return None
        return committed

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offsets (OFFSET_INVALID where none). In read_committed the fetch asks for
        stable offsets and retries while a transaction holds pending ones, up to `timeout`; then it
        raises UnstableOffsetCommit (S7.3)."""
        self._check_open()
        group_id = self._require_group("committed")
        keys = [(tp.topic, tp.partition) for tp in _partition_list(partitions)]
        backoff = self._retry.start(FOREVER_S if timeout is None or timeout < 0 else timeout)
        while True:
            try:
                records = self._coordinator().fetch_offsets(group_id, keys, require_stable=self._require_stable)
                break
            except UnstableOffsetCommit:
                if not backoff.wait():
                    raise
        return [_committed_partition(key, records.get(key)) for key in keys]

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store `message.offset() + 1` (or `offsets`) for the next commit; needs enable.auto.offset.store=false."""
        self._check_open()
        if self.config["enable.auto.offset.store"]:
            raise KafkaException(
                KafkaError(KafkaError._INVALID_ARG, "store_offsets() needs enable.auto.offset.store=false")
            )
        if (message is None) == (offsets is None):
            raise InvalidRequest("store_offsets takes a message or offsets")
        if message is not None:
            if not isinstance(message, Message) or message.error() is not None or message.offset() is None:
                raise InvalidRequest("store_offsets(message=...) takes a Message that poll() returned without an error")
            wanted = {(message.topic(), message.partition()): (message.offset() + 1, None)}
        else:
            wanted = {}
            for tp in _partition_list(offsets):
                if not isinstance(tp.offset, int) or isinstance(tp.offset, bool) or tp.offset < 0:
                    raise InvalidRequest(f"offset for {tp.topic}-{tp.partition} must be >= 0, not {tp.offset!r}")
                wanted[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        missing = sorted(tp for tp in wanted if tp not in self._assigned)
        if missing:
            raise _state_error(f"cannot store offsets of partitions that are not assigned: {_names(missing)}")
        self._stored.update(wanted)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Commit stored offsets (enable.auto.commit), revoke and leave the group, serve commit callbacks."""
        if self._closed:
            return
        try:
            if self._membership is not None:
                # A static member's leave keeps its assignment for its next instance (KIP-345/848).
                self._leave(LEAVE_GROUP_EPOCH if self._instance_id is None else LEAVE_GROUP_STATIC_EPOCH)
            elif self._assigned:
                self._auto_commit(list(self._assigned))
            self._serve_commit_reports()
        finally:
            self._assigned = {}
            self._stored = {}
            self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals: the group protocol -------------------------------------------------

    def _coordinator(self) -> GroupCoordinator:
        if self._groups is None:
            self._groups = GroupCoordinator(self._root, assignor=self.config["group.remote.assignor"], retry=self._retry)
        return self._groups

    def _poll_group(self, force: bool = False) -> None:
        """Heartbeat when due (or `force`), and once more at once after every revocation, so the member
        epoch moves past the revocation before poll returns (S6.2, S6.6)."""
        membership = self._membership
        if membership is None or membership.busy:
            return
        membership.busy = True
        try:
            if membership.fenced is not None:
                self._lose(membership.fenced)
                force = True
            for _ in range(MAX_HEARTBEATS_PER_POLL):
                if not force and time.monotonic() < membership.next_heartbeat:
                    return
                force = self._heartbeat(membership)
        finally:
            membership.busy = False

    def _heartbeat(self, membership: _Membership) -> bool:
        """One heartbeat and what follows from its response; True if another one should follow at once."""
        request = Heartbeat(
            self._group_id,
            membership.member_id,
            membership.member_epoch,
            membership.topics,
            frozenset(self._assigned),
            self._instance_id,
            self.config["session.timeout.ms"],
            self.config["max.poll.interval.ms"],
        )
        membership.next_heartbeat = time.monotonic() + self.config["heartbeat.interval.ms"] / 1000
        try:
            response = self._coordinator().heartbeat(request)
        except (UnknownMemberId, FencedMemberEpoch) as error:
            self._lose(error)
            return True
        except FencedInstanceId:
            self._assigned, self._stored, self._membership = {}, {}, None
            raise
        except RetriableError as error:
            if self._error_cb is not None:
                self._error_cb(error.error)
            return False
        membership.member_id, membership.member_epoch = response.member_id, response.member_epoch
        return self._reconcile(membership, response.assignment)

    def _reconcile(self, membership: _Membership, target: frozenset[TopicPartitionKey]) -> bool:
        """Revoke first, then assign (S6.2); True if partitions were revoked (to be reported at once)."""
        revoked = sorted(set(self._assigned) - target)
        if revoked:
            membership.next_heartbeat = 0.0
            # S6.6: no commit outside on_revoke until the member epoch moves past this one.
            membership.revocation_epoch = membership.member_epoch
            partitions = [TopicPartition(*tp, self._position_of(tp)) for tp in revoked]
            try:
                # Like a commit inside on_revoke: the coordinator holds the epoch bump until the report.
                membership.in_callback = "on_revoke"
                try:
                    self._auto_commit(revoked)
                finally:
                    membership.in_callback = None
                self._callback(membership, "on_revoke", membership.on_revoke, partitions)
            finally:
                for tp in revoked:
                    self._assigned.pop(tp, None)
                    self._stored.pop(tp, None)
        added = sorted(target - set(self._assigned))
        if added:
            partitions = [TopicPartition(*tp) for tp in added]
            try:
                self._callback(membership, "on_assign", membership.on_assign, partitions)
            finally:
                self._add([tp for tp in partitions if (tp.topic, tp.partition) not in self._assigned])
        return bool(revoked)

    def _lose(self, error: KafkaException) -> None:
        """The coordinator fenced this member: its partitions are lost (`on_lost`, else `on_revoke`), and it
        joins again as a new member with epoch 0."""
        membership = self._membership
        assert membership is not None
        if isinstance(error, FencedMemberEpoch) and membership.member_id:
            # The member is still in the group under its old id: leave, so its partitions move on now.
            self._send_leave(membership, LEAVE_GROUP_EPOCH)
        lost = [TopicPartition(*tp, self._position_of(tp)) for tp in sorted(self._assigned)]
        membership.member_id, membership.member_epoch = "", 0
        membership.revocation_epoch, membership.fenced, membership.next_heartbeat = None, None, 0.0
        try:
            if lost:
                callback = membership.on_lost if membership.on_lost is not None else membership.on_revoke
                self._callback(membership, "on_lost", callback, lost)
        finally:
            self._assigned, self._stored = {}, {}

    def _leave(self, epoch: int) -> None:
        membership = self._membership
        assert membership is not None
        try:
            if self._assigned:
                self._auto_commit(list(self._assigned))
                if membership.member_id:
                    membership.revocation_epoch = membership.member_epoch
                revoked = [TopicPartition(*tp, self._position_of(tp)) for tp in sorted(self._assigned)]
                self._callback(membership, "on_revoke", membership.on_revoke, revoked)
        finally:
            self._assigned, self._stored = {}, {}
            if membership.member_id:
                self._send_leave(membership, epoch)
            self._membership = None

    def _send_leave(self, membership: _Membership, epoch: int) -> None:
        request = Heartbeat(
            self._group_id, membership.member_id, epoch, membership.topics, frozenset(), self._instance_id,
            self.config["session.timeout.ms"], self.config["max.poll.interval.ms"],
        )
        try:
            self._coordinator().heartbeat(request)
        except (UnknownMemberId, FencedMemberEpoch, FencedInstanceId, RetriableError):
            pass  # already out of the group, or the session timeout will remove it

    def _callback(
        self, membership: _Membership, name: str, callback: RebalanceCallback | None, partitions: list[TopicPartition]
    ) -> None:
        if callback is None:
            return
        membership.in_callback = name
        try:
            callback(self, partitions)
        finally:
            membership.in_callback = None

    # -- internals: offsets --------------------------------------------------------------

    @property
    def _require_stable(self) -> bool:
        return self.config["isolation.level"] == READ_COMMITTED

    def _commit_offsets(self, offsets: dict[TopicPartitionKey, tuple[int, str | None]]) -> list[TopicPartition]:
        """Commit as this member (or, assigned by hand, from outside the group protocol) after S6.6's check."""
        group_id = self._require_group("commit")
        membership = self._membership
        member_id, member_epoch = "", NO_MEMBER_EPOCH
        if membership is not None:
            if membership.on_revocation_epoch() and membership.in_callback != "on_revoke":
                if not membership.busy:
                    self._poll_group(force=True)  # report the revocation: the coordinator moves the epoch past it
                if membership.on_revocation_epoch():
                    raise StaleMemberEpoch(
                        f"not committed: partitions were revoked at member epoch {membership.revocation_epoch} and "
                        "the coordinator has not moved the member past it yet (S6.6); poll, then commit again",
                        member_epoch=membership.member_epoch,
                    )
            member_id, member_epoch = membership.member_id, membership.member_epoch
        request = {tp: (offset, metadata or "") for tp, (offset, metadata) in offsets.items()}
        try:
            self._coordinator().commit_offsets(group_id, member_id, member_epoch, request, self._instance_id)
        except UnknownMemberId as error:
            if membership is not None and member_id:
                membership.fenced = error
            raise
        for tp, (offset, _) in offsets.items():
            self._last_committed[tp] = offset
        return _topic_partitions(offsets)

    def _maybe_auto_commit(self) -> None:
        if time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.config["auto.commit.interval.ms"] / 1000
        self._auto_commit(list(self._assigned))

    def _auto_commit(self, partitions: list[TopicPartitionKey]) -> None:
        """enable.auto.commit: commit the stored offsets of `partitions` that moved; the result goes to on_commit."""
        if not self.config["enable.auto.commit"] or self._group_id is None:
            return
        wanted = {
            tp: self._stored[tp]
            for tp in partitions
            if tp in self._stored and self._last_committed.get(tp) != self._stored[tp][0]
        }
        if not wanted:
            return
        try:
            self._commit_reports.append((None, self._commit_offsets(wanted)))
        except KafkaException as error:
            self._commit_reports.append((error.error, _topic_partitions(wanted)))

    def _serve_commit_reports(self) -> None:
        while self._commit_reports:
            error, partitions = self._commit_reports.popleft()
            if self._on_commit is not None:
                self._on_commit(error, partitions)

    def _resolve_positions(self) -> None:
        """Start partitions without a position at the group's committed offset; in read_committed the
        fetch is stable, and partitions a pending transaction holds are asked again later (S7.3)."""
        now = time.monotonic()
        wanted = [tp for tp, state in self._assigned.items() if state.position is None and state.resolve_after <= now]
        if not wanted or self._group_id is None:
            return
        try:
            records = self._coordinator().fetch_offsets(self._group_id, wanted, require_stable=self._require_stable)
        except UnstableOffsetCommit as error:
            held = {tuple(tp) for tp in getattr(error, "partitions", wanted)}
            for tp in wanted:
                if tp in held:
                    state = self._assigned[tp]
                    state.resolve_after = now + self._retry.delay_s(state.resolve_retries)
                    state.resolve_retries += 1
            rest = [tp for tp in wanted if tp not in held]
            if not rest:
                return
            try:
                records = self._coordinator().fetch_offsets(self._group_id, rest, require_stable=self._require_stable)
            except UnstableOffsetCommit:
                return  # another transaction got there in between: next round
        for tp, record in records.items():
            state = self._assigned.get(tp)
            if state is not None and state.position is None:
                state.position = self._committed_start(state.log, record)

    def _committed_start(self, log: PartitionLog, record: OffsetRecord | None) -> int:
        if record is None:
            return self._reset(log)
        log.refresh()
        if not log.log_start_offset() <= record.offset <= log.high_watermark():
            return self._reset(log)
        return record.offset

    def _position_of(self, tp: TopicPartitionKey) -> int:
        state = self._assigned.get(tp)
        if state is None or state.position is None:
            return OFFSET_INVALID
        return state.buffer[0].offset() if state.buffer else state.position

    # -- internals ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def _require_group(self, call: str) -> str:
        if self._group_id is None:
            raise InvalidConfig(f"{call}() needs group.id to be configured", key="group.id")
        return self._group_id

    def _check_manual(self, call: str) -> None:
        """In a group the coordinator assigns: only the rebalance callbacks may change the assignment."""
        membership = self._membership
        if membership is None:
            return
        if membership.in_callback is None or not call.startswith("incremental_"):
            raise _state_error(
                f"{call}() is not allowed while subscribed: the group assigns partitions "
                "(incremental_assign/incremental_unassign only inside on_assign/on_revoke/on_lost)"
            )

    def _add(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            log = open_partition(self._root, tp.topic, tp.partition)
            self._assigned[(tp.topic, tp.partition)] = _Assigned(log, self._start_offset(log, tp.offset))

    def _in_turn(self) -> list[_Assigned]:
        states = list(self._assigned.values())
        if not states:
            return []
        self._turn = (self._turn + 1) % len(states)
        return states[self._turn :] + states[: self._turn]

    def _start_offset(self, log: PartitionLog, offset: int) -> int | None:
        """Where reading starts; None (with group.id) for the committed offset, resolved before the first fetch."""
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise InvalidRequest(f"offset must be an integer, not {offset!r}")
        if offset in (OFFSET_STORED, OFFSET_INVALID) and self._group_id is not None:
            return None
        log.refresh()
        low = log.log_start_offset()
        if offset == OFFSET_BEGINNING:
            return low
        if offset == OFFSET_END:
            return self._end_offset(log)
        if offset in (OFFSET_STORED, OFFSET_INVALID):
            return self._reset(log)
        if offset < 0:
            raise InvalidRequest(f"offset {offset} is neither a real offset nor a logical one (-1, -2, -1000, -1001)")
        # Between the LSO and the high watermark is a valid position: it waits for the transactions to end.
        if not low <= offset <= log.high_watermark():
            return self._reset(log)
        return offset

    def _reset(self, log: PartitionLog) -> int:
        policy = self.config["auto.offset.reset"]
        if policy in ("earliest", "smallest", "beginning"):
            return log.log_start_offset()
        if policy in ("latest", "largest", "end"):
            return self._end_offset(log)
        raise OffsetOutOfRange(
            f"{log.topic}-{log.partition} has no valid position and auto.offset.reset=error",
            log_start_offset=log.log_start_offset(),
            log_end_offset=log.log_end_offset(),
        )

    def _end_offset(self, log: PartitionLog) -> int:
        """Where reading ends for now: the LSO in read_committed, the high watermark in read_uncommitted."""
        if self.config["isolation.level"] == READ_COMMITTED:
            return log.last_stable_offset()
        return log.high_watermark()

    def _fill(self, state: _Assigned) -> None:
        if state.buffer or state.position is None:
            return
        log = state.log
        if state.position >= self._end_offset(log):
            log.refresh()
        end = self._end_offset(log)
        # Every fetch moves the position forward, but in read_committed it may return nothing (all aborted).
        while state.position < end and not state.buffer:
            try:
                fetched = log.fetch(
                    state.position,
                    max_records=self.config["max.poll.records"],
                    max_bytes=self.config["max.partition.fetch.bytes"],
                    isolation_level=self.config["isolation.level"],
                )
            except OffsetOutOfRange:
                state.position = self._reset(log)
                return
            state.position = fetched.next_offset
            state.buffer.extend(_messages(log.topic, log.partition, fetched.rows))
        if not state.buffer and self.config["enable.partition.eof"] and state.eof_offset != state.position:
            state.eof_offset = state.position
            eof = KafkaError(KafkaError._PARTITION_EOF, "partition EOF")
            state.buffer.append(Message(log.topic, log.partition, state.position, error=eof))


def _messages(topic: str, partition: int, rows: pa.Table) -> list[Message]:
    """Data rows as Messages; control rows are skipped (they only take offsets)."""
    columns = rows.select(["offset", "key", "value", "headers", "control"]).to_pydict()
    timestamps_ms = pc.divide(rows.column("timestamp").cast(pa.int64()), 1000).to_pylist()
    out = []
    for offset, timestamp, key, value, headers, control in zip(
        columns["offset"], timestamps_ms, columns["key"], columns["value"], columns["headers"], columns["control"]
    ):
        if control is not None:
            continue
        out.append(
            Message(
                topic,
                partition,
                offset,
                key,
                value,
                None if headers is None else [(h["key"], h["value"]) for h in headers],
                (TIMESTAMP_CREATE_TIME, timestamp),
            )
        )
    return out


def _partition_list(partitions: Any) -> list[TopicPartition]:
    if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in partitions):
        raise InvalidRequest("partitions must be a list of TopicPartition")
    return list(partitions)


def _topic_partitions(offsets: Mapping[TopicPartitionKey, tuple[int, str | None]]) -> list[TopicPartition]:
    return [TopicPartition(topic, partition, offset, metadata) for (topic, partition), (offset, metadata) in sorted(offsets.items())]


def _committed_partition(tp: TopicPartitionKey, record: OffsetRecord | None) -> TopicPartition:
    if record is None:
        return TopicPartition(*tp, OFFSET_INVALID)
    return TopicPartition(*tp, record.offset, record.metadata or None)


def _names(partitions: list[TopicPartitionKey]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in partitions)


def _state_error(reason: str) -> KafkaException:
    return KafkaException(KafkaError(KafkaError._STATE, reason))
