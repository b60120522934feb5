"""Random topic histories for the Spark tests, and what lakelog's own readers return for them.

A history interleaves, over several partitions and producer ids, transactional
batches (PartitionLog.append with is_transactional headers), COMMIT and ABORT
markers (PartitionLog.append_marker, as the coordinator writes them), plain
batches, and transactions left open; the expected rows come from the Consumer
and from PartitionLog.fetch, never from a model of the rules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lakelog import Consumer, KafkaError, TopicPartition
from lakelog.client.types import OFFSET_BEGINNING
from lakelog.log import READ_COMMITTED, BatchHeader, ControlType, create_topic, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED

PRODUCERS = (11, 12, 13)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class HistoryWriter:
    """Appends to a topic's partitions as transactional producers, the coordinator and plain producers would."""

    root: str
    topic: str
    partitions: int
    rng: random.Random
    epochs: dict[int, int] = field(default_factory=dict)
    sequences: dict[tuple[int, int], int] = field(default_factory=dict)
    # Producer id -> partitions its open transaction wrote.
    open: dict[int, set[int]] = field(default_factory=dict)
    counter: int = 0

    def __post_init__(self) -> None:
        self.logs = [open_partition(self.root, self.topic, p) for p in range(self.partitions)]

    def step(self) -> None:
        kind = self.rng.choices(("txn", "end", "plain"), weights=(5, 2, 1))[0]
        if kind == "txn":
            self.transactional_batch(self.rng.choice(PRODUCERS), self.rng.randrange(self.partitions))
        elif kind == "end" and self.open:
            self.end(self.rng.choice(sorted(self.open)), self.rng.random() < 0.6)
        else:
            self.plain_batch(self.rng.randrange(self.partitions))

    def transactional_batch(self, producer_id: int, partition: int, rows: int | None = None) -> None:
        epoch = self.epochs.setdefault(producer_id, 0)
        sequence = self.sequences.get((producer_id, partition), 0)
        count = rows or self.rng.randint(1, 4)
        self.logs[partition].append(
            self._payload(count, f"p{producer_id}"),
            BatchHeader(producer_id, epoch, sequence, is_transactional=True),
            transaction=_UNVERIFIED,
        )
        self.sequences[(producer_id, partition)] = sequence + count
        self.open.setdefault(producer_id, set()).add(partition)

    def end(self, producer_id: int, commit: bool) -> None:
        """Markers to every partition the transaction wrote, with the bumped epoch (S4.5, S4.6)."""
        self.epochs[producer_id] += 1
        for partition in sorted(self.open.pop(producer_id)):
            self.logs[partition].append_marker(
                producer_id, self.epochs[producer_id], ControlType.COMMIT if commit else ControlType.ABORT
            )
        for key in [key for key in self.sequences if key[0] == producer_id]:
            del self.sequences[key]

    def plain_batch(self, partition: int) -> None:
        self.logs[partition].append(self._payload(self.rng.randint(1, 3), "plain"))

    def _payload(self, count: int, who: str):
        values, keys, headers = [], [], []
        for _ in range(count):
            self.counter += 1
            values.append(f"{who}-{self.counter}".encode())
            keys.append(None if self.counter % 5 == 0 else f"k{self.counter % 7}".encode())
            headers.append(None if self.counter % 3 else [("h", f"{self.counter}".encode())])
        return payload_table(values, keys=keys, headers=headers)


def random_history(root: str, topic: str, rng: random.Random, partitions: int = 3, steps: int = 40) -> HistoryWriter:
    """A topic with a random history; a transaction or two usually stays open (holding the LSO)."""
    create_topic(root, topic, partitions)
    writer = HistoryWriter(root, topic, partitions, rng)
    for _ in range(steps):
        writer.step()
    return writer


def consumer_rows(root: str, topic: str, isolation_level: str) -> list[tuple]:
    """(partition, offset, key, value, headers) of every message a Consumer reads from the beginning."""
    partitions = open_partition(root, topic, 0).config.num_partitions
    conf = {"lakelog.root": root, "enable.partition.eof": True, "isolation.level": isolation_level}
    rows, at_end = [], set()
    with Consumer(conf) as consumer:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while at_end != set(range(partitions)):
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            headers = tuple((k, v) for k, v in message.headers()) if message.headers() else None
            rows.append((message.partition(), message.offset(), message.key(), message.value(), headers))
    return sorted(rows)


def fetch_rows(
    root: str, topic: str, isolation_level: str, start: dict[int, int] | None = None, end: dict[int, int] | None = None
) -> list[tuple]:
    """(partition, offset, key, value, headers, timestamp µs) of data rows PartitionLog.fetch returns in a range."""
    partitions = open_partition(root, topic, 0).config.num_partitions
    rows = []
    for partition in range(partitions):
        log = open_partition(root, topic, partition)
        limit = log.last_stable_offset() if isolation_level == READ_COMMITTED else log.high_watermark()
        offset = (start or {}).get(partition, 0)
        stop = min((end or {}).get(partition, limit), limit)
        while offset < stop:
            fetched = log.fetch(offset, max_records=7, isolation_level=isolation_level)
            for row in fetched.rows.to_pylist():
                if row["control"] is None and row["offset"] < stop:
                    headers = tuple((h["key"], h["value"]) for h in row["headers"]) if row["headers"] else None
                    micros = (row["timestamp"] - EPOCH) // timedelta(microseconds=1)
                    rows.append((partition, row["offset"], row["key"], row["value"], headers, micros))
            offset = fetched.next_offset
    return sorted(rows)


def spark_rows(frame) -> list[tuple]:
    """A Spark DataFrame in the Kafka source's columns as fetch_rows' tuples (with timestamps)."""
    from pyspark.sql import functions as F

    collected = frame.select("partition", "offset", "key", "value", "headers", F.unix_micros("timestamp")).collect()
    return sorted(
        (
            row[0],
            row[1],
            None if row[2] is None else bytes(row[2]),
            None if row[3] is None else bytes(row[3]),
            tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in row[4]) if row[4] else None,
            row[5],
        )
        for row in collected
    )


def without_timestamps(rows: list[tuple]) -> list[tuple]:
    return [row[:5] for row in rows]
