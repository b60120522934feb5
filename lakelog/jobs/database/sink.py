"""`run_sink`: a topic's read_committed records into a database table, exactly once.

The loop: claim the sink's epoch in the database (fencing every older instance of it), read the positions the
database holds, assign a read_committed consumer there (no consumer group: the database alone decides what was
loaded), then per batch: consume, decode, and commit the rows with the new positions in one database transaction
that checks the epoch and the positions it started from. A kill anywhere leaves the database at its last commit;
the restarted sink goes on from its positions. The consumer stops at each partition's LSO (S5.1), so an open
transaction holds the sink back and an aborted one never reaches the table (S5.3).

`step(name)` is called at each step ("read", "copied", "before-commit", "committed") for tests that kill the sink
there. With `follow`, the sink waits for new records after catching up; otherwise it returns once every
partition's position has reached its LSO.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lakelog.client import Consumer, Message, TopicPartition
from lakelog.client.roots import Location, partition_count
from lakelog.client.types import OFFSET_BEGINNING
from lakelog.errors import KafkaException
from lakelog.jobs.database.columns import Column, Decode, Decoded, Decoder

logger = logging.getLogger(__name__)

BATCH_RECORDS = 10_000
POLL_S = 0.2
# The consumer's budgets for one fetch of a partition, above Kafka's defaults (500 records, 1 MiB): a sink reads
# whole batches, and fewer, larger fetches of the same files cost less per record.
FETCH_RECORDS = 10_000
FETCH_BYTES = 16 << 20


class Target(Protocol):
    def prepare(self, columns: Sequence[Column], key: Sequence[str]) -> None: ...
    def claim(self, sink: str) -> int: ...
    def positions(self, sink: str, topic: str) -> dict[int, int]: ...
    def write(
        self,
        sink: str,
        epoch: int,
        topic: str,
        columns: Sequence[Column],
        key: Sequence[str],
        batch: Decoded,
        before: Mapping[int, int | None],
        after: Mapping[int, int],
        step: Callable[[str], None],
    ) -> None: ...
    def close(self) -> None: ...


@dataclass
class SinkResult:
    sink: str
    epoch: int
    batches: int = 0
    records: int = 0
    rows: int = 0
    positions: dict[int, int] = field(default_factory=dict)


def run_sink(
    root: str | Location,
    topic: str,
    target: Target,
    *,
    name: str,
    columns: Sequence[Column],
    mode: str = "append",
    key: Sequence[str] = (),
    offset_columns: bool = False,
    decode: Decode | None = None,
    batch_records: int = BATCH_RECORDS,
    follow: bool = False,
    idle_s: float | None = None,
    step: Callable[[str], None] = lambda _: None,
) -> SinkResult:
    """Load `topic` into the target; see the module's doc. `idle_s` ends a `follow` run after that long with nothing new."""
    if mode not in ("append", "upsert"):
        raise ValueError(f"mode must be append or upsert, not {mode!r}")
    decoder = Decoder(columns, key if mode == "upsert" else (), mode == "upsert", offset_columns, decode)
    target.prepare(decoder.columns, decoder.key)
    epoch = target.claim(name)
    result = SinkResult(name, epoch)
    positions = target.positions(name, topic)
    count = partition_count(root, topic)
    logger.info("sink %s: epoch %d, %s from %s", name, epoch, topic, positions or "the log start")
    consumer = Consumer(
        {
            "lakelog.root": root,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "max.poll.records": FETCH_RECORDS,
            "max.partition.fetch.bytes": FETCH_BYTES,
            "fetch.max.bytes": FETCH_BYTES,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, positions.get(p, OFFSET_BEGINNING)) for p in range(count)])
        before = {p: _position(consumer, topic, p) for p in range(count)}
        # What the database holds (None: never loaded); each batch commits only on top of it.
        stored: dict[int, int | None] = {p: positions.get(p) for p in range(count)}
        idle_since = time.monotonic()
        while True:
            messages = _batch(consumer, batch_records)
            after = {p: _position(consumer, topic, p) for p in range(count)}
            if not messages and after == before:
                if not follow and _caught_up(consumer, topic, count):
                    break
                if follow and idle_s is not None and time.monotonic() - idle_since > idle_s:
                    break
                continue
            idle_since = time.monotonic()
            step("read")
            decoded = decoder.batch(messages)
            target.write(name, epoch, topic, decoder.columns, decoder.key, decoded, stored, after, step)
            step("committed")
            result.batches += 1
            result.records += len(messages)
            result.rows += len(decoded.rows)
            logger.info("sink %s: %d records to %d rows, positions %s", name, len(messages), len(decoded.rows), after)
            before = after
            stored = dict(after)
        result.positions = before
        return result
    finally:
        consumer.close()
        target.close()


def _batch(consumer: Consumer, limit: int) -> list[Message]:
    messages: list[Message] = []
    while len(messages) < limit:
        got = consumer.consume(min(limit - len(messages), FETCH_RECORDS), POLL_S if not messages else 0)
        for message in got:
            if message.error() is not None:
                raise KafkaException(message.error())
        messages += got
        if not got:
            break
    return messages


def _position(consumer: Consumer, topic: str, partition: int) -> int:
    (found,) = consumer.position([TopicPartition(topic, partition)])
    if found.offset < 0:  # not fetched yet: its resolved start
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=False)
        return int(low)
    return int(found.offset)


def _caught_up(consumer: Consumer, topic: str, count: int) -> bool:
    """Every partition's position at its LSO (the end a read_committed consumer reads to): all of it is loaded."""
    for partition in range(count):
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=False)
        if _position(consumer, topic, partition) < end:
            return False
    return True


__all__ = ["BATCH_RECORDS", "SinkResult", "Target", "run_sink"]
