"""Where a `Consumer` reads: the assigned partitions, each with a position and a buffer of fetched rows.

A position starts at the offset given to `assign`/`seek`, at the group's committed
offset (resolved before the first fetch, `offsets`), or by
`auto.offset.reset`. A fetch reads up to the last stable offset in read_committed
and up to the high watermark in read_uncommitted; control rows take offsets but
are never returned (S5.4). A position that retention or delete_records left below
the log start follows `auto.offset.reset` as librdkafka does (S9.1): earliest
moves to the log start, latest to the end, error delivers one `_AUTO_OFFSET_RESET`
message error and fetches nothing more there until the application seeks.

A paused partition (`pause`/`resume`) is passed over by poll, its position and
buffered rows kept. A partition assigned by hand before its topic exists is
accepted, as librdkafka accepts it: poll reports it once (UNKNOWN_TOPIC_OR_PART)
and starts reading it when the topic appears.
"""

from __future__ import annotations

import logging
import time
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.client.consumer.state import Assigned, ConsumerState, state_error
from lakelog.client.types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    Message,
    TopicPartition,
)
from lakelog.errors import (
    CorruptRecord,
    InvalidRequest,
    InvalidType,
    KafkaError,
    KafkaException,
    OffsetOutOfRange,
    UnknownTopicOrPartition,
)
from lakelog.log import READ_COMMITTED, PartitionLog, open_partition, topic_config
from lakelog.store import Location
from lakelog.typedef import TopicPartitionKey

logger = logging.getLogger(__name__)


# The long poll's first wait after a look at the store that found nothing new, and its floor (fetch.wait.max.ms 0).
IDLE_LOOK_S = 0.05
MIN_LOOK_S = 0.001


