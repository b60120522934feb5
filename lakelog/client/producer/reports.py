"""Delivery reports: the one place a produced message's report is built, and the queue poll()/flush() serve.

A batch's reports wait as one entry (its messages, where they landed or why they failed); each message's
`Message` is built when its report is served, and only for a message that has a callback to go to. A batch
none of whose messages has one waits as its count alone: its messages are let go of when it is sent, so a
producer without callbacks does not keep every message it sent until the next poll() (a million objects the
garbage collector walks again and again), as librdkafka keeps no report without a delivery callback.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from lakelog.client.producer.accumulator import ON_DELIVERY, DeliveryCallback, Pending
from lakelog.client.types import TIMESTAMP_CREATE_TIME, Message
from lakelog.errors import KafkaError
from lakelog.typedef import TopicPartitionKey


class DeliveryReports:
    """The reports waiting for the next poll()/flush(), batch by batch, in the order they were made."""

    def __init__(self, default_on_delivery: DeliveryCallback | None) -> None:
        self.default_on_delivery = default_on_delivery  # the `on_delivery` config: for messages produced without one
        # Each batch's messages, or their count when none has a callback to go to.
        self._queue: deque[tuple[TopicPartitionKey, Sequence[Pending] | int, int, KafkaError | None]] = deque()
        self._count = 0
        # Per partition: messages and bytes delivered, and the last offset written (for the statistics).
        self.delivered: dict[TopicPartitionKey, list[int]] = {}

    def report(self, tp: TopicPartitionKey, messages: Sequence[Pending], base_offset: int, error: KafkaError | None) -> None:
        """Queue the report of each message of a batch: delivered at `base_offset` onwards, or failed with `error`."""
        if not messages:
            return
        count = len(messages)
        self._count += count
        if error is None:
            counts = self.delivered.setdefault(tp, [0, 0, -1])
            counts[0] += count
            counts[1] += sum(len(key or b"") + len(value or b"") for key, value, *_ in messages)
            counts[2] = base_offset + count - 1
        if self.default_on_delivery is None and not any(pending[ON_DELIVERY] for pending in messages):
            self._queue.append((tp, count, base_offset, error))
        else:
            self._queue.append((tp, messages, base_offset, error))

    def serve(self) -> int:
        """Call the delivery callback of each report ready, in order; returns how many were served.

        Called under the producer's lock: callbacks run one at a time, on the serving thread. A callback
        that produces again may queue new reports (a batch it fills is sent at once): they are served too.
        A callback that raises leaves the reports after its own queued, as they were."""
        served = 0
        queue = self._queue
        while queue:
            tp, messages, base_offset, error = queue.popleft()
            if isinstance(messages, int):  # no callback to call
                self._count -= messages
                served += messages
                continue
            topic, partition = tp
            default = self.default_on_delivery
            for index, (key, value, headers, timestamp_ms, on_delivery) in enumerate(messages):
                self._count -= 1
                served += 1
                callback = on_delivery or default
                if callback is None:
                    continue
                message = Message(
                    topic,
                    partition,
                    base_offset + index if error is None else None,
                    key,
                    value,
                    headers,
                    error,
                    (TIMESTAMP_CREATE_TIME, timestamp_ms),
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
