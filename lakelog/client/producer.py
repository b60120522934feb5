"""`Producer`: confluent-kafka's producer API over partition logs, idempotent by default.

Messages are buffered per partition and sent as one batch (one Parquet file, one
commit) when `batch.num.messages` or `batch.size` is reached, when `linger.ms`
has passed (checked by `produce`, `poll` and `flush`), or when a message's
`expected_offset` cannot join the open batch. Delivery reports are served by
`poll()` / `flush()` as in confluent-kafka.

Thread-safe, as confluent-kafka's Producer: every public call runs under the
producer's re-entrant lock (producer_lifecycle.locked), so a thread may poll()
while others produce() or run a transaction; delivery callbacks run on the
thread that calls poll()/flush() and may produce() again.

Time is passed in: `clock` (milliseconds, the wall clock by default) stamps
messages, times `linger.ms`, and is the clock of the coordinators and partition
logs the producer calls (S4.7: transaction timeouts are decided on it).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from lakelog import config
from lakelog.client.conf import split_callbacks
from lakelog.client.idempotent_gate import IdempotentGate
from lakelog.client.partitioner import partition_for
from lakelog.client.producer_gate import ProducerGate
from lakelog.client.producer_lifecycle import ProducerLifecycle, locked
from lakelog.client.types import TIMESTAMP_CREATE_TIME, Headers, Message
from lakelog.config import storage_options
from lakelog.errors import (
    FatalError,
    InvalidArgument,
    InvalidConfig,
    InvalidRequest,
    InvalidType,
    KafkaError,
    KafkaException,
    KafkaStorageError,
    RetriableError,
    TransactionAbortable,
    UnknownTopicOrPartition,
)
from lakelog.log import BatchHeader, PartitionLog, allocate_producer_id, open_partition, payload_table
from lakelog.log.partition import Clock, wall_clock_ms
from lakelog.log.records import next_sequence
from lakelog.log.verification import TransactionVerification
from lakelog.store import open_root
from lakelog.store.retry import Backoff, RetryPolicy

if TYPE_CHECKING:
    from lakelog.coordinator.group.coordinator import GroupCoordinator
    from lakelog.coordinator.transaction.coordinator import TransactionCoordinator

DeliveryCallback = Callable[[KafkaError | None, Message], None]
CALLBACK_KEYS = ("on_delivery", "error_cb")

logger = logging.getLogger(__name__)
# What a retried call returns.
T = TypeVar("T")


def to_bytes(what: str, value: Any) -> bytes | None:
    """A key, value or header value as bytes (a str as UTF-8); any other type is a TypeError, as in confluent-kafka."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
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
    return [(name, to_bytes("header value", value)) for name, value in items]


@dataclass
class _Pending:
    """One produced message waiting in a partition's open batch."""

    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp_ms: int
    on_delivery: DeliveryCallback | None


@dataclass
class _Batch:
    topic: str
    partition: int
    created_ms: float  # on the producer's clock; linger is timed in its milliseconds (seconds as floats lose the last one)
    expected_offset: int | None = None
    messages: list[_Pending] = field(default_factory=list)
    size: int = 0

    def accepts(self, expected_offset: int | None) -> bool:
        if not self.messages:
            return True
        if expected_offset is None:
            return True
        return self.expected_offset is not None and expected_offset == self.expected_offset + len(self.messages)


class TransactionState(enum.Enum):
    """Where a transactional producer is, as librdkafka tracks it (idempotent producers stay UNINITIALIZED)."""

    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