class Fetcher:
    """A Consumer's assignment, positions and fetches (its state's `assigned`, `pending`, `stored`, `events`, `turn`)."""

    def __init__(self, state: ConsumerState) -> None:
        self._state = state

    # -- assignment ----------------------------------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment; each partition starts at its offset, the committed offset, or by auto.offset.reset."""
        self._state.check_open()
        self._state.check_manual("assign")
        partitions = partition_list(partitions)
        self._state.assigned, self._state.stored, self._state.pending = {}, {}, {}
        self.add(partitions, pending_if_missing=True)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add partitions to the assignment; one already assigned is refused (_CONFLICT) and nothing is added,
        as librdkafka's rd_kafka_assignment_add."""
        self._state.check_open()
        self._state.check_manual("incremental_assign")
        partitions = partition_list(partitions)
        for key in _distinct_keys(partitions):
            if key in self._state.assigned or key in self._state.pending:
                raise KafkaException(
                    KafkaError(KafkaError._CONFLICT, f"{key[0]} [{key[1]}] is already part of the current assignment")
                )
        self.add(partitions, pending_if_missing=True)

    def unassign(self) -> None:
        self._state.check_open()
        self._state.check_manual("unassign")
        self._state.assigned, self._state.stored, self._state.pending = {}, {}, {}

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._state.check_open()
        self._state.check_manual("incremental_unassign")
        partitions = partition_list(partitions)
        for key in _distinct_keys(partitions):
            if key not in self._state.assigned and key not in self._state.pending:
                raise KafkaException(
                    KafkaError(
                        KafkaError._INVALID_ARG,
                        f"{key[0]} [{key[1]}] can't be unassigned since it is not in the current assignment",
                    )
                )
        for tp in partitions:
            self._state.assigned.pop((tp.topic, tp.partition), None)
            self._state.stored.pop((tp.topic, tp.partition), None)
            self._state.pending.pop((tp.topic, tp.partition), None)

    def assignment(self) -> list[TopicPartition]:
        self._state.check_open()
        return [TopicPartition(topic, partition) for topic, partition in [*self._state.assigned, *self._state.pending]]

    def pause(self, partitions: list[TopicPartition]) -> None:
        """poll/consume return nothing of these partitions until `resume`; their positions are kept.

        A partition that is not assigned is passed over, as librdkafka reports it
        per partition and confluent-kafka drops that report. A pause lasts as long
        as the assignment of the partition: assigned again, it is not paused.
        """
        self._state.check_open()
        self._set_paused(partitions, True)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Return messages of these paused partitions again, from where they were paused."""
        self._state.check_open()
        self._set_paused(partitions, False)

    # -- positions -------------------------------------------------------------------

    def seek(self, partition: TopicPartition) -> None:
        """Move a partition's position; the next message read is at that offset (or after).

        `OFFSET_STORED` / `OFFSET_INVALID` go back to the group's committed offset.
        """
        self._state.check_open()
        partition = _one_partition(partition)
        state = self._state.assigned.get((partition.topic, partition.partition))
        if state is None:
            raise state_error(f"{partition.topic}-{partition.partition} is not assigned")
        state.position = self._start_offset(state.log, partition.offset)
        state.buffer.clear()
        state.eof_offset = None
        state.reset_error_offset = None
        state.resolve_after = 0.0
        state.resolve_retries = 0

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next message each partition will return (OFFSET_INVALID if not known yet)."""
        self._state.check_open()
        result = []
        for tp in partition_list(partitions):
            state = self._state.assigned.get((tp.topic, tp.partition))
            offset = OFFSET_INVALID
            if state is not None and state.position is not None:
                offset = fetched_offset(state.buffer[0]) if state.buffer else state.position
            result.append(TopicPartition(tp.topic, tp.partition, offset))
        return result

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high): the log start offset, and the end this consumer reads to.

        The end is the last stable offset in read_committed and the high
        watermark in read_uncommitted, as librdkafka reports it (S5.1).
        """
        self._state.check_open()
        partition = _one_partition(partition)
        if cached and (partition.topic, partition.partition) in self._state.pending:
            return OFFSET_INVALID, OFFSET_INVALID  # as librdkafka: nothing known of it yet
        state = self._state.assigned.get((partition.topic, partition.partition))
        log = state.log if state is not None else open_partition(self._state.root, partition.topic, partition.partition)
        if not cached:
            log.refresh()
        return log.log_start_offset(), self.end_offset(log)

    # -- internals: positions and fetches ------------------------------------------------

    def _set_paused(self, partitions: list[TopicPartition], paused: bool) -> None:
        for tp in partition_list(partitions):
            state = self._state.assigned.get((tp.topic, tp.partition))
            if state is not None and state.paused != paused:
                state.paused = paused
                self._state.logger.info("%s-%d: %s", tp.topic, tp.partition, "paused" if paused else "resumed")

    def position_of(self, tp: TopicPartitionKey) -> int:
        state = self._state.assigned.get(tp)
        if state is None or state.position is None:
            return OFFSET_INVALID
        return fetched_offset(state.buffer[0]) if state.buffer else state.position

    def add(self, partitions: list[TopicPartition], pending_if_missing: bool = False) -> None:
        """Assign `partitions`; with `pending_if_missing` (assign by hand, as librdkafka takes it) a partition
        of a topic that does not exist yet is reported once by poll (UNKNOWN_TOPIC_OR_PART) and starts when
        it appears."""
        missing = []
        for tp in partitions:
            key = (tp.topic, tp.partition)
            try:
                log = open_partition(self._state.root, tp.topic, tp.partition)
            except UnknownTopicOrPartition:
                if not pending_if_missing or _topic_exists(self._state.root, tp.topic):
                    raise  # a partition past an existing topic's count is refused, as before
                _check_offset(tp.offset)
                if key not in self._state.pending:
                    missing.append(f"{tp.topic}-{tp.partition}")
                    error = KafkaError(
                        KafkaError.UNKNOWN_TOPIC_OR_PART, f"{tp.topic} [{tp.partition}]: Broker: Unknown topic or partition"
                    )
                    self._state.events.append(Message(tp.topic, tp.partition, OFFSET_INVALID, error=error))
                self._state.pending[key] = tp.offset
                continue
            self._state.pending.pop(key, None)
            self._state.assigned[key] = Assigned(log, self._start_offset(log, tp.offset))
        if missing:
            self._state.logger.warning(
                "assigned partitions of topics that do not exist, waiting for them: %s", ", ".join(missing)
            )

    def open_pending(self) -> None:
        """Start the assigned partitions whose topic did not exist, if it does now (one look per topic)."""
        appeared = {topic for topic, _ in self._state.pending if _topic_exists(self._state.root, topic)}
        for (topic, partition), offset in list(self._state.pending.items()):
            if topic not in appeared:
                continue
            try:
                log = open_partition(self._state.root, topic, partition)
            except UnknownTopicOrPartition:
                continue  # past the count of the topic that appeared: stays waiting
            self._state.logger.info("%s-%d exists now: reading it", topic, partition)
            del self._state.pending[(topic, partition)]
            self._state.assigned[(topic, partition)] = Assigned(log, self._start_offset(log, offset))

    def in_turn(self) -> list[Assigned]:
        states = list(self._state.assigned.values())
        if not states:
            return []
        self._state.turn = (self._state.turn + 1) % len(states)
        return states[self._state.turn :] + states[: self._state.turn]

    def _start_offset(self, log: PartitionLog, offset: int) -> int | None:
        """Where reading starts; None (with group.id) for the committed offset, resolved before the first fetch."""
        _check_offset(offset)
        if offset in (OFFSET_STORED, OFFSET_INVALID) and self._state.group_id is not None:
            return None
        log.refresh()
        low = log.log_start_offset()
        if offset == OFFSET_BEGINNING:
            return low
        if offset == OFFSET_END:
            return self.end_offset(log)
        if offset in (OFFSET_STORED, OFFSET_INVALID):
            return self.reset(log)
        if offset < 0:
            raise InvalidRequest(f"offset {offset} is neither a real offset nor a logical one (-1, -2, -1000, -1001)")
        # Between the LSO and the high watermark is a valid position: it waits for the transactions to end.
        if not low <= offset <= log.high_watermark():
            return self.reset(log)
        return offset

    def reset(self, log: PartitionLog) -> int:
        policy = self._state.config["auto.offset.reset"]
        if policy in ("earliest", "smallest", "beginning"):
            offset = log.log_start_offset()
        elif policy in ("latest", "largest", "end"):
            offset = self.end_offset(log)
        else:
            offset = None
        if offset is not None:
            self._state.logger.info(
                "%s-%d: no valid position, auto.offset.reset=%s: reading from offset %d", log.topic, log.partition, policy, offset
            )
            return offset
        raise OffsetOutOfRange(
            f"{log.topic}-{log.partition} has no valid position and auto.offset.reset=error",
            log_start_offset=log.log_start_offset(),
            log_end_offset=log.log_end_offset(),
        )

    def end_offset(self, log: PartitionLog) -> int:
        """Where reading ends for now: the LSO in read_committed, the high watermark in read_uncommitted."""
        if self._state.config["isolation.level"] == READ_COMMITTED:
            return log.last_stable_offset()
        return log.high_watermark()

    def look(self, state: Assigned) -> None:
        """Look at the store for the partition's new commits if its long poll is due (Kafka's fetch.wait.max.ms).

        A look that finds nothing new waits before the next: IDLE_LOOK_S, then twice as long each time, up to
        fetch.wait.max.ms, so an idle partition costs at most one look (two GETs) per fetch.wait.max.ms;
        a commit is seen within that wait of landing. A look that finds one makes the next immediate."""
        now = time.monotonic()
        if now < state.next_look:
            return
        if state.log.refresh():
            state.idle_wait, state.next_look = 0.0, now
            return
        longest = max(self._state.config["fetch.wait.max.ms"] / 1000, MIN_LOOK_S)
        state.idle_wait = min(max(state.idle_wait * 2, IDLE_LOOK_S), longest)
        state.next_look = now + state.idle_wait

    def next_look(self) -> float | None:
        """When the next look at any assigned partition not paused is due (time.monotonic()); None: none assigned."""
        return min((state.next_look for state in self._state.assigned.values() if not state.paused), default=None)

    def fill(self, state: Assigned) -> None:
        if state.buffer or state.position is None or state.position == state.reset_error_offset:
            return
        log = state.log
        if state.position >= self.end_offset(log):
            self.look(state)
        end = self.end_offset(log)
        if state.position >= end and end < log.high_watermark():
            # Held at the LSO by an open transaction: the broker's timer aborts it once past its timeout (S4.7).
            if self._state.transaction_timer.held(f"{log.topic}-{log.partition} at its last stable offset {end}"):
                log.refresh()
                end = self.end_offset(log)
        # Every fetch moves the position forward, but in read_committed it may return nothing (all aborted).
        while state.position < end and not state.buffer:
            try:
                try:
                    fetched = log.fetch(
                        state.position,
                        max_records=self._state.config["max.poll.records"],
                        # One partition per fetch here: both of Kafka's byte budgets bound it.
                        max_bytes=min(self._state.config["max.partition.fetch.bytes"], self._state.config["fetch.max.bytes"]),
                        isolation_level=self._state.config["isolation.level"],
                    )
                except CorruptRecord:
                    # Vacuum deleted a file retention removed after this handle's snapshot: out of range if below the start.
                    log.refresh()
                    low = log.log_start_offset()
                    if state.position >= low:
                        raise
                    raise OffsetOutOfRange(
                        f"{log.topic}-{log.partition}: offset {state.position} is below the log start offset {low}",
                        log_start_offset=low,
                        log_end_offset=log.log_end_offset(),
                    ) from None
            except OffsetOutOfRange as error:
                if self._state.config["auto.offset.reset"] == "error":
                    state.reset_error_offset = state.position
                    failed = KafkaError(KafkaError._AUTO_OFFSET_RESET, f"{error}, and auto.offset.reset=error")
                    state.buffer.append(Message(log.topic, log.partition, state.position, error=failed))
                    return
                state.position = self.reset(log)
                end = self.end_offset(log)
                continue
            state.position = fetched.next_offset
            state.buffer.extend(_messages(log.topic, log.partition, fetched.rows))
        if not state.buffer and self._state.config["enable.partition.eof"] and state.eof_offset != state.position:
            state.eof_offset = state.position
            eof = KafkaError(KafkaError._PARTITION_EOF, "partition EOF")
            state.buffer.append(Message(log.topic, log.partition, state.position, error=eof))


def _messages(topic: str, partition: int, rows: pa.Table) -> list[Message]:
    """Data rows as Messages; control rows are skipped (they only take offsets)."""
    columns = rows.select(["offset", "key", "value", "headers", "control"]).to_pydict()
    timestamps_ms = pc.divide(rows.column("timestamp").cast(pa.int64()), 1000).to_pylist()
    out = []
    for offset, timestamp, key, value, headers, control in zip(
        columns["offset"], timestamps_ms, columns["key"], columns["value"], columns["headers"], columns["control"], strict=True
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
                None,
                (TIMESTAMP_CREATE_TIME, timestamp),
            )
        )
    return out


def _topic_exists(root: str | Location, topic: str) -> bool:
    try:
        topic_config(root, topic)
    except UnknownTopicOrPartition:
        return False
    return True


def _check_offset(offset: Any) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise InvalidRequest(f"offset must be an integer, not {offset!r}")


def fetched_offset(message: Message) -> int:
    """The offset of a message a fetch made (a record, or a partition-EOF event at the position): always set."""
    return cast(int, message.offset())  # Message.offset() is Optional only for messages built without one


def fetched_key(message: Message) -> TopicPartitionKey:
    """The partition of a message a fetch made: its topic and partition are always set."""
    return cast(TopicPartitionKey, (message.topic(), message.partition()))  # Optional only for messages built without


def partition_list(partitions: Any) -> list[TopicPartition]:
    if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in partitions):
        raise InvalidType("expected list of TopicPartition")
    return list(partitions)


def _distinct_keys(partitions: list[TopicPartition]) -> list[TopicPartitionKey]:
    """The partitions' keys; a partition named twice is refused (KafkaException _INVALID_ARG, not a ValueError), as
    librdkafka refuses it."""
    keys: list[TopicPartitionKey] = []
    for tp in partitions:
        key = (tp.topic, tp.partition)
        if key in keys:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, f"Duplicate {tp.topic} [{tp.partition}] in input list"))
        keys.append(key)
    return keys


def _one_partition(partition: Any) -> TopicPartition:
    if not isinstance(partition, TopicPartition):
        raise InvalidType("expected TopicPartition")
    return partition
