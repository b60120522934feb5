"""`Consumer`: confluent-kafka's consumer API over partition logs, with manual assignment or a group.

Each assigned partition keeps a position and a buffer of fetched rows; `poll`
serves partitions in turn. `isolation.level` is librdkafka's: `read_committed`
(the default) reads up to the last stable offset and never returns rows of open
or aborted transactions; `read_uncommitted` reads up to the high watermark. In
both, control rows (transaction markers) take offsets but are never returned, so
offsets a reader sees have gaps (S5.4): positions move past whatever a fetch
read, returned or not.

With `group.id`, `subscribe()` makes the consumer a member of a group, under librdkafka's `group.protocol`
(`consumer`, KIP-848, or `classic`: a mode of the client over the same coordinator, lakelog.client.consumer.protocol):
`poll()`/`consume()` heartbeat through the group coordinator every
`heartbeat.interval.ms`, revoke what the coordinator takes away (`on_revoke`, then
the smaller owned set is reported at once so the member epoch moves on, S6.2) and
then assign what it gives (`on_assign`). A new partition starts at the group's
committed offset, fetched as a stable offset in read_committed (S7.3: while a
transaction holds pending offsets for it, the fetch is retried after a backoff
growing from `retry.backoff.ms` to `retry.backoff.max.ms`; one past its transaction.timeout.ms is aborted, S4.7,
lakelog.client.transaction_timer), else by `auto.offset.reset`. Under classic range or roundrobin a rebalance is
eager: all revoked, then the whole assignment given. After a revocation the consumer
commits nothing until its member epoch has moved past the revocation epoch
(S6.6), except inside `on_revoke`, where the coordinator holds the bump. A member
the coordinator fenced (UnknownMemberId, FencedMemberEpoch) loses its partitions
(`on_lost`) and joins again with epoch 0.

The parts live by concept: `membership` (the group member: heartbeat,
reconcile, lose, leave, max.poll.interval.ms), `offsets` (commit,
committed, store_offsets, auto-commit), `fetcher` (the assigned
partitions, their positions, pause/resume and fetches) and `metadata`
(list_topics, offsets_for_times, regex subscriptions and missing topics);
each is an object over one `ConsumerState` (`state`) and the parts below it
(fetcher < metadata < offsets < membership), and `Consumer` composes them,
hands each public call to its part and runs the poll loop. Events that are no record (a missing
subscribed topic, _MAX_POLL_EXCEEDED) come out of poll as messages carrying an
error, as in confluent-kafka.

Time is passed in: `clock` (milliseconds, the wall clock by default) drives the
heartbeat, auto-commit, metadata-refresh and max-poll-interval timers and the
group coordinator's session-timeout decisions, so a test moves it on instead of
sleeping. `poll`/`consume` timeouts
are the caller's own waits, in real time.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from lakelog import config
from lakelog.client.conf import split_callbacks
from lakelog.client.consumer.fetcher import Fetcher, fetched_key, fetched_offset
from lakelog.client.consumer.membership import GroupMembership
from lakelog.client.consumer.metadata import Metadata
from lakelog.client.consumer.offsets import OffsetCommits
from lakelog.client.consumer.state import ConsumerState, RebalanceCallback
from lakelog.client.consumer.stats import consumer_stats, count_received
from lakelog.client.sasl import set_sasl_credentials
from lakelog.client.statistics import Statistics
from lakelog.client.timeouts import check_timeout
from lakelog.client.types import ClusterMetadata, Message, TopicPartition
from lakelog.config import storage_options
from lakelog.coordinator.group import LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH, GroupMetadata
from lakelog.errors import InvalidArgument, InvalidType
from lakelog.log.partition import Clock, wall_clock_ms
from lakelog.store import open_root
from lakelog.store.io.retry import RetryPolicy

# The logger a consumer without confluent-kafka's `logger` config logs to: the package's, as users configure it.
default_logger = logging.getLogger(__package__)

CALLBACK_KEYS = ("on_commit", "error_cb", "stats_cb")
# How long poll() sleeps with no partition assigned (between looks at the group).
IDLE_BACKOFF_S = 0.05


class Consumer:
    """A consumer reading the topics of `lakelog.root`, shaped like confluent_kafka.Consumer."""

    def __init__(self, conf: Mapping[str, Any] | None = None, *, clock: Clock = wall_clock_ms, **kwargs: Any) -> None:
        values, callbacks = split_callbacks(conf, CALLBACK_KEYS, kwargs)
        self.config = config.load("consumer", values)
        # confluent-kafka's `logger`: this consumer's own log lines go there (default: this package's logger).
        self._logger: logging.Logger | logging.LoggerAdapter = self.config.get("logger") or default_logger
        # UnresolvedRoot for a root never initialised (a typo): nothing is written there.
        root = open_root(self.config["lakelog.root"], storage_options(self.config))
        member_id = uuid.uuid4().hex if self.config["group.id"] is not None else None
        state = self._state = ConsumerState(
            self.config,
            self._logger,
            clock,
            root,
            RetryPolicy.from_config(self.config),
            callbacks.get("on_commit"),
            callbacks.get("error_cb"),
            member_id,
        )
        # stats_cb every statistics.interval.ms, and the records poll returned per partition that it reports.
        self._stats = Statistics(
            callbacks.get("stats_cb"), self.config["statistics.interval.ms"], clock, "consumer", self.config["client.id"]
        )
        self._received: dict[tuple[str, int], list[int]] = {}
        # The parts, each over the state and the parts below it.
        self._fetcher = Fetcher(state)
        self._metadata = Metadata(state, self._fetcher)
        self._offsets = OffsetCommits(state, self._fetcher, lambda: self._group.poll_group(force=True))
        self._group = GroupMembership(state, self._fetcher, self._metadata, self._offsets, self)

    # -- confluent-kafka API: each call is its part's -------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment; each partition starts at its offset, the committed offset, or by auto.offset.reset."""
        self._fetcher.assign(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add partitions to the assignment; one already assigned is refused (_CONFLICT) and nothing is added."""
        self._fetcher.incremental_assign(partitions)

    def unassign(self) -> None:
        """confluent-kafka's unassign()."""
        self._fetcher.unassign()

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """confluent-kafka's incremental_unassign()."""
        self._fetcher.incremental_unassign(partitions)

    def assignment(self) -> list[TopicPartition]:
        """confluent-kafka's assignment()."""
        return self._fetcher.assignment()

    def pause(self, partitions: list[TopicPartition]) -> None:
        """poll/consume return nothing of these partitions until `resume`; their positions are kept."""
        self._fetcher.pause(partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Return messages of these paused partitions again, from where they were paused."""
        self._fetcher.resume(partitions)

    def seek(self, partition: TopicPartition) -> None:
        """Move a partition's position; the next message read is at that offset (or after)."""
        self._fetcher.seek(partition)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next message each partition will return (OFFSET_INVALID if not known yet)."""
        return self._fetcher.position(partitions)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high): the log start offset, and the end this consumer reads to."""
        return self._fetcher.get_watermark_offsets(partition, timeout, cached)

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join (or change the subscription of) the group `group.id`; partitions come through `poll()`."""
        self._group.subscribe(topics, on_assign, on_revoke, on_lost)

    def unsubscribe(self) -> None:
        """Revoke every partition (`on_revoke`) and leave the group (member epoch -1)."""
        self._group.unsubscribe()

    def memberid(self) -> str | None:
        """This member's id: under the consumer protocol made by the client at creation (KIP-1082), so set before the
        first poll; under classic the coordinator's, None until joined."""
        return self._group.memberid()

    def consumer_group_metadata(self) -> GroupMetadata:
        """Who commits, at which member epoch (KIP-447): pass it to `Producer.send_offsets_to_transaction`."""
        return self._group.consumer_group_metadata()

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The root's topics and their partitions (one topic with `topic`), as confluent's `ClusterMetadata`."""
        return self._metadata.list_topics(topic, timeout)

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """For each partition, the earliest offset whose record timestamp is >= `offset` (a time in ms)."""
        return self._metadata.offsets_for_times(partitions, timeout)

    def commit(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None, asynchronous: bool = True
    ) -> list[TopicPartition] | None:
        """Commit `message.offset() + 1`, or `offsets` as given, or else the stored offsets of the assignment."""
        return self._offsets.commit(message, offsets, asynchronous)

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offsets (OFFSET_INVALID where none)."""
        return self._offsets.committed(partitions, timeout)

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store `message.offset() + 1` (or `offsets`) for the next commit; needs enable.auto.offset.store=false."""
        self._offsets.store_offsets(message, offsets)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Accepted as confluent-kafka takes it, and unused: a root authenticates through its store."""
        set_sasl_credentials(self._logger, username, password)

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
        self._state.check_open()
        check_timeout(timeout)  # InvalidType / InvalidArgument (NaN), never a TypeError from a comparison inside
        if not isinstance(num_messages, int) or isinstance(num_messages, bool):
            raise InvalidType(f"num_messages must be an integer, not {num_messages!r}")
        if not 0 <= num_messages <= 1_000_000:
            raise InvalidArgument("num_messages must be between 0 and 1000000 (1M)")
        if num_messages == 0:
            return []  # at once, as confluent-kafka: nothing is fetched, no group timer runs
        try:
            exceeded = self._group.max_poll_exceeded()
            if exceeded is not None:
                return [exceeded]
            messages = self._consume(num_messages, timeout)
            count_received(self._received, messages)
            return messages
        finally:
            self._stats.maybe_emit(lambda: consumer_stats(self._state, self._received))
            self._state.last_poll_s = self._state.now_s()

    def _consume(self, num_messages: int, timeout: float | None) -> list[Message]:
        # The caller's wait, in real time (it sleeps); the group's timers run on the passed-in clock.
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            self._offsets.serve_commit_reports()
            self._fetcher.open_pending()
            self._group.poll_group()
            self._offsets.maybe_auto_commit()
            self._offsets.resolve_positions()
            out: list[Message] = []
            while self._state.events and len(out) < num_messages:
                out.append(self._state.events.popleft())
            for state in self._fetcher.in_turn():
                if len(out) >= num_messages:
                    break
                if state.position is None or state.paused:
                    continue
                self._fetcher.fill(state)
                while state.buffer and len(out) < num_messages:
                    out.append(state.buffer.pop(0))
                if len(out) >= num_messages:
                    break
            if out:
                if self.config["enable.auto.offset.store"] and self._state.group_id is not None:
                    for message in out:
                        if message.error() is None:
                            self._state.stored[fetched_key(message)] = (fetched_offset(message) + 1, None)
                return out
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return []
            # Until the first partition's long poll is due (Fetcher.look), the deadline or the next heartbeat.
            due = self._fetcher.next_look()
            wait = IDLE_BACKOFF_S if due is None else due - now
            if deadline is not None:
                wait = min(wait, deadline - now)
            if self._state.membership is not None:
                wait = min(wait, max(0.0, self._state.membership.next_heartbeat - self._state.now_s()))
            time.sleep(max(0.0, wait))
            for state in self._state.assigned.values():
                if not state.paused:
                    self._fetcher.look(state)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Commit stored offsets (enable.auto.commit), revoke and leave the group, serve commit callbacks."""
        if self._state.closed:
            return
        try:
            if self._state.membership is not None:
                # A static member's leave keeps its assignment for its next instance (KIP-345/848).
                self._group.leave(LEAVE_GROUP_EPOCH if self._state.instance_id is None else LEAVE_GROUP_STATIC_EPOCH)
            elif self._state.assigned:
                self._offsets.auto_commit(list(self._state.assigned))
            self._offsets.serve_commit_reports()
        finally:
            self._state.assigned, self._state.stored, self._state.pending = {}, {}, {}
            self._state.closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
