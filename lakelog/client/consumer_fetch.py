"""Where a `Consumer` reads: the assigned partitions, each with a position and a buffer of fetched rows.

A position starts at the offset given to `assign`/`seek`, at the group's committed
offset (resolved before the first fetch, `consumer_offsets`), or by
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
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.client.consumer_state import _ConsumerState
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


@dataclass
class _Assigned:
    log: PartitionLog
    # None: not known yet; taken from the group's committed offset before the first fetch.
    position: int | None
    buffer: list[Message] = field(default_factory=list)
    # The offset of the last partition-EOF event: one event per offset the end is reached at, as librdkafka.
    eof_offset: int | None = None
    # When to ask for the committed offset again after a pending transaction held it (S7.3), and how often it did.
    resolve_after: float = 0.0
    resolve_retries: int = 0
    # The position an auto.offset.reset=error was reported at: no fetch there until a seek.
    reset_error_offset: int | None = None
    # pause(): poll/consume return nothing of it (buffered rows and position kept) until resume().
    paused: bool = False


class _Fetching(_ConsumerState):
    """`Consumer`'s assignment, positions and fetches, over its `config`, `_root`, `_group_id`,
    `_assigned`, `_pending`, `_stored`, `_events` and `_turn`."""

    # -- assignment ----------------------------------------------------------------

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment; each partition starts at its offset, the committed offset, or by auto.offset.reset."""
        self._check_open()
        self._check_manual("assign")
        partitions = _partition_list(partitions)
        self._assigned, self._stored, self._pending = {}, {}, {}
        self._add(partitions, pending_if_missing=True)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add partitions to the assignment; one already assigned is refused (_CONFLICT) and nothing is added,
        as librdkafka's rd_kafka_assignment_add."""
        self._check_open()
        self._check_manual("incremental_assign")
        partitions = _partition_list(partitions)
        for key in _distinct_keys(partitions):
            if key in self._assigned or key in self._pending:
                raise KafkaException(
                    KafkaError(KafkaError._CONFLICT, f"{key[0]} [{key[1]}] is already part of the current assignment")
                )
        self._add(partitions, pending_if_missing=True)

    def unassign(self) -> None:
        self._check_open()
        self._check_manual("unassign")
        self._assigned, self._stored, self._pending = {}, {}, {}

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        self._check_manual("incremental_unassign")
        partitions = _partition_list(partitions)
        for key in _distinct_keys(partitions):
            if key not in self._assigned and key not in self._pending:
                raise KafkaException(
                    KafkaError(
                        KafkaError._INVALID_ARG,
                        f"{key[0]} [{key[1]}] can't be unassigned since it is not in the current assignment",
                    )
                )
        for tp in partitions:
            self._assigned.pop((tp.topic, tp.partition), None)
            self._stored.pop((tp.topic, tp.partition), None)
            self._pending.pop((tp.topic, tp.partition), None)

    def assignment(self) -> list[TopicPartition]:
        self._check_open()
        return [TopicPartition(topic, partition) for topic, partition in [*self._assigned, *self._pending]]

    def pause(self, partitions: list[TopicPartition]) -> None:
        """poll/consume return nothing of these partitions until `resume`; their positions are kept.

        A partition that is not assigned is passed over, as librdkafka reports it
        per partition and confluent-kafka drops that report. A pause lasts as long
        as the assignment of the partition: assigned again, it is not paused.
        """
        self._check_open()
        self._set_paused(partitions, True)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Return messages of these paused partitions again, from where they were paused."""
        self._check_open()
        self._set_paused(partitions, False)

    # -- positions -------------------------------------------------------------------

    def seek(self, partition: TopicPartition) -> None:
        """Move a partition's position; the next message read is at that offset (or after).

        `OFFSET_STORED` / `OFFSET_INVALID` go back to the group's committed offset.
        """
        self._check_open()
        partition = _one_partition(partition)
        state = self._assigned.get((partition.topic, partition.partition))
        if state is None:
            raise _state_error(f"{partition.topic}-{partition.partition} is not assigned")
        state.position = self._start_offset(state.log, partition.offset)
        state.buffer.clear()
        state.eof_offset = None
        state.reset_error_offset = None
        state.resolve_after = 0.0
        state.resolve_retries = 0

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next message each partition will return (OFFSET_INVALID if not known yet)."""
        self._check_open()
        result = []
        for tp in _partition_list(partitions):
            state = self._assigned.get((tp.topic, tp.partition))
            offset = OFFSET_INVALID
            if state is not None and state.position is not None:
                offset = _fetched_offset(state.buffer[0]) if state.buffer else state.position
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
        partition = _one_partition(partition)
        if cached and (partition.topic, partition.partition) in self._pending:
            return OFFSET_INVALID, OFFSET_INVALID  # as librdkafka: nothing known of it yet
        state = self._assigned.get((partition.topic, partition.partition))
        log = state.log if state is not None else open_partition(self._root, partition.topic, partition.partition)
        if not cached:
            log.refresh()
        return log.log_start_offset(), self._end_offset(log)

    # -- internals: positions and fetches ------------------------------------------------

    def _set_paused(self, partitions: list[TopicPartition], paused: bool) -> None:
        for tp in _partition_list(partitions):
            state = self._assigned.get((tp.topic, tp.partition))
            if state is not None and state.paused != paused:
                state.paused = paused
                self._logger.info("%s-%d: %s", tp.topic, tp.partition, "paused" if paused else "resumed")

    def _position_of(self, tp: TopicPartitionKey) -> int:
        state = self._assigned.get(tp)
        if state is None or state.position is None:
            return OFFSET_INVALID
        return _fetched_offset(state.buffer[0]) if state.buffer else state.position

    def _add(self, partitions: list[TopicPartition], pending_if_missing: bool = False) -> None:
        """Assign `partitions`; with `pending_if_missing` (assign by hand, as librdkafka takes it) a partition
        of a topic that does not exist yet is reported once by poll (UNKNOWN_TOPIC_OR_PART) and starts when
        it appears."""
        missing = []
        for tp in partitions:
            key = (tp.topic, tp.partition)
            try:
                log = open_partition(self._root, tp.topic, tp.partition)
            except UnknownTopicOrPartition:
                if not pending_if_missing or _topic_exists(self._root, tp.topic):
                    raise  # a partition past an existing topic's count is refused, as before
                _check_offset(tp.offset)
                if key not in self._pending:
                    missing.append(f"{tp.topic}-{tp.partition}")
                    error = KafkaError(
                        KafkaError.UNKNOWN_TOPIC_OR_PART, f"{tp.topic} [{tp.partition}]: Broker: Unknown topic or partition"
                    )
                    self._events.append(Message(tp.topic, tp.partition, OFFSET_INVALID, error=error))
                self._pending[key] = tp.offset
                continue
            self._pending.pop(key, None)
            self._assigned[key] = _Assigned(log, self._start_offset(log, tp.offset))
        if missing:
            self._logger.warning("assigned partitions of topics that do not exist, waiting for them: %s", ", ".join(missing))

    def _open_pending(self) -> None:
        """Start the assigned partitions whose topic did not exist, if it does now (one look per topic)."""
        appeared = {topic for topic, _ in self._pending if _topic_exists(self._root, topic)}
        for (topic, partition), offset in list(self._pending.items()):
            if topic not in appeared:
                continue
            try:
                log = open_partition(self._root, topic, partition)
            except UnknownTopicOrPartition:
                continue  # past the count of the topic that appeared: stays waiting
            self._logger.info("%s-%d exists now: reading it", topic, partition)
            del self._pending[(topic, partition)]
            self._assigned[(topic, partition)] = _Assigned(log, self._start_offset(log, offset))

    def _in_turn(self) -> list[_Assigned]:
        states = list(self._assigned.values())
        if not states:
            return []
        self._turn = (self._turn + 1) % len(states)
        return states[self._turn :] + states[: self._turn]

    def _start_offset(self, log: PartitionLog, offset: int) -> int | None:
        """Where reading starts; None (with group.id) for the committed offset, resolved before the first fetch."""
        _check_offset(offset)
        if offset in (OFFSET_STORED, OFFSET_INVALID) and self._group_id is not None:
            return None
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
            offset = log.log_start_offset()
        elif policy in ("latest", "largest", "end"):
            offset = self._end_offset(log)
        else:
            offset = None
        if offset is not None:
            self._logger.info(
                "%s-%d: no valid position, auto.offset.reset=%s: reading from offset %d", log.topic, log.partition, policy, offset
            )
            return offset
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
        if state.buffer or state.position is None or state.position == state.reset_error_offset:
            return
        log = state.log
        if state.position >= self._end_offset(log):
            log.refresh()
        end = self._end_offset(log)
        # Every fetch moves the position forward, but in read_committed it may return nothing (all aborted).
        while state.position < end and not state.buffer:
            try:
                try:
                    fetched = log.fetch(
                        state.position,
                        max_records=self.config["max.poll.records"],
                        max_bytes=self.config["max.partition.fetch.bytes"],
                        isolation_level=self.config["isolation.level"],
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
                if self.config["auto.offset.reset"] == "error":
                    state.reset_error_offset = state.position
                    failed = KafkaError(KafkaError._AUTO_OFFSET_RESET, f"{error}, and auto.offset.reset=error")
                    state.buffer.append(Message(log.topic, log.partition, state.position, error=failed))
                    return
                state.position = self._reset(log)
                end = self._end_offset(log)
                continue
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


def _fetched_offset(message: Message) -> int:
    """The offset of a message a fetch made (a record, or a partition-EOF event at the position): always set."""
    return cast(int, message.offset())  # Message.offset() is Optional only for messages built without one


def _fetched_key(message: Message) -> TopicPartitionKey:
    """The partition of a message a fetch made: its topic and partition are always set."""
    return cast(TopicPartitionKey, (message.topic(), message.partition()))  # Optional only for messages built without


def _partition_list(partitions: Any) -> list[TopicPartition]:
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


def _state_error(reason: str) -> KafkaException:
    return KafkaException(KafkaError(KafkaError._STATE, reason))
