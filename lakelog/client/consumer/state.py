"""What every part of a `Consumer` works on, as Kafka's consumer shares its `SubscriptionState`.

The Consumer is composed of parts by concept: `fetcher` (the assigned partitions and their
fetches), `metadata` (the root's topics and the subscription's refresh), `offsets` (commits,
stored offsets, auto-commit) and `membership` (the group member); `consumer` runs the poll loop.
Each part is an object holding this one `ConsumerState` and calls the parts below it through their
public methods (fetcher < metadata < offsets < membership < consumer); none reaches into another.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from lakelog.client.consumer.protocol import GroupProtocol
from lakelog.client.consumer.subscription import Subscription
from lakelog.client.transaction_timer import TransactionTimer
from lakelog.client.types import Message, TopicPartition
from lakelog.config import Config
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import InvalidConfig, KafkaError, KafkaException
from lakelog.log import PartitionLog
from lakelog.log.partition import Clock
from lakelog.store import Location
from lakelog.store.io.retry import RetryPolicy
from lakelog.typedef import TopicPartitionKey

# A rebalance callback: (the consumer, the partitions assigned, revoked or lost).
RebalanceCallback: TypeAlias = Callable[[Any, list[TopicPartition]], None]
CommitCallback: TypeAlias = Callable[[KafkaError | None, list[TopicPartition]], None]


@dataclass
class Assigned:
    """An assigned partition: its log, position, fetched rows not yet returned, and what its next fetch must know."""

    log: PartitionLog
    # None: not known yet; taken from the group's committed offset before the first fetch.
    position: int | None
    buffer: list[Message] = field(default_factory=list)
    # The offset of the last partition-EOF event: one event per offset the end is reached at, as librdkafka.
    eof_offset: int | None = None
    # When to ask for the committed offset again after a pending transaction held it (S7.3), and how often it did.
    resolve_after: float = 0.0
    resolve_retries: int = 0
    # The position an auto.offset.reset=error was reported at: no fetch there until a seek.
    reset_error_offset: int | None = None
    # pause(): poll/consume return nothing of it (buffered rows and position kept) until resume().
    paused: bool = False
    # The long poll (Fetcher.look): when the store is next looked at for new commits (time.monotonic()), and the
    # wait after a look that found nothing, doubling up to fetch.wait.max.ms while the partition stays idle.
    next_look: float = 0.0
    idle_wait: float = 0.0


@dataclass
class Membership:
    """What a subscribed consumer knows of its membership (KIP-848's client-side member state)."""

    # The topic names the subscription stands for now (its patterns resolved), as the coordinator gets them.
    topics: tuple[str, ...]
    subscription: Subscription
    on_assign: RebalanceCallback | None
    on_revoke: RebalanceCallback | None
    on_lost: RebalanceCallback | None
    member_id: str = ""
    member_epoch: int = 0
    # S6.6: the member epoch partitions were last revoked at; None until a revocation.
    revocation_epoch: int | None = None
    # When the next heartbeat is due, in seconds of the consumer's clock.
    next_heartbeat: float = 0.0
    # Inside a rebalance callback (on_revoke may commit: the coordinator holds the bump meanwhile).
    in_callback: str | None = None
    # Eager (classic range/roundrobin): the callback took the assignment itself with assign() or unassign().
    assigned_by_callback: bool = False
    # Inside a heartbeat and what follows from it (no second heartbeat may start meanwhile).
    busy: bool = False
    # An error that showed this member fenced (from a commit) or out of the group (max.poll.interval.ms); handled
    # by the next poll.
    fenced: KafkaException | None = None

    def on_revocation_epoch(self) -> bool:
        return self.revocation_epoch is not None and self.member_epoch <= self.revocation_epoch


class ConsumerState:
    """The state a Consumer's parts share: its config and clock, its assignment and group membership, its offsets."""

    def __init__(
        self,
        consumer_config: Config,
        logger: logging.Logger | logging.LoggerAdapter,
        clock: Clock,
        root: Location,
        retry: RetryPolicy,
        on_commit: CommitCallback | None,
        error_cb: Callable[[KafkaError], None] | None,
        client_member_id: str | None,
    ) -> None:
        self.config = consumer_config
        # confluent-kafka's `logger`: this consumer's own log lines go there.
        self.logger = logger
        # The clock of this consumer's timers and of the coordinator it calls (S6.5: session timeouts).
        self.clock = clock
        self.root = root
        # retry.backoff.ms / retry.backoff.max.ms: every retry of this consumer and of the coordinator it calls.
        self.retry = retry
        self.group_id: str | None = consumer_config["group.id"]
        self.instance_id: str | None = consumer_config["group.instance.id"]
        if self.instance_id is not None and self.group_id is None:
            raise InvalidConfig("group.instance.id needs group.id", key="group.instance.id")
        # librdkafka's group.protocol (classic or consumer) and the assignor this member asks for.
        self.protocol = GroupProtocol.from_config(consumer_config)
        self.on_commit = on_commit
        self.error_cb = error_cb
        self.assigned: dict[TopicPartitionKey, Assigned] = {}
        # Assigned by hand before their topic exists: the offset to start at once it does.
        self.pending: dict[TopicPartitionKey, int] = {}
        self.turn = 0
        self.closed = False
        self.groups: GroupCoordinator | None = None
        # The broker's transaction timer (S4.7): run when an open transaction holds a read_committed read.
        self.transaction_timer = TransactionTimer(root, retry, clock, logger)
        self.membership: Membership | None = None
        # KIP-848 with KIP-1082: the client makes its member id, so memberid() has it before the first poll.
        self.client_member_id = client_member_id
        # store_offsets / enable.auto.offset.store: the next offset to commit per partition, and its metadata.
        self.stored: dict[TopicPartitionKey, tuple[int, str | None]] = {}
        # What this consumer last committed per partition (auto-commit sends only what changed).
        self.last_committed: dict[TopicPartitionKey, int] = {}
        self.commit_reports: deque[tuple[KafkaError | None, list[TopicPartition]]] = deque()
        # Messages carrying an error that poll() returns before any record (a missing subscribed topic).
        self.events: deque[Message] = deque()
        # When the last poll/consume returned, by the clock (max.poll.interval.ms); None: not polled since subscribe.
        self.last_poll_s: float | None = None
        self.next_auto_commit = self.now_s() + consumer_config["auto.commit.interval.ms"] / 1000

    def coordinator(self) -> GroupCoordinator:
        """The group coordinator, made on first use."""
        if self.groups is None:
            self.groups = GroupCoordinator(self.root, assignor=self.protocol.assignor or None, retry=self.retry, clock=self.clock)
        return self.groups

    def now_s(self) -> float:
        """The passed-in clock, in seconds: what the heartbeat, auto-commit and offset-fetch timers read."""
        return self.clock() / 1000

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError("Consumer closed")

    def require_group(self, call: str) -> str:
        if self.group_id is None:
            raise InvalidConfig(f"{call}() needs group.id to be configured", key="group.id")
        return self.group_id

    def check_manual(self, call: str) -> None:
        """In a group the coordinator assigns: only the rebalance callbacks may change the assignment, with
        assign()/unassign() under the eager protocol and incremental_assign()/incremental_unassign() otherwise."""
        membership = self.membership
        if membership is None:
            return
        if membership.in_callback is None:
            raise state_error(
                f"{call}() is not allowed while subscribed: the group assigns partitions "
                "(only inside on_assign/on_revoke/on_lost)"
            )
        incremental = call.startswith("incremental_")
        if self.protocol.eager and incremental:
            raise state_error(
                "Changes to the current assignment must be made using assign() when rebalance protocol type is EAGER"
            )
        if not self.protocol.eager and not incremental:
            raise state_error(
                "Changes to the current assignment must be made using incremental_assign() or incremental_unassign() "
                "when rebalance protocol type is COOPERATIVE"
            )
        if not incremental:
            membership.assigned_by_callback = True


def state_error(reason: str) -> KafkaException:
    """A call the consumer's state does not allow now (librdkafka's _STATE)."""
    return KafkaException(KafkaError(KafkaError._STATE, reason))