class Producer(ProducerLifecycle):
    """A producer writing to the topics of `lakelog.root`, shaped like confluent_kafka.Producer.

    With `transactional.id` set it is transactional (S4): `init_transactions()`
    once, then `begin_transaction()`, `produce()`..., `commit_transaction()` or
    `abort_transaction()`. Errors follow confluent-kafka: a `KafkaException` whose
    error says `fatal()` (fenced: close this producer), `txn_requires_abort()`
    (abort, then go on) or `retriable()` (call again).

    Thread-safe: each public call is atomic with respect to the others (one RLock per producer).
    """

    def __init__(self, conf: Mapping[str, Any] | None = None, *, clock: Clock = wall_clock_ms, **kwargs: Any) -> None:
        # Taken by every public call (producer_lifecycle.locked); re-entrant, so a delivery callback may produce().
        self._lock = threading.RLock()
        values, callbacks = split_callbacks(conf, CALLBACK_KEYS, kwargs)
        self.config = config.load("producer", values)
        # confluent-kafka's `logger`: this producer's own log lines go there (default: this module's logger).
        self._logger: logging.Logger | logging.LoggerAdapter = self.config.get("logger") or logger
        self._clock = clock
        # UnresolvedRoot for a root never initialised (a typo): nothing is written there.
        self._root = open_root(self.config["lakelog.root"], storage_options(self.config))
        # retry.backoff.ms / retry.backoff.max.ms: every retry of this producer and of the coordinators it calls.
        self._retry = RetryPolicy.from_config(self.config)
        self._default_on_delivery: DeliveryCallback | None = callbacks.get("on_delivery")
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._num_partitions: dict[str, int] = {}
        self._batches: dict[tuple[str, int], _Batch] = {}
        self._sequences: dict[tuple[str, int], int] = {}
        self._reports: deque[tuple[DeliveryCallback | None, KafkaError | None, Message]] = deque()
        self._producer_id: int | None = None
        self._producer_epoch = 0
        self._closed = False
        self._transactional_id: str | None = self.config["transactional.id"] or None
        if self._transactional_id is not None and not self.config["enable.idempotence"]:
            raise InvalidConfig("transactional.id requires enable.idempotence=true", key="enable.idempotence")
        self._coordinator: TransactionCoordinator | None = None
        self._groups: GroupCoordinator | None = None
        self._transaction_state = TransactionState.UNINITIALIZED
        # Partitions added to the open transaction, and the first error that makes it abort-only.
        self._transaction_partitions: set[tuple[str, int]] = set()
        self._transaction_error: KafkaException | None = None
        self._gate = ProducerGate(self._root, self._transactional_id is not None)  # quality gates (S11)
        # Without a transaction each batch is its own unit: judged before it is appended (S11.1).
        self._batch_gate = IdempotentGate(self._root) if self._transactional_id is None else None

    # -- confluent-kafka API ----------------------------------------------------

    @locked
    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Any = None,
        *,
        expected_offset: int | None = None,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Queue a message; `expected_offset` (KIP-27) makes it land at exactly that offset or fail."""
        self._require_open()
        if self._transactional_id is not None:
            self._require_state("produce", TransactionState.IN_TRANSACTION)
        # Wrong types are TypeErrors and wrong values ValueErrors, as confluent-kafka raises them (both InvalidRequest).
        if not isinstance(topic, str):
            raise InvalidType(f"topic must be a str, not {type(topic).__name__}")
        value_bytes, key_bytes = to_bytes("value", value), to_bytes("key", key)
        header_list = to_headers(headers)
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise InvalidType(f"partition must be an integer, not {partition!r}")
        if not isinstance(timestamp, int) or isinstance(timestamp, bool):
            raise InvalidType(f"timestamp must be an integer of milliseconds, not {timestamp!r}")
        if timestamp < 0:
            raise InvalidArgument(f"timestamp must not be negative, not {timestamp}")
        if expected_offset is not None:
            if not isinstance(expected_offset, int) or isinstance(expected_offset, bool):
                raise InvalidType(f"expected_offset must be an integer, not {expected_offset!r}")
            if expected_offset < 0:
                raise InvalidArgument(f"expected_offset must not be negative, not {expected_offset}")
        size = len(value_bytes or b"") + len(key_bytes or b"")
        if size > self.config["message.max.bytes"]:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, f"message of {size} bytes exceeds message.max.bytes"))
        if self._partition_count(topic) is None:
            # Reported through the delivery callback at poll()/flush(), as confluent-kafka does.
            return self._report_unknown_topic(
                topic, partition, key_bytes, value_bytes, header_list, timestamp or self._clock(), on_delivery or callback
            )
        partition = self._resolve_partition(topic, partition, key_bytes)
        tp = (topic, partition)
        batch = self._batches.get(tp)
        if batch is not None and not batch.accepts(expected_offset):
            self._send(tp)
            batch = None
        if batch is None:
            batch = self._batches[tp] = _Batch(topic, partition, self._clock(), expected_offset)
        batch.messages.append(_Pending(key_bytes, value_bytes, header_list, timestamp or self._clock(), on_delivery or callback))
        batch.size += size
        if len(batch.messages) >= self.config["batch.num.messages"] or batch.size >= self.config["batch.size"]:
            self._send(tp)
        self._send_lingered()

    # poll, flush, len, close, purge, produce_batch, list_topics: lakelog.client.producer_lifecycle.

    # -- transactions (S4) ----------------------------------------------------------

    @locked
    def init_transactions(self, timeout: float | None = None) -> None:
        """Take over the transactional.id: get its producer id with a bumped epoch, fencing any
        earlier instance (S4.1), after finishing that instance's last transaction (S4.2)."""
        self._require_transactional("init_transactions")
        self._require_state("init_transactions", TransactionState.UNINITIALIZED)
        result = self._call_coordinator(
            lambda coordinator: coordinator.init_producer_id(
                self._transactional_id, self.config["transaction.timeout.ms"], _timeout_s(timeout)
            )
        )
        self._producer_id, self._producer_epoch = result.producer_id, result.producer_epoch
        self._logger.info(
            "%s: initialised at producer id %d epoch %d; every earlier instance is fenced (S4.1)",
            self._transaction_id_text,
            self._producer_id,
            self._producer_epoch,
        )
        self._sequences = {}
        self._transaction_state = TransactionState.READY

    @locked
    def begin_transaction(self) -> None:
        """Start a transaction: every message produced until its commit or abort belongs to it."""
        self._require_transactional("begin_transaction")
        self._require_state("begin_transaction", TransactionState.READY)
        self._transaction_partitions = set()
        self._transaction_error = None
        self._transaction_state = TransactionState.IN_TRANSACTION

    @locked
    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: every message of the transaction becomes visible to read_committed
        readers at once, on every partition (S4.5, S4.8). A failed delivery makes the
        transaction abort-only (the raised error says `txn_requires_abort()`)."""
        self._require_transactional("commit_transaction")
        self._require_state("commit_transaction", TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)
        self.flush(timeout)
        if self._transaction_state is TransactionState.FATAL_ERROR:
            self._require_state("commit_transaction")
        if self._transaction_error is not None:
            self._transaction_state = TransactionState.ABORTABLE_ERROR
            raise TransactionAbortable(
                f"transaction of {self._transaction_id_text} cannot commit: {self._transaction_error.error.str()}; "
                "abort it and start again"
            )
        if self._gate.active:
            return self._gate.commit(self, timeout)  # validates, then commits with the results or aborts (S11.1)
        self._end_transaction(commit=True, timeout=timeout)

    @locked
    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: queued messages are purged (reported with _PURGE_QUEUE) and written ones are
        marked aborted, so read_committed readers never see them (S4.5, S5.2)."""
        self._require_transactional("abort_transaction")
        if self._gate.aborted and self._transaction_state is TransactionState.READY:
            return  # the quality gate aborted it before raising its PolicyViolation (S11.1): nothing left to do
        self._require_state("abort_transaction", TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)
        self._gate.purge(self)  # queued batches, and those of dead-letter topics held back until commit
        self._serve_reports()
        self._end_transaction(commit=False, timeout=timeout)

    @locked
    def send_offsets_to_transaction(self, positions: list[Any], group_metadata: Any, timeout: float | None = None) -> None:
        """Commit the consumer's positions with this transaction (KIP-447, S7.1): they become the
        group's committed offsets when it commits, and vanish if it aborts. `group_metadata`
        comes from `Consumer.consumer_group_metadata()` and is checked like a commit of that
        member (S7.2): a zombie's offsets are refused (IllegalGeneration, FencedInstanceId,
        UnknownMemberId make the transaction abort-only)."""
        from lakelog.client.types import TopicPartition
        from lakelog.coordinator.group import GroupMetadata
        from lakelog.coordinator.group.coordinator import GroupCoordinator

        self._require_transactional("send_offsets_to_transaction")
        self._require_state("send_offsets_to_transaction", TransactionState.IN_TRANSACTION)
        if not isinstance(group_metadata, GroupMetadata):
            raise InvalidRequest("group_metadata must come from Consumer.consumer_group_metadata()")
        if not isinstance(positions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in positions):
            raise InvalidRequest("send_offsets_to_transaction takes a list of TopicPartition")
        offsets = {(p.topic, p.partition): (p.offset, p.metadata) for p in positions}
        if not offsets:
            return
        if self._groups is None:
            # Kept: the coordinator replays __consumer_offsets incrementally from where it last read.
            self._groups = GroupCoordinator(self._root, retry=self._retry, clock=self._clock)
        groups = self._groups
        offsets_partition = groups.offsets_partition(group_metadata.group_id)
        # In a transaction (checked above), so init_transactions() gave this producer its id.
        assert self._producer_id is not None
        identity = (self._producer_id, self._producer_epoch)
        if offsets_partition not in self._transaction_partitions:
            # A zombie's group metadata is refused before the transaction changes (S7.2, S8.3).
            self._offsets_call(lambda: groups.check_transactional_offsets(group_metadata, *identity, offsets))
            self._call_coordinator(
                lambda coordinator: coordinator.add_partitions(self._transactional_id, *identity, [offsets_partition])
            )
            self._transaction_partitions.add(offsets_partition)
        self._offsets_call(
            lambda: groups.commit_transactional_offsets(group_metadata, *identity, offsets, transaction=self._verification())
        )

    def _offsets_call(self, call: Callable[[], Any]) -> None:
        """`call()`; a refusal of the offsets makes the transaction abort-only (fenced: the producer unusable)."""
        try:
            call()
        except KafkaException as error:
            if error.fatal:
                self._fail(error)
            else:
                self._transaction_error = self._transaction_error or error
                self._transaction_state = TransactionState.ABORTABLE_ERROR
            raise

    def _end_transaction(self, commit: bool, timeout: float | None = None) -> None:
        """End the transaction, retrying a retriable error until `timeout` (librdkafka's way; None or
        negative: transaction.timeout.ms): a retried end is recognised by the coordinator, which
        answers as the first time and finishes what it left (S4.5). Raises the last error after that."""
        if self._transaction_partitions:
            limit_s = self.config["transaction.timeout.ms"] / 1000 if timeout is None or timeout < 0 else timeout
            backoff = self._retry.start(limit_s)
            while True:
                try:
                    # Returns once the markers are written; Complete* rides on our next transaction's first
                    # add_partitions (or the next init, or the sweep): one serial commit less per transaction (S4.5).
                    result = self._call_coordinator(
                        lambda coordinator: coordinator.end_transaction(
                            self._transactional_id, self._producer_id, self._producer_epoch, commit, complete=False
                        )
                    )
                    break
                except RetriableError as error:
                    if not backoff.wait():
                        self._logger.warning(
                            "%s: giving up on ending its transaction after %d attempt(s) in %g s: %s: %s",
                            self._transaction_id_text,
                            backoff.retries + 1,
                            limit_s,
                            error.error.name(),
                            error,
                        )
                        raise
                    self._logger.warning(
                        "%s: retrying the end of its transaction (attempt %d) after %s: %s",
                        self._transaction_id_text,
                        backoff.retries + 1,
                        error.error.name(),
                        error,
                    )
            # Every end bumps the epoch (S4.6): the next transaction starts every sequence at 0.
            self._producer_id, self._producer_epoch = result.producer_id, result.producer_epoch
            self._sequences = {}
        self._transaction_partitions = set()
        self._transaction_error = None
        self._transaction_state = TransactionState.READY
        self._gate.reset()

    def _transaction_coordinator(self) -> TransactionCoordinator:
        if self._coordinator is None:
            from lakelog.coordinator.transaction.coordinator import TransactionCoordinator

            self._coordinator = TransactionCoordinator(
                self._root, partition_logs=self._lend_log, retry=self._retry, clock=self._clock
            )
        return self._coordinator

    def _call_coordinator(self, request: Callable[[Any], Any]) -> Any:
        """Run a coordinator request; a fatal error (fenced, S4.1) leaves the producer unusable."""
        coordinator = self._transaction_coordinator()
        try:
            return request(coordinator)
        except FatalError as error:
            self._fail(error)
            raise

    def _lend_log(self, topic: str, partition: int) -> PartitionLog | None:
        """Our open handle of a partition the transaction wrote, for its marker (see TransactionCoordinator)."""
        if not topic.startswith("__"):
            return self._log((topic, partition))
        if self._groups is not None and topic == "__consumer_offsets":
            return self._groups.offsets_log(partition)
        return None

    def _fail(self, error: KafkaException) -> None:
        if self._transaction_state is not TransactionState.FATAL_ERROR:
            self._logger.info("%s: unusable from now on: %s: %s", self._transaction_id_text, error.error.name(), error)
        self._transaction_state = TransactionState.FATAL_ERROR
        self._transaction_error = error

    def _require_transactional(self, call: str) -> None:
        self._require_open()
        if self._transactional_id is None:
            raise KafkaException(KafkaError(KafkaError._NOT_CONFIGURED, f"{call}() needs transactional.id to be configured"))

    def _require_state(self, call: str, *allowed: TransactionState) -> None:
        state = self._transaction_state
        if state is TransactionState.FATAL_ERROR:
            # The error that made the producer unusable (ProducerFenced, ...), again.
            assert self._transaction_error is not None
            raise self._transaction_error
        if state not in allowed:
            raise KafkaException(
                KafkaError(
                    KafkaError._STATE,
                    f"{call}() is not allowed while the producer is {state.value.replace('_', ' ')}",
                    txn_requires_abort=state is TransactionState.ABORTABLE_ERROR,
                )
            )

    @property
    def _transaction_id_text(self) -> str:
        return f"transactional.id {self._transactional_id!r}"

    # -- internals -----------------------------------------------------------------

    def _resolve_partition(self, topic: str, partition: int, key: bytes | None) -> int:
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise InvalidRequest(f"partition must be an integer, not {partition!r}")
        count = self._partition_count(topic)
        if count is None:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist under {self._root}", topic=topic)
        if partition == -1:
            return partition_for(key, count, self.config["partitioner"])
        if not 0 <= partition < count:
            # librdkafka refuses a partition past a known topic's count at once, with _UNKNOWN_PARTITION.
            raise KafkaException(
                KafkaError(KafkaError._UNKNOWN_PARTITION, f"topic {topic} has partitions 0-{count - 1}, not {partition}")
            )
        return partition

    def _log(self, tp: tuple[str, int]) -> PartitionLog:
        if tp not in self._logs:
            self._logs[tp] = open_partition(self._root, *tp, clock=self._clock)
        return self._logs[tp]

    def _header(self, tp: tuple[str, int], expected_offset: int | None) -> BatchHeader:
        if not self.config["enable.idempotence"]:
            return BatchHeader(expected_offset=expected_offset)
        if self._producer_id is None:
            self._producer_id = allocate_producer_id(self._root, self.config["client.id"], retry=self._retry)
        return BatchHeader(
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._sequences.get(tp, 0),
            is_transactional=self._transactional_id is not None,
            expected_offset=expected_offset,
        )

    def _send(self, tp: tuple[str, int]) -> None:
        batch = self._batches.pop(tp, None)
        if batch is None or not batch.messages:
            return
        messages = batch.messages
        payload = payload_table(
            [m.value for m in messages],
            keys=[m.key for m in messages],
            headers=[m.headers for m in messages],
            timestamps_ms=[m.timestamp_ms for m in messages],
        )
        if self._gate.hold(tp, payload, messages, batch.expected_offset):
            return  # a dead-letter topic's batch: appended at commit, where its verdict sends it (S11.3)
        if self._batch_gate is not None:
            return self._batch_gate.send(self, tp, payload, messages, batch.expected_offset)
        self._gate.keep(tp, payload, self._deliver(tp, payload, messages, batch.expected_offset))

    def _deliver(self, tp: tuple[str, int], payload: pa.Table, messages: list[_Pending], expected_offset: int | None) -> int:
        """Append a batch and queue its delivery reports; its base offset, or -1 if it failed (reported)."""
        error: KafkaError | None = None
        base_offset = -1
        try:
            if self._transactional_id is not None:
                self._add_to_transaction(tp)
            # One backoff for the whole send: lost races and storage failures grow the same wait.
            backoff = self._retry.start(self.config["message.timeout.ms"] / 1000)
            # Allocating a producer id is safe to retry: an id lost to a failure is only a gap in the ids.
            header = self._retrying(tp, payload.num_rows, lambda: self._header(tp, expected_offset), backoff)
            base_offset = self._append_with_retries(tp, payload, header, backoff)
            if header.is_idempotent:
                self._sequences[tp] = next_sequence(header.base_sequence + payload.num_rows - 1)
        except KafkaException as exception:
            error, base_offset = exception.error, -1
            if self._transactional_id is not None:
                if exception.fatal:
                    self._fail(exception)
                elif self._transaction_error is None:
                    self._transaction_error = exception
        for index, pending in enumerate(messages):
            message = Message(
                tp[0],
                tp[1],
                base_offset + index if error is None else None,
                pending.key,
                pending.value,
                pending.headers,
                error,
                (TIMESTAMP_CREATE_TIME, pending.timestamp_ms),
            )
            self._reports.append((pending.on_delivery or self._default_on_delivery, error, message))
        return base_offset

    def _add_to_transaction(self, tp: tuple[str, int]) -> None:
        """Add the partition (with every other one holding a queued batch) to the transaction
        before its first write (S4.4): one coordinator commit for all of them.

        The partition then verifies the transaction's first batch with the coordinator
        (KIP-890, lakelog.log.verification): a batch of an identity whose transaction
        does not hold the partition is refused there, whoever sends it."""
        if self._transaction_state is not TransactionState.IN_TRANSACTION:
            self._require_state("produce", TransactionState.IN_TRANSACTION)
        if tp in self._transaction_partitions:
            return
        wanted = ({tp} | set(self._batches)) - self._transaction_partitions
        self._call_coordinator(
            lambda coordinator: coordinator.add_partitions(
                self._transactional_id, self._producer_id, self._producer_epoch, sorted(wanted)
            )
        )
        self._transaction_partitions |= wanted

    def _append_with_retries(self, tp: tuple[str, int], payload: pa.Table, header: BatchHeader, backoff: Backoff) -> int:
        """Append, retrying a storage failure with the same sequence: a retry that
        finds its batch already in the log gets the original offsets (S3.2). A
        transactional batch names our transactional.id and coordinator, so the partition
        verifies the transaction's first batch there (S4.4)."""
        transaction = self._verification() if header.is_transactional else None
        # Without a producer id an ambiguous storage failure cannot be retried safely.
        return self._retrying(
            tp,
            payload.num_rows,
            lambda: self._log(tp).append(payload, header, backoff=backoff, transaction=transaction).base_offset,
            backoff,
            retry_storage_errors=header.is_idempotent,
        )

    def _verification(self) -> TransactionVerification:
        """What a partition verifies our transactional batches with (KIP-890, S4.4): the coordinator we add partitions through."""
        assert self._transactional_id is not None
        return TransactionVerification(self._transactional_id, self._transaction_coordinator())

    def _retrying(
        self, tp: tuple[str, int], count: int, call: Callable[[], T], backoff: Backoff, *, retry_storage_errors: bool = True
    ) -> T:
        """`call()`, again after the backoff's wait on a retriable error, up to `retries` times or its deadline."""
        attempts = 0
        while True:
            try:
                return call()
            except RetriableError as error:
                attempts += 1
                retry_allowed = retry_storage_errors or not isinstance(error, KafkaStorageError)
                if attempts > self.config["retries"] or not retry_allowed or not backoff.wait():
                    self._logger.warning(
                        "%s-%d: giving up on a batch of %d after %d attempt(s)%s: %s: %s",
                        tp[0],
                        tp[1],
                        count,
                        attempts,
                        "" if retry_allowed else " (no producer id to retry it safely)",
                        error.error.name(),
                        error,
                    )
                    raise
                self._logger.warning(
                    "%s-%d: retrying a batch of %d (attempt %d) after %s: %s",
                    tp[0],
                    tp[1],
                    count,
                    attempts + 1,
                    error.error.name(),
                    error,
                )


def _timeout_s(timeout: float | None) -> float:
    """confluent-kafka's timeouts: seconds, None or negative for "as long as it takes" (capped at a day)."""
    if timeout is None or timeout < 0:
        return 86_400.0
    return float(timeout)
