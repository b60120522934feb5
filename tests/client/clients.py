"""Helpers of the client API tests: clients on a root, and reading a partition back."""

from __future__ import annotations

import time

from lakelog import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from lakelog.log import open_partition

# A linger long enough that only batch.num.messages, batch.size or flush() send a batch.
NEVER_LINGER_MS = 600_000


def producer(lake: str, **conf) -> Producer:
    return Producer({"lakelog.root": lake, **conf})


def consumer(lake: str, **conf) -> Consumer:
    return Consumer({"lakelog.root": lake, **conf})


def read_all(lake: str, topic: str, partition: int = 0, timeout: float = 5.0) -> list[Message]:
    """Every data message of a partition from the beginning, stopping at the partition EOF event."""
    with consumer(lake, **{"enable.partition.eof": True}) as c:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = c.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                return out
            out.append(message)
    raise AssertionError(f"no partition EOF for {topic}-{partition} within {timeout} s")


def leo(lake: str, topic: str, partition: int = 0) -> int:
    return open_partition(lake, topic, partition).log_end_offset()


def version(lake: str, topic: str, partition: int = 0) -> int:
    return open_partition(lake, topic, partition).version


# -- config ------------------------------------------------------------------------
