"""Delivery reports: the one place a produced message's report is built, and the queue poll()/flush() serve."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from lakelog.client.producer.accumulator import DeliveryCallback, Pending
from lakelog.client.types import TIMESTAMP_CREATE_TIME, Message
from lakelog.errors import KafkaError
from lakelog.typedef import TopicPartitionKey


class DeliveryReports:
    """The reports waiting for the next poll()/flush(), each with the callback it goes to."""

    def __init__(self, default_on_delivery: DeliveryCallback | None) -> None:
        self.default_on_delivery = default_on_delivery  # the `on_delivery` config: for messages produced without one
        self._queue: deque[tuple[DeliveryCallback | None, KafkaError | None, Message]] = deque()

    def report(self, tp: TopicPartitionKey, messages: Iterable[Pending], base_offset: int, error: KafkaError | None) -> None:
        """Queue the report of each message of a batch: delivered at `base_offset` onwards, or failed with `error`."""
        topic, partition = tp
        default = self.default_on_delivery
        append = self._queue.append
        for index, pending in enumerate(messages):
            message = Message(
                topic,
                partition,
                base_offset + index if error is None else None,
                pending.key,
                pending.value,
                pending.headers,
                error,
                (TIMESTAMP_CREATE_TIME, pending.timestamp_ms),
            )
            append((pending.on_delivery or default, error, message))

    def serve(self) -> int:
        """Call the delivery callback of each report ready, in order; returns how many were served.

        Called under the producer's lock: callbacks run one at a time, on the serving thread. A callback
        that produces again may queue new reports (a batch it fills is sent at once): they are served too."""
        served = 0
        queue = self._queue
        while queue:
            callback, error, message = queue.popleft()
            served += 1
            if callback is not None:
                callback(error, message)
        return served

    def clear(self) -> None:
        """Drop every report unserved (a closed producer)."""
        self._queue.clear()

    def __len__(self) -> int:
        return len(self._queue)
