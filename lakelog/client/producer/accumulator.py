"""The producer's record accumulator (Kafka's `RecordAccumulator`): produced messages batched per partition.

A partition's open batch is closed when `batch.num.messages` or `batch.size` is reached, when
`linger.ms` has passed on the producer's clock, or when a message's `expected_offset` cannot join
it. The accumulator only holds batches; the producer hands the closed ones to its sender.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakelog.client.types import Headers, Message
from lakelog.errors import InvalidType, KafkaError
from lakelog.typedef import TopicPartitionKey

# A delivery report's callback: (the error or None, the message).
DeliveryCallback = Callable[[KafkaError | None, Message], None]


def to_bytes(what: str, value: Any) -> bytes | None:
    """A key, value or header value as bytes (a str as UTF-8); any other type is a TypeError, as in confluent-kafka."""
    if value is None or value.__class__ is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidType(f"{what} must be bytes, str or None, not {type(value).__name__}")


def to_headers(headers: Any) -> Headers | None:
    """Headers given as a dict or a list of (str, value) pairs, as a list; a TypeError otherwise, as in confluent-kafka."""
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        items = list(headers.items())
    elif isinstance(headers, (list, tuple)):
        items = list(headers)
        if not all(isinstance(item, (tuple, list)) and len(item) == 2 for item in items):
            raise InvalidType("headers are expected to be a list of (key, value) tuples")
    else:
        raise InvalidType(f"headers must be a dict or a list of (key, value) tuples, not {type(headers).__name__}")
    for name, _ in items:
        if not isinstance(name, str):
            raise InvalidType(f"headers must have str names, not {type(name).__name__}")
    return [(name, to_bytes("header value", value)) for name, value in items]


def check_batch_message(index: int, message: Any) -> None:
    """TypeError for a produce_batch() message confluent-kafka would refuse before queueing any."""
    if not isinstance(message, dict):
        raise TypeError(f"Message at index {index} must be a dict")
    for name in ("value", "key"):
        item = message.get(name)
        if item is not None and not isinstance(item, (bytes, str)):
            raise TypeError(f"Message {name} at index {index} must be bytes or str")
    partition = message.get("partition")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)):
        raise TypeError(f"Message partition at index {index} must be int")
    timestamp = message.get("timestamp")
    if timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool)):
        raise TypeError(f"Message timestamp at index {index} must be int")
    callback = message.get("callback")
    if callback is not None and not callable(callback):
        raise TypeError(f"Message callback at index {index} must be callable")
    headers = message.get("headers")
    if headers is not None and not isinstance(headers, (Mapping, list, tuple)):
        raise ValueError(f"Invalid headers at index {index}")


@dataclass(slots=True)
class Pending:
    """One produced message waiting in a partition's open batch."""

    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp_ms: int
    on_delivery: DeliveryCallback | None


@dataclass(slots=True)
class Batch:
    """A partition's open batch: its messages, their size, and the offset its first must land at (if asked)."""

    topic: str
    partition: int
    created_ms: float  # on the producer's clock; linger is timed in its milliseconds (seconds as floats lose the last one)
    expected_offset: int | None = None
    messages: list[Pending] = field(default_factory=list)
    size: int = 0

    @property
    def tp(self) -> TopicPartitionKey:
        return (self.topic, self.partition)

    def accepts(self, expected_offset: int | None) -> bool:
        """Whether a message asking for `expected_offset` (None: anywhere) can join this batch."""
        if expected_offset is None or not self.messages:
            return True
        return self.expected_offset is not None and expected_offset == self.expected_offset + len(self.messages)


class RecordAccumulator:
    """The open batches, one per partition, in the order they were opened."""

    def __init__(self, max_messages: int, max_bytes: int, linger_ms: float, clock: Callable[[], float]) -> None:
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._linger_ms = linger_ms
        self._clock = clock
        self._batches: dict[TopicPartitionKey, Batch] = {}

    def append(self, tp: TopicPartitionKey, message: Pending, size: int, expected_offset: int | None) -> Iterator[Batch]:
        """Add a message to its partition's batch; yields the batches closed by it, to be sent in that order:
        the open one if the message cannot join it (before the message is added), then the message's own if full."""
        batches = self._batches
        batch = batches.get(tp)
        if batch is not None and not batch.accepts(expected_offset):
            del batches[tp]
            yield batch
            batch = None
        if batch is None:
            batch = batches[tp] = Batch(tp[0], tp[1], self._clock(), expected_offset)
        batch.messages.append(message)
        batch.size += size
        if len(batch.messages) >= self._max_messages or batch.size >= self._max_bytes:
            del batches[tp]
            yield batch

    def pop(self, tp: TopicPartitionKey) -> Batch | None:
        """Close a partition's batch (None: it has none)."""
        return self._batches.pop(tp, None)

    def lingered(self) -> list[TopicPartitionKey]:
        """The partitions whose batch has waited linger.ms on the producer's clock."""
        now_ms = self._clock()  # read even with nothing queued: each look of a waiting poll() reads the clock
        return [tp for tp, batch in self._batches.items() if now_ms - batch.created_ms >= self._linger_ms]

    def until_linger_s(self, idle_s: float) -> float:
        """Seconds until the oldest batch has lingered linger.ms (0: due now; `idle_s` when nothing is queued)."""
        if not self._batches:
            return idle_s
        oldest = min(batch.created_ms for batch in self._batches.values())
        return max(oldest + self._linger_ms - self._clock(), 0) / 1000

    def partitions(self) -> list[TopicPartitionKey]:
        """The partitions holding a batch."""
        return list(self._batches)

    def drain(self) -> list[Batch]:
        """Close every batch (purge, abort, close)."""
        batches = list(self._batches.values())
        self._batches.clear()
        return batches

    def queued(self) -> int:
        """How many messages wait in open batches."""
        return sum(len(batch.messages) for batch in self._batches.values())

    def __bool__(self) -> bool:
        return bool(self._batches)
