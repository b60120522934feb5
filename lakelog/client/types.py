"""Value types of the client API, shaped like confluent-kafka-python's."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any

from lakelog.errors import KafkaError

logger = logging.getLogger(__name__)

OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_STORED = -1000
OFFSET_INVALID = -1001

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

Headers = list[tuple[str, bytes | None]]


@total_ordering
class TopicPartition:
    """A topic, a partition and an offset, as confluent-kafka's `TopicPartition`."""

    __slots__ = ("topic", "partition", "offset", "metadata", "leader_epoch", "error")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def _key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: TopicPartition) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"TopicPartition{{topic={self.topic},partition={self.partition},offset={self.offset},error={self.error}}}"


class Message:
    """A record read or delivered, as confluent-kafka's `Message`."""

    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value", "_headers", "_timestamp", "_error")

    def __init__(
        self,
        topic: str | None,
        partition: int | None,
        offset: int | None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, 0),
        error: KafkaError | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._timestamp = timestamp
        self._error = error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def error(self) -> KafkaError | None:
        return self._error

    def latency(self) -> float | None:
        return None

    def leader_epoch(self) -> int | None:
        return None

    def set_key(self, key: bytes | None) -> None:
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        self._value = value

    def set_headers(self, headers: Headers | None) -> None:
        self._headers = headers

    def __len__(self) -> int:
        return len(self._value) if self._value is not None else 0

    def __repr__(self) -> str:
        return f"Message(topic={self._topic}, partition={self._partition}, offset={self._offset}, error={self._error})"


@dataclass
class NewTopic:
    """A topic to create, as confluent-kafka's `NewTopic` (replication is Delta's storage's job)."""

    topic: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: list | None = None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionMetadata:
    id: int
    leader: int = 0
    replicas: tuple[int, ...] = (0,)
    isrs: tuple[int, ...] = (0,)
    error: KafkaError | None = None


@dataclass(frozen=True)
class TopicMetadata:
    topic: str
    partitions: dict[int, PartitionMetadata]
    error: KafkaError | None = None


@dataclass(frozen=True)
class ClusterMetadata:
    """What `list_topics()` returns: every topic of the root and its partitions."""

    topics: dict[str, TopicMetadata]
    cluster_id: str | None = None
    controller_id: int = 0
    brokers: dict = field(default_factory=dict)
    orig_broker_id: int = 0
    orig_broker_name: str | None = None


@dataclass(frozen=True)
class PartitionDescription:
    """A partition's offsets (the LSO is where read_committed readers stop, S5.1) and its table's state."""

    id: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int
    files: int
    table_version: int


@dataclass(frozen=True)
class TopicDescription:
    """What `describe_topics()` returns for one topic: partitions, offsets and config."""

    name: str
    partitions: list[PartitionDescription]
    config: dict[str, Any]
