"""`Consumer`: confluent-kafka's consumer API (manual assignment) over partition logs.

Each assigned partition keeps a position and a buffer of fetched rows; `poll`
serves partitions in turn. `isolation.level` is librdkafka's: `read_committed`
(the default) reads up to the last stable offset and never returns rows of open
or aborted transactions; `read_uncommitted` reads up to the high watermark. In
both, control rows (transaction markers) take offsets but are never returned, so
offsets a reader sees have gaps (S5.4): positions move past whatever a fetch
read, returned or not.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog import config
from lakelog.client.producer import split_callbacks
from lakelog.client.types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    Message,
    TopicPartition,
)
from lakelog.errors import InvalidRequest, KafkaError, KafkaException, OffsetOutOfRange
from lakelog.log import READ_COMMITTED, PartitionLog, open_partition
from lakelog.store import check_root

CALLBACK_KEYS = ("on_commit", "error_cb")
# How long poll() sleeps between looks at a partition that has nothing new.
IDLE_BACKOFF_S = 0.05


@dataclass
class _Assigned:
    log: PartitionLog
    position: int
    buffer: list[Message] = field(default_factory=list)
    # The offset of the last partition-EOF event: one event per offset the end is reached at, as librdkafka.
    eof_offset: int | None = None


class Consumer:
    """A consumer reading the topics of `lakelog.root`, shaped like confluent_kafka.Consumer."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        values, _callbacks = split_callbacks(conf, CALLBACK_KEYS)
        self.config = config.load("consumer", values)
        self._root = str(check_root(self.config["lakelog.root"]))
        self._assigned: dict[tuple[str, int], _Assigned] = {}
        self._turn = 0
        self._closed = False

    # -- assignment ----------------------------------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment; each partition starts at its offset or by auto.offset.reset."""
        self._check_open()
        self._assigned = {}
        self.incremental_assign(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        for tp in _partition_list(partitions):
            log = open_partition(self._root, tp.topic, tp.partition)
            self._assigned[(tp.topic, tp.partition)] = _Assigned(log, self._start_offset(log, tp.offset))

    def unassign(self) -> None:
        self._check_open()
        self._assigned = {}

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        for tp in _partition_list(partitions):
            self._assigned.pop((tp.topic, tp.partition), None)

    def assignment(self) -> list[TopicPartition]:
        self._check_open()
        return [TopicPartition(topic, partition) for topic, partition in self._assigned]

    # -- reading ---------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message (or partition-EOF event) of any assigned partition, or None on timeout."""
        messages = self.consume(1, -1 if timeout is None else timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to `num_messages` messages, waiting at most `timeout` seconds (-1: forever) for the first."""
        self._check_open()
        if not isinstance(num_messages, int) or isinstance(num_messages, bool) or not 1 <= num_messages <= 1_000_000:
            raise InvalidRequest(f"num_messages must be an integer from 1 to 1000000, not {num_messages!r}")
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            out: list[Message] = []
            for state in self._in_turn():
                self._fill(state)
                while state.buffer and len(out) < num_messages:
                    out.append(state.buffer.pop(0))
                if len(out) >= num_messages:
                    break
            if out:
                return out
            if deadline is not None and time.monotonic() >= deadline:
                return []
            time.sleep(IDLE_BACKOFF_S if deadline is None else max(0.0, min(IDLE_BACKOFF_S, deadline - time.monotonic())))
            for state in self._assigned.values():
                state.log.refresh()

    def seek(self, partition: TopicPartition) -> None:
        """Move a partition's position; the next message read is at that offset (or after)."""
        self._check_open()
        state = self._assigned.get((partition.topic, partition.partition))
        if state is None:
            raise KafkaException(KafkaError(KafkaError._STATE, f"{partition.topic}-{partition.partition} is not assigned"))
        state.position = self._start_offset(state.log, partition.offset)
        state.buffer.clear()
        state.eof_offset = None

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next message each partition will return."""
        self._check_open()
        result = []
        for tp in _partition_list(partitions):
            state = self._assigned.get((tp.topic, tp.partition))
            offset = OFFSET_INVALID
            if state is not None:
                offset = state.buffer[0].offset() if state.buffer else state.position
            result.append(TopicPartition(tp.topic, tp.partition, offset))
        return result

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high): the log start offset, and the end this consumer reads to.

        The end is the last stable offset in read_committed and the high
        watermark in read_uncommitted, as librdkafka reports it (S5.1).
        """
        self._check_open()
        state = self._assigned.get((partition.topic, partition.partition))
        log = state.log if state is not None else open_partition(self._root, partition.topic, partition.partition)
        if not cached:
            log.refresh()
        return log.log_start_offset(), self._end_offset(log)

    def close(self) -> None:
        self._assigned = {}
        self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def _in_turn(self) -> list[_Assigned]:
        states = list(self._assigned.values())
        if not states:
            return []
        self._turn = (self._turn + 1) % len(states)
        return states[self._turn :] + states[: self._turn]

    def _start_offset(self, log: PartitionLog, offset: int) -> int:
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise InvalidRequest(f"offset must be an integer, not {offset!r}")
        log.refresh()
        low = log.log_start_offset()
        if offset == OFFSET_BEGINNING:
            return low
        if offset == OFFSET_END:
            return self._end_offset(log)
        if offset in (OFFSET_STORED, OFFSET_INVALID):
            return self._reset(log)
        if offset < 0:
            raise InvalidRequest(f"offset {offset} is neither a real offset nor a logical one (-1, -2, -1000, -1001)")
        # Between the LSO and the high watermark is a valid position: it waits for the transactions to end.
        if not low <= offset <= log.high_watermark():
            return self._reset(log)
        return offset

    def _reset(self, log: PartitionLog) -> int:
        policy = self.config["auto.offset.reset"]
        if policy in ("earliest", "smallest", "beginning"):
            return log.log_start_offset()
        if policy in ("latest", "largest", "end"):
            return self._end_offset(log)
        raise OffsetOutOfRange(
            f"{log.topic}-{log.partition} has no valid position and auto.offset.reset=error",
            log_start_offset=log.log_start_offset(),
            log_end_offset=log.log_end_offset(),
        )

    def _end_offset(self, log: PartitionLog) -> int:
        """Where reading ends for now: the LSO in read_committed, the high watermark in read_uncommitted."""
        if self.config["isolation.level"] == READ_COMMITTED:
            return log.last_stable_offset()
        return log.high_watermark()

    def _fill(self, state: _Assigned) -> None:
        if state.buffer:
            return
        log = state.log
        if state.position >= self._end_offset(log):
            log.refresh()
        end = self._end_offset(log)
        # Every fetch moves the position forward, but in read_committed it may return nothing (all aborted).
        while state.position < end and not state.buffer:
            try:
                fetched = log.fetch(
                    state.position,
                    max_records=self.config["max.poll.records"],
                    max_bytes=self.config["max.partition.fetch.bytes"],
                    isolation_level=self.config["isolation.level"],
                )
            except OffsetOutOfRange:
                state.position = self._reset(log)
                return
            state.position = fetched.next_offset
            state.buffer.extend(_messages(log.topic, log.partition, fetched.rows))
        if not state.buffer and self.config["enable.partition.eof"] and state.eof_offset != state.position:
            state.eof_offset = state.position
            eof = KafkaError(KafkaError._PARTITION_EOF, "partition EOF")
            state.buffer.append(Message(log.topic, log.partition, state.position, error=eof))


def _messages(topic: str, partition: int, rows: pa.Table) -> list[Message]:
    """Data rows as Messages; control rows are skipped (they only take offsets)."""
    columns = rows.select(["offset", "key", "value", "headers", "control"]).to_pydict()
    timestamps_ms = pc.divide(rows.column("timestamp").cast(pa.int64()), 1000).to_pylist()
    out = []
    for offset, timestamp, key, value, headers, control in zip(
        columns["offset"], timestamps_ms, columns["key"], columns["value"], columns["headers"], columns["control"]
    ):
        if control is not None:
            continue
        out.append(
            Message(
                topic,
                partition,
                offset,
                key,
                value,
                None if headers is None else [(h["key"], h["value"]) for h in headers],
                (TIMESTAMP_CREATE_TIME, timestamp),
            )
        )
    return out


def _partition_list(partitions: Any) -> list[TopicPartition]:
    if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in partitions):
        raise InvalidRequest("partitions must be a list of TopicPartition")
    return list(partitions)
