"""The state every part of `Consumer` works on, declared once, and the internals every part uses.

`Consumer` is assembled from parts by concept (consumer_fetch, consumer_membership, consumer_metadata,
consumer_offsets); each part is a base class of `Consumer` and works on the attributes `Consumer.__init__`
sets. Declaring them here, on the parts' common base, types each part against the same state. The methods
one part calls on another are declared below for the type checker only: at run time every call resolves,
through `Consumer`'s bases, to the part that defines it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import InvalidConfig

if TYPE_CHECKING:
    from lakelog.client.consumer_fetch import TopicPartitionKey, _Assigned
    from lakelog.client.consumer_membership import _Membership
    from lakelog.client.consumer_metadata import Subscription
    from lakelog.client.types import Message, TopicPartition
    from lakelog.config import Config
    from lakelog.errors import KafkaError
    from lakelog.log import PartitionLog
    from lakelog.log.partition import Clock
    from lakelog.store import Location
    from lakelog.store.retry import RetryPolicy

logger = logging.getLogger(__name__)


class _ConsumerState:
    """What `Consumer.__init__` sets (see there for what each holds) and the internals all parts use."""

    config: Config
    _logger: logging.Logger | logging.LoggerAdapter
    _clock: Clock
    _root: Location
    _retry: RetryPolicy
    _group_id: str | None
    _instance_id: str | None
    _on_commit: Callable[[KafkaError | None, list[TopicPartition]], None] | None
    _error_cb: Callable[[KafkaError], None] | None
    _assigned: dict[TopicPartitionKey, _Assigned]
    _pending: dict[TopicPartitionKey, int]
    _turn: int
    _closed: bool
    _groups: GroupCoordinator | None
    _membership: _Membership | None
    # The member id this consumer made at creation (KIP-1082); None without group.id.
    _client_member_id: str | None
    _stored: dict[TopicPartitionKey, tuple[int, str | None]]
    _last_committed: dict[TopicPartitionKey, int]
    _commit_reports: deque[tuple[KafkaError | None, list[TopicPartition]]]
    _events: deque[Message]
    _last_poll_s: float | None
    _next_auto_commit: float

    def _coordinator(self) -> GroupCoordinator:
        if self._groups is None:
            self._groups = GroupCoordinator(
                self._root, assignor=self.config["group.remote.assignor"], retry=self._retry, clock=self._clock
            )
        return self._groups

    def _now_s(self) -> float:
        """The passed-in clock, in seconds: what the heartbeat, auto-commit and offset-fetch timers read."""
        return self._clock() / 1000

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def _require_group(self, call: str) -> str:
        if self._group_id is None:
            raise InvalidConfig(f"{call}() needs group.id to be configured", key="group.id")
        return self._group_id

    if TYPE_CHECKING:
        # One part's methods that another part calls (declarations only; defined in the part named).

        # consumer_fetch
        def _add(self, partitions: list[TopicPartition], pending_if_missing: bool = False) -> None: ...
        def _position_of(self, tp: TopicPartitionKey) -> int: ...
        def _reset(self, log: PartitionLog) -> int: ...
        def _end_offset(self, log: PartitionLog) -> int: ...

        # consumer_membership
        def _poll_group(self, force: bool = False) -> None: ...
        def _check_manual(self, call: str) -> None: ...

        # consumer_metadata
        def _refresh_subscription(self, subscription: Subscription) -> tuple[str, ...] | None: ...

        # consumer_offsets
        def _auto_commit(self, partitions: list[TopicPartitionKey]) -> None: ...
