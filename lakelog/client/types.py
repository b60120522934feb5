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

# The node a root stands for: every partition's leader and only replica.
NODE_ID = 0


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
    """A record read or delivered, as confluent-kafka's `Message`.

    Built as confluent-kafka builds one (`Message(topic, partition, offset, key, value, headers,
    error, timestamp, latency, leader_epoch)`, every argument optional); a negative or missing
    partition, offset, leader epoch or latency reads back as None. Two messages are equal when
    their topic, partition, offset, key, value, headers, error, leader epoch and timestamp are.
    """

    __slots__ = (
        "_topic",
        "_partition",
        "_offset",
        "_key",
        "_value",
        "_headers",
        "_error",
        "_timestamp",
        "_latency",
        "_leader_epoch",
        "_delivery_count",
    )

    def __init__(
        self,
        topic: str | None = None,
        partition: int | None = -1,
        offset: int | None = OFFSET_INVALID,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers | None = None,
        error: KafkaError | None = None,
        timestamp: tuple[int, int] | None = None,
        latency: float | None = -1.0,
        leader_epoch: int | None = -1,
        delivery_count: int | None = -1,
    ) -> None:
        if timestamp is None:
            timestamp = (TIMESTAMP_NOT_AVAILABLE, 0)
        elif type(timestamp) is not tuple or len(timestamp) != 2:
            raise TypeError("timestamp must be a tuple of (int, int)")
        # Kept as given (a consumer builds one Message per record); a negative reads back as None.
        if type(partition) is not int or not -0x80000000 <= partition < 0x80000000:
            partition = _int_field(partition, "partition", _INT32)
        if type(offset) is not int or not -0x8000000000000000 <= offset < 0x8000000000000000:
            offset = _int_field(offset, "offset", _INT64)
        if type(leader_epoch) is not int or not -0x80000000 <= leader_epoch < 0x80000000:
            leader_epoch = _int_field(leader_epoch, "leader_epoch", _INT32)
        if type(delivery_count) is not int or not -0x8000 <= delivery_count < 0x8000:
            delivery_count = _int_field(delivery_count, "delivery_count", _INT16)
        if type(latency) is not float:
            latency = _latency(latency)
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._error = error
        self._timestamp = timestamp
        self._latency = latency
        self._leader_epoch = leader_epoch
        self._delivery_count = delivery_count

    def topic(self) -> str | None:
        """The topic name, or None if the message has none (an error event)."""
        return self._topic

    def partition(self) -> int | None:
        """The partition number, or None if not set."""
        return None if self._partition < 0 else self._partition

    def offset(self) -> int | None:
        """The record's offset in its partition, or None if not set."""
        return None if self._offset < 0 else self._offset

    def key(self) -> bytes | None:
        """The record's key, or None."""
        return self._key

    def value(self) -> bytes | None:
        """The record's payload, or None."""
        return self._value

    def headers(self) -> Headers | None:
        """The record's headers as a list of (key, value) tuples, or None."""
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        """The (timestamp type, timestamp in ms) pair; the type is TIMESTAMP_NOT_AVAILABLE, _CREATE_TIME or _LOG_APPEND_TIME."""
        return self._timestamp

    def error(self) -> KafkaError | None:
        """The KafkaError this message reports (a failed delivery, a consumer event), or None."""
        return self._error

    def latency(self) -> float | None:
        """A delivered message's seconds from produce() to its delivery report, or None."""
        return None if self._latency < 0 else self._latency

    def leader_epoch(self) -> int | None:
        """The partition leader's epoch the record was written under, or None if unknown."""
        return None if self._leader_epoch < 0 else self._leader_epoch

    def delivery_count(self) -> int | None:
        """How often a share group delivered the record (KIP-932): lakelog has no share groups, so None."""
        return None if self._delivery_count <= 0 else self._delivery_count

    def set_topic(self, topic: str | None) -> None:
        """Replace the topic name."""
        self._topic = topic

    def set_key(self, key: bytes | None) -> None:
        """Replace the key."""
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        """Replace the value."""
        self._value = value

    def set_headers(self, headers: Headers | None) -> None:
        """Replace the headers."""
        self._headers = headers

    def set_error(self, error: KafkaError | None) -> None:
        """Replace the error."""
        self._error = error

    def __len__(self) -> int:
        return len(self._value) if self._value is not None else 0

    def _normalized(self) -> tuple[int, int, int, float, int]:
        """partition, offset, leader epoch, latency, delivery count as confluent-kafka keeps them (missing: -1, offset -1001)."""
        return (
            max(self._partition, -1),
            self._offset if self._offset >= 0 else OFFSET_INVALID,
            max(self._leader_epoch, -1),
            self._latency if self._latency >= 0 else -1.0,
            self._delivery_count if self._delivery_count > 0 else -1,
        )

    def _fields(self) -> tuple[Any, ...]:
        # confluent-kafka compares these: the latency is left out, and of the timestamp only its value.
        partition, offset, leader_epoch, _, _ = self._normalized()
        return (
            self._topic,
            self._value,
            self._key,
            self._headers,
            self._error,
            partition,
            offset,
            leader_epoch,
            self._timestamp[1],
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return False
        return self is other or self._fields() == other._fields()

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # mutable (set_value, ...), and unhashable in confluent-kafka too

    def __reduce__(self) -> tuple[Any, ...]:
        partition, offset, leader_epoch, latency, delivery_count = self._normalized()
        return (
            Message,
            (
                self._topic,
                partition,
                offset,
                self._key,
                self._value,
                self._headers,
                self._error,
                self._timestamp,
                latency,
                leader_epoch,
                delivery_count,
            ),
        )

    def __repr__(self) -> str:
        return f"Message(topic={self._topic}, partition={self.partition()}, offset={self.offset()}, error={self._error})"


_INT16, _INT32, _INT64 = ((-(1 << (bits - 1)), 1 << (bits - 1)) for bits in (16, 32, 64))


def _int_field(value: int | None, what: str, bounds: tuple[int, int]) -> int:
    """An int field of a Message that is no plain int in range: None is missing (-1); confluent-kafka keeps
    these in C ints, so another type is a TypeError and a value out of their range an OverflowError."""
    if value is None:
        return -1
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}")
    if not bounds[0] <= value < bounds[1]:
        raise OverflowError(f"{what} {value} does not fit its C int")
    return int(value)


