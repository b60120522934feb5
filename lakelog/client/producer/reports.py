"""Delivery reports: the one place a produced message's report is built, and the queue poll()/flush() serve.

A batch's reports wait as one entry (its messages, where they landed or why they failed); each message's
`Message` is built when its report is served, and only for a message that has a callback to go to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from lakelog.client.producer.accumulator import DeliveryCallback, Pending
from lakelog.client.types import TIMESTAMP_CREATE_TIME, Message
from lakelog.errors import KafkaError
from lakelog.typedef import TopicPartitionKey


class DeliveryReports:
    """The reports waiting for the next poll()/flush(), batch by batch, in the order they were made."""

    def __init__(self, default_on_delivery: DeliveryCallback | None) -> None:
        self.default_on_delivery = default_on_delivery  # the `on_delivery` config: for messages produced without one
        self._queue: deque[tuple[TopicPartitionKey, Sequence[Pending], int, KafkaError | None]] = deque()
        self._count = 0

    def report(self, tp: TopicPartitionKey, messages: Sequence[Pending], base_offset: int, error: KafkaError | None) -> None:
        """Queue the report of each message of a batch: delivered at `base_offset` onwards, or failed with `error`."""
        if messages:
            self._queue.append((tp, messages, base_offset, error))
            self._count += len(messages)

    def serve(self) -> int:
        """Call the delivery callback of each report ready, in order; returns how many were served.

        Called under the producer's lock: callbacks run one at a time, on the serving thread. A callback
        that produces again may queue new reports (a batch it fills is sent at once): they are served too.
        A callback that raises leaves the reports after its own queued, as they were."""
        served = 0
        queue = self._queue
        while queue:
            tp, messages, base_offset, error = queue.popleft()
            topic, partition = tp
            default = self.default_on_delivery
            for index, pending in enumerate(messages):
                self._count -= 1
                served += 1
                callback = pending.on_delivery or default
                if callback is None:
                    continue
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
                try:
                    callback(error, message)
                except BaseException:
                    rest = messages[index + 1 :]
                    if rest:
                        queue.appendleft((tp, rest, base_offset + index + 1, error))
                    raise
        return served

    def clear(self) -> None:
        """Drop every report unserved (a closed producer)."""
        self._queue.clear()
        self._count = 0

    def __len__(self) -> int:
        """How many messages' reports wait."""
        return self._count
