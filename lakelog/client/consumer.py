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

The parts live by concept: `consumer_membership` (the group member: heartbeat,
reconcile, lose, leave, max.poll.interval.ms), `consumer_offsets` (commit,
committed, store_offsets, auto-commit), `consumer_fetch` (the assigned
partitions, their positions, pause/resume and fetches) and `consumer_metadata`
(list_topics, offsets_for_times, regex subscriptions and missing topics);
`Consumer` sets their state (declared in `consumer_state`, with the internals
all parts use) and runs the poll loop. Events that are no record (a missing
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
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from lakelog import config
from lakelog.client.conf import split_callbacks
from lakelog.client.consumer_fetch import TopicPartitionKey, _Assigned, _fetched_key, _fetched_offset, _Fetching
from lakelog.client.consumer_membership import _GroupMembership, _Membership
from lakelog.client.consumer_metadata import _Metadata
from lakelog.client.consumer_offsets import _OffsetCommits
from lakelog.client.types import Message, TopicPartition
from lakelog.config import storage_options
from lakelog.coordinator.group import LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import InvalidArgument, InvalidConfig, InvalidType, KafkaError
from lakelog.log.partition import Clock, wall_clock_ms
from lakelog.store import open_root
from lakelog.store.retry import RetryPolicy

logger = logging.getLogger(__name__)

CALLBACK_KEYS = ("on_commit", "error_cb")
# How long poll() sleeps between looks at a partition that has nothing new.
IDLE_BACKOFF_S = 0.05


class Consumer(_GroupMembership, _OffsetCommits, _Metadata, _Fetching):
    """A consumer reading the topics of `lakelog.root`, shaped like confluent_kafka.Consumer."""

    def __init__(self, conf: Mapping[str, Any] | None = None, *, clock: Clock = wall_clock_ms, **kwargs: Any) -> None:
        values, callbacks = split_callbacks(conf, CALLBACK_KEYS, kwargs)
        self.config = config.load("consumer", values)
        # confluent-kafka's `logger`: this consumer's own log lines go there (default: this package's loggers).
        self._logger: logging.Logger | logging.LoggerAdapter = self.config.get("logger") or logger
        # The clock of this consumer's timers and of the coordinator it calls (S6.5: session timeouts).
        self._clock = clock
        # UnresolvedRoot for a root never initialised (a typo): nothing is written there.
        self._root = open_root(self.config["lakelog.root"], storage_options(self.config))
        # retry.backoff.ms / retry.backoff.max.ms: every retry of this consumer and of the coordinator it calls.
        self._retry = RetryPolicy.from_config(self.config)
        self._group_id: str | None = self.config["group.id"]
        self._instance_id: str | None = self.config["group.instance.id"]
        if self._instance_id is not None and self._group_id is None:
            raise InvalidConfig("group.instance.id needs group.id", key="group.instance.id")
        self._on_commit: Callable[[KafkaError | None, list[TopicPartition]], None] | None = callbacks.get("on_commit")
        self._error_cb: Callable[[KafkaError], None] | None = callbacks.get("error_cb")
        self._assigned: dict[TopicPartitionKey, _Assigned] = {}
        # Assigned by hand before their topic exists: the offset to start at once it does.
        self._pending: dict[TopicPartitionKey, int] = {}
        self._turn = 0
        self._closed = False
        self._groups: GroupCoordinator | None = None
        self._membership: _Membership | None = None
        # KIP-848 with KIP-1082: the client makes its member id, so memberid() has it before the first poll.
        self._client_member_id = uuid.uuid4().hex if self._group_id is not None else None
        # store_offsets / enable.auto.offset.store: the next offset to commit per partition, and its metadata.
        self._stored: dict[TopicPartitionKey, tuple[int, str | None]] = {}
        # What this consumer last committed per partition (auto-commit sends only what changed).
        self._last_committed: dict[TopicPartitionKey, int] = {}
        self._commit_reports: deque[tuple[KafkaError | None, list[TopicPartition]]] = deque()
        # Messages carrying an error that poll() returns before any record (a missing subscribed topic).
        self._events: deque[Message] = deque()
        # When the last poll/consume returned, by the clock (max.poll.interval.ms); None: not polled since subscribe.
        self._last_poll_s: float | None = None
        self._next_auto_commit = self._now_s() + self.config["auto.commit.interval.ms"] / 1000

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
        if not isinstance(num_messages, int) or isinstance(num_messages, bool):
            raise InvalidType(f"num_messages must be an integer, not {num_messages!r}")
        if not 0 <= num_messages <= 1_000_000:
            raise InvalidArgument("num_messages must be between 0 and 1000000 (1M)")
        if num_messages == 0:
            return []  # at once, as confluent-kafka: nothing is fetched, no group timer runs
        try:
            exceeded = self._max_poll_exceeded()
            if exceeded is not None:
                return [exceeded]
            return self._consume(num_messages, timeout)
        finally:
            self._last_poll_s = self._now_s()

    def _consume(self, num_messages: int, timeout: float | None) -> list[Message]:
        # The caller's wait, in real time (it sleeps); the group's timers run on the passed-in clock.
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            self._serve_commit_reports()
            self._open_pending()
            self._poll_group()
            self._maybe_auto_commit()
            self._resolve_positions()
            out: list[Message] = []
            while self._events and len(out) < num_messages:
                out.append(self._events.popleft())
            for state in self._in_turn():
                if len(out) >= num_messages:
                    break
                if state.position is None or state.paused:
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
                            self._stored[_fetched_key(message)] = (_fetched_offset(message) + 1, None)
                return out
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return []
            wait = IDLE_BACKOFF_S
            if deadline is not None:
                wait = min(wait, deadline - now)
            if self._membership is not None:
                wait = min(wait, max(0.0, self._membership.next_heartbeat - self._now_s()))
            time.sleep(max(0.0, wait))
            for state in self._assigned.values():
                if not state.paused:
                    state.log.refresh()

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
            self._assigned, self._stored, self._pending = {}, {}, {}
            self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