def _latency(latency: float | None) -> float:
    if latency is None:
        return -1.0
    if not isinstance(latency, (int, float)):
        raise TypeError(f"latency must be a float of seconds, not {type(latency).__name__}")
    return float(latency)


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

    def __str__(self) -> str:
        # confluent-kafka prints metadata objects by their key: a partition by its id.
        return str(self.id)


@dataclass(frozen=True)
class TopicMetadata:
    topic: str
    partitions: dict[int, PartitionMetadata]
    error: KafkaError | None = None

    def __str__(self) -> str:
        return str(self.topic)


@dataclass(frozen=True)
class BrokerMetadata:
    """A broker of ClusterMetadata.brokers, as confluent-kafka's: the root's one node."""

    id: int
    host: str
    port: int = -1

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


@dataclass(frozen=True)
class ClusterMetadata:
    """What `list_topics()` returns: every topic of the root and its partitions."""

    topics: dict[str, TopicMetadata]
    cluster_id: str | None = None
    controller_id: int = 0
    brokers: dict = field(default_factory=dict)
    orig_broker_id: int = 0
    orig_broker_name: str | None = None

    def __str__(self) -> str:
        return str(self.cluster_id)


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
    # confluent-kafka's TopicPartitionInfo: the root's one node (admin.types.Node) leads and holds every partition.
    leader: Any = None
    replicas: list = field(default_factory=list)
    isr: list = field(default_factory=list)


@dataclass(frozen=True)
class TopicDescription:
    """What `describe_topics()` returns for one topic: partitions, offsets and config (and confluent-kafka's fields)."""

    name: str
    partitions: list[PartitionDescription]
    config: dict[str, Any]
    # An admin.types.Uuid: partition 0's Delta table id, new when a topic of the same name is created again (KIP-516).
    topic_id: Any = None
    is_internal: bool = False
    authorized_operations: list | None = None
