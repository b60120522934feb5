"""The producer's record accumulator (Kafka's `RecordAccumulator`): produced messages batched per partition.

A partition's open batch is closed when `batch.num.messages` or `batch.size` is reached, when
`linger.ms` has passed on the producer's clock, or when a message's `expected_offset` cannot join
it. The accumulator only holds batches; the producer hands the closed ones to its sender.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakelog.client.types import Headers, Message
from lakelog.errors import InvalidArgument, InvalidType, KafkaError
from lakelog.typedef import TopicPartitionKey

# A delivery report's callback: (the error or None, the message).
DeliveryCallback = Callable[[KafkaError | None, Message], None]


def to_bytes(what: str, value: Any) -> bytes | None:
    """A key, value or header value as bytes (a str as UTF-8); any other type is a TypeError, as in confluent-kafka.

    A str that is no UTF-8 (a lone surrogate) is InvalidArgument: refused at the call, never a UnicodeEncodeError."""
    if value is None or value.__class__ is bytes:
        return value
    if isinstance(value, str):
        try:
            return value.encode()
        except UnicodeEncodeError as error:
            raise InvalidArgument(f"{what} is a str UTF-8 cannot encode ({error.reason} at {error.start})") from None
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
        to_bytes("header name", name)  # the log stores names as UTF-8: one that is none fails here, not at the send
    return [(name, to_bytes("header value", value)) for name, value in items]


def check_batch(topic: Any, messages: Any, partition: Any) -> bool:
    """TypeError for a produce_batch() call confluent-kafka would refuse before queueing any; False: nothing to queue.

    An empty list is checked no further (confluent-kafka returns 0 at once), and a closed producer raises after this."""
    if not isinstance(messages, list):
        raise TypeError("messages must be a list")
    if not messages:
        return False
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, not {type(topic).__name__}")
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise TypeError(f"partition must be int, not {type(partition).__name__}")
    for index, message in enumerate(messages):
        check_batch_message(index, message)
    return True


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


# One produced message waiting in a partition's open batch: (key, value, headers, timestamp_ms, on_delivery).
# A plain tuple rather than an object: one of bytes, ints and None is untracked by the garbage collector at its
# first collection, so the messages a busy producer holds are not walked by every later collection (objects were:
# a third of produce()'s time for a million messages went to the collector).
Pending = tuple[bytes | None, bytes | None, Headers | None, int, DeliveryCallback | None]
KEY, VALUE, HEADERS, TIMESTAMP_MS, ON_DELIVERY = range(5)


@dataclass(slots=True)
class Batch:
    """A partition's open batch: its messages, their size, and the offset its first must land at (if asked)."""

    topic: str
    partition: int
    created_ms: float  # on the producer's clock; linger is timed in its milliseconds (seconds as floats lose the last one)
    expected_offset: int | None = None
    messages: list[Pending] = field(default_factory=list)
    size: int = 0
    largest: int = 0  # the largest message's size: the topic's max.message.bytes is checked on it (limits)

    @property
    def tp(self) -> TopicPartitionKey:
        return (self.topic, self.partition)

    def accepts(self, expected_offset: int | None) -> bool:
        """Whether a message asking for `expected_offset` (None: anywhere) can join this batch."""
        if expected_offset is None or not self.messages:
            return True
        return self.expected_offset is not None and expected_offset == self.expected_offset + len(self.messages)


class RecordAccumulator:
    """The open batches, one per partition, in the order they were opened, and when the oldest was opened."""

    def __init__(self, max_messages: int, max_bytes: int, linger_ms: float, clock: Callable[[], float]) -> None:
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._linger_ms = linger_ms
        self._clock = clock
        self._batches: dict[TopicPartitionKey, Batch] = {}
        # When the oldest open batch will have lingered linger.ms, on the producer's clock (inf: none is open): the
        # producer compares its clock with it on every produce(), with no call.
        self.due_ms: float = math.inf

    def refusing(self, tp: TopicPartitionKey, expected_offset: int | None) -> Batch | None:
        """Close the partition's batch if a message asking for `expected_offset` cannot join it (then send it first)."""
        batch = self._batches.get(tp)
        if batch is None or batch.accepts(expected_offset):
            return None
        return self.pop(tp)

    def append(
        self, tp: TopicPartitionKey, message: Pending, size: int, expected_offset: int | None, now_ms: float
    ) -> Batch | None:
        """Add a message to its partition's batch (opened at `now_ms` if none is open); the batch if that filled it
        (closed: send it)."""
        batch = self._batches.get(tp)
        if batch is None:
            batch = self._batches[tp] = Batch(tp[0], tp[1], now_ms, expected_offset)
            due = now_ms + self._linger_ms
            if due < self.due_ms:
                self.due_ms = due
        messages = batch.messages
        messages.append(message)
        batch.size += size
        if size > batch.largest:
            batch.largest = size
        if len(messages) >= self._max_messages or batch.size >= self._max_bytes:
            return self.pop(tp)
        return None

    def pop(self, tp: TopicPartitionKey) -> Batch | None:
        """Close a partition's batch (None: it has none)."""
        batch = self._batches.pop(tp, None)
        if batch is not None and batch.created_ms + self._linger_ms == self.due_ms:
            batches = self._batches
            self.due_ms = min(b.created_ms for b in batches.values()) + self._linger_ms if batches else math.inf
        return batch

    def any_lingered(self, now_ms: float) -> bool:
        """Whether some batch has waited linger.ms at `now_ms` (on the producer's clock)."""
        return now_ms >= self.due_ms

    def lingered(self) -> list[TopicPartitionKey]:
        """The partitions whose batch has waited linger.ms on the producer's clock."""
        now_ms = self._clock()  # read even with nothing queued: each look of a waiting poll() reads the clock
        if not self.any_lingered(now_ms):
            return []
        return [tp for tp, batch in self._batches.items() if now_ms >= batch.created_ms + self._linger_ms]

    def until_linger_s(self, idle_s: float) -> float:
        """Seconds until the oldest batch has lingered linger.ms (0: due now; `idle_s` when nothing is queued)."""
        if self.due_ms == math.inf:
            return idle_s
        return max(self.due_ms - self._clock(), 0) / 1000

    def poll_deadline(self, now: float, timeout: float | None, step_s: float) -> float:
        """When a poll started `now` gives up, on the monotonic clock. Without a timeout it waits for the queued
        batches' linger (in real time: a clock passed in that stands still cannot hold it longer);
        with nothing queued nothing can arrive, so it returns at once. `timeout` is checked (lakelog.client.timeouts)."""
        if timeout is None or timeout < 0:
            # One step of slack: the producer's clock counts whole milliseconds, the monotonic clock does not.
            return now + (self.until_linger_s(step_s) + step_s if self._batches else 0.0)
        return now + timeout

    def partitions(self) -> list[TopicPartitionKey]:
        """The partitions holding a batch."""
        return list(self._batches)

    def drain(self) -> list[Batch]:
        """Close every batch (purge, abort, close)."""
        batches = list(self._batches.values())
        self._batches.clear()
        self.due_ms = math.inf
        return batches

    def queued(self) -> int:
        """How many messages wait in open batches."""
        return sum(len(batch.messages) for batch in self._batches.values())

    def __bool__(self) -> bool:
        return bool(self._batches)
