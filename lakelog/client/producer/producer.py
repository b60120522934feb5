"""`Producer`: confluent-kafka's producer API over partition logs, idempotent by default, built from parts as Kafka's is.

- `accumulator`: produced messages batched per partition (RecordAccumulator); `sender`: a closed batch appended
  with its header, retried on one policy (Sender); `transactions`: the identity, sequences and transaction state;
- `reports`: delivery reports, built in one place and served by poll()/flush(); `stats`: stats_cb's statistics;
- `topics`: partition counts, first-use creation, partitioning;
- `gate` / `idempotent_gate`: the quality gates (S11), which return verdicts and decisions;
- `gated`: those acted on with the parts above (a batch's send, a gated transaction's commit).

A batch is sent (one Parquet file, one commit) when `batch.num.messages` or `batch.size` is reached, when
`linger.ms` has passed (checked by `produce`, `poll` and `flush`), or when a message's `expected_offset` cannot join.

Thread-safe, as confluent-kafka's Producer: every public call runs under the producer's re-entrant lock (`locked`);
delivery callbacks (and stats_cb) run on the thread that calls poll()/flush() and may produce() again.

Time is passed in: `clock` (milliseconds, the wall clock by default) stamps messages, times `linger.ms`, and is the
clock of the coordinators and partition logs the producer calls (S4.7: transaction timeouts are decided on it).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from lakelog import config
from lakelog.client.conf import split_callbacks
from lakelog.client.producer.accumulator import (
    DeliveryCallback,
    Pending,
    RecordAccumulator,
    check_batch,
    to_bytes,
    to_headers,
)
from lakelog.client.producer.gate import ProducerGate
from lakelog.client.producer.gated import GatedDelivery
from lakelog.client.producer.idempotent_gate import IdempotentGate
from lakelog.client.producer.limits import check_expected_offset, check_timestamp, headers_size, too_large
from lakelog.client.producer.reports import DeliveryReports
from lakelog.client.producer.sender import Sender
from lakelog.client.producer.stats import producer_stats
from lakelog.client.producer.topics import ProducerTopics, undeliverable
from lakelog.client.producer.transactions import TransactionManager, TransactionState
from lakelog.client.sasl import set_sasl_credentials
from lakelog.client.statistics import Statistics
from lakelog.client.timeouts import check_timeout
from lakelog.client.types import ClusterMetadata
from lakelog.config import storage_options
from lakelog.errors import InvalidType, KafkaError, KafkaException
from lakelog.log.partition import Clock, wall_clock_ms
from lakelog.log.records import MAX_TIMESTAMP_MS
from lakelog.store import open_root
from lakelog.store.io.retry import RetryPolicy
from lakelog.typedef import TopicPartitionKey

if TYPE_CHECKING:
    from lakelog.coordinator.transaction.coordinator import TransactionCoordinator

CALLBACK_KEYS = ("on_delivery", "error_cb", "stats_cb")
CLOSED = "Producer has been closed"
# The longest single sleep of a waiting poll(): it looks again at the queue (and the clock) this often.
POLL_STEP_S = 0.1

logger = logging.getLogger(__name__)

Call = TypeVar("Call", bound=Callable[..., Any])


def locked(method: Call) -> Call:
    """Run a public Producer call under the producer's lock (a threading.RLock, `_lock`): the call is atomic
    with respect to every other call of that producer, on any thread. Re-entrant, so a delivery callback
    served inside poll()/flush() may call produce(), and a call may make another (commit_transaction: flush)."""

    @functools.wraps(method)
    def call(self: Producer, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(Call, call)  # functools.wraps keeps the method's signature; mypy types only the wrapper's


class Producer:
    """A producer writing to the topics of `lakelog.root`, shaped like confluent_kafka.Producer.

    With `transactional.id` set it is transactional (S4): `init_transactions()`
    once, then `begin_transaction()`, `produce()`..., `commit_transaction()` or
    `abort_transaction()`. Errors follow confluent-kafka: a `KafkaException` whose
    error says `fatal()` (fenced: close this producer), `txn_requires_abort()`
    (abort, then go on) or `retriable()` (call again).

    Thread-safe: each public call is atomic with respect to the others (one RLock per producer).
    """

    def __init__(self, conf: Mapping[str, Any] | None = None, *, clock: Clock = wall_clock_ms, **kwargs: Any) -> None:
        # Taken by every public call (`locked`); re-entrant, so a delivery callback may produce().
        self._lock = threading.RLock()
        values, callbacks = split_callbacks(conf, CALLBACK_KEYS, kwargs)
        self.config = conf_ = config.load("producer", values)
        # confluent-kafka's `logger`: this producer's own log lines go there (default: this module's logger).
        self._logger: logging.Logger | logging.LoggerAdapter = conf_.get("logger") or logger
        self._clock = clock
        # UnresolvedRoot for a root never initialised (a typo): nothing is written there.
        root = self._root = open_root(conf_["lakelog.root"], storage_options(conf_))
        # retry.backoff.ms / retry.backoff.max.ms: every retry of this producer and of the coordinators it calls.
        retry = RetryPolicy.from_config(conf_)
        self._closed = False
        self._max_bytes = conf_["message.max.bytes"]
        self._reports = DeliveryReports(callbacks.get("on_delivery"))
        stats_cb, interval_ms = callbacks.get("stats_cb"), conf_["statistics.interval.ms"]
        self._stats = Statistics(stats_cb, interval_ms, clock, "producer", conf_["client.id"])
        self._accumulator = RecordAccumulator(conf_["batch.num.messages"], conf_["batch.size"], conf_["linger.ms"], clock)
        self._transactions = TransactionManager(root, conf_, retry, clock, self._logger, lambda *tp: self._sender.lend(*tp))
        self._sender = Sender(
            root,
            clock,
            retry,
            conf_["retries"],
            conf_["message.timeout.ms"] / 1000,
            self._logger,
            self._transactions,
            self._reports,
            self._accumulator.partitions,
        )
        self._topics = ProducerTopics(root, conf_, clock, self._logger, self._sender.adopt)
        transactional = self._transactions.transactional
        # The quality gates (S11): a transaction's rows judged at commit; without one each batch before its append.
        batch_gate = None if transactional else IdempotentGate(root, self._topics.partition_count)
        self._gated = GatedDelivery(
            ProducerGate(root, transactional),
            batch_gate,
            self._accumulator,
            self._sender,
            self._transactions,
            self._reports,
            self._logger,
        )

    # -- confluent-kafka API ----------------------------------------------------

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
        # The lock taken here rather than by `locked`: one call less on the path every message takes.
        with self._lock:
            if self._closed:
                raise RuntimeError(CLOSED)
            transactions = self._transactions
            if transactions.transactional_id is not None and transactions.state is not TransactionState.IN_TRANSACTION:
                transactions.require_state("produce", TransactionState.IN_TRANSACTION)
            # Wrong types are TypeErrors and wrong values ValueErrors, as confluent-kafka raises them (both InvalidRequest).
            if topic.__class__ is not str and not isinstance(topic, str):
                raise InvalidType(f"topic must be a str, not {type(topic).__name__}")
            value_bytes = value if value.__class__ is bytes else to_bytes("value", value)
            key_bytes = None if key is None else to_bytes("key", key)
            header_list = None if headers is None else to_headers(headers)
            if partition.__class__ is not int and (not isinstance(partition, int) or isinstance(partition, bool)):
                raise InvalidType(f"partition must be an integer, not {partition!r}")
            if timestamp.__class__ is not int or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
                timestamp = check_timestamp(timestamp)  # InvalidType / InvalidArgument past what the log can hold
            if expected_offset is not None:
                check_expected_offset(expected_offset)
            size = (0 if value_bytes is None else len(value_bytes)) + (0 if key_bytes is None else len(key_bytes))
            size += 0 if header_list is None else headers_size(header_list)  # counted as a broker (and the log) counts them
            if size > self._max_bytes:
                raise too_large(size, self._max_bytes)
            topics = self._topics
            count = topics.counts.get(topic) or topics.partition_count(topic)  # a topic's first use opens its log
            # One look at the clock, after that: the message's timestamp, its batch's start and the linger check.
            now = self._clock()
            pending: Pending = (key_bytes, value_bytes, header_list, timestamp or now, on_delivery or callback)
            if count is None:
                # Reported through the delivery callback at poll()/flush(), as confluent-kafka does; nothing is written.
                # In a transaction the failed delivery makes it abort-only, as any does.
                error = undeliverable(topic)
                self._reports.report((topic, partition), [pending], -1, error)
                transactions.taint(error)
                return
            if partition < 0 or partition >= count:
                partition = topics.resolve_partition(topic, partition, key_bytes)
            tp = (topic, partition)
            accumulator = self._accumulator
            sent = False
            if expected_offset is not None:
                refused = accumulator.refusing(tp, expected_offset)
                if refused is not None:
                    self._gated.send(refused)
                    sent, now = True, self._clock()  # the next batch starts after that send
            full = accumulator.append(tp, pending, size, expected_offset, now)
            if full is not None:
                self._gated.send(full)
                sent = True
            # A send takes time: after one, the clock is read again; else the look taken above answers.
            if sent or now >= accumulator.due_ms:
                self._send_lingered()

    @locked
    def produce_batch(
        self,
        topic: str,
        messages: list[dict[str, Any]],
        partition: int = -1,
        callback: DeliveryCallback | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> int:
        """Queue each message dict (value, key, headers, partition, timestamp, callback) as produce() would; returns
        how many were queued. A message that cannot be queued gets its error as `_error` in its dict, as confluent's.
        Malformed input raises TypeError before any is queued. Atomic: no other produce() lands between them."""
        if not check_batch(topic, messages, partition):
            return 0
        self._require_open()
        default_callback = callback or on_delivery
        queued = 0
        for message in messages:
            message_partition = message.get("partition")
            try:
                self.produce(
                    topic,
                    value=message.get("value"),
                    key=message.get("key"),
                    partition=partition if message_partition is None else message_partition,
                    on_delivery=message.get("callback") or default_callback,
                    timestamp=message.get("timestamp") or 0,
                    headers=message.get("headers"),
                )
            except KafkaException as error:
                message["_error"] = KafkaError(error.error.code(), f"Message failed: {error.error.str()}")
                continue
            queued += 1
        return queued

    def _emit_stats(self) -> None:
        self._stats.maybe_emit(lambda: producer_stats(len(self), self._reports, self._transactions))

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Accepted as confluent-kafka takes it, and unused: a root authenticates through its store."""
        set_sasl_credentials(self._logger, username, password)

    def poll(self, timeout: float | None = None) -> int:
        """Serve delivery reports; returns how many were served.

        Waits up to `timeout` seconds for one (None or negative: as long as a queued batch has to linger): a batch
        is sent once its linger.ms has passed on the producer's clock, and poll returns as soon as reports are
        ready. An idle producer waits the whole timeout, in steps of at most POLL_STEP_S (`poll(1.0)` never spins).
        It looks under the producer's lock and sleeps outside it; a close() meanwhile ends the wait (0)."""
        timeout = check_timeout(timeout)
        with self._lock:
            self._require_open()
            self._emit_stats()
            self._send_lingered()
            if self._reports:
                return self._reports.serve()
            deadline = self._accumulator.poll_deadline(time.monotonic(), timeout, POLL_STEP_S)
        while True:
            with self._lock:
                if self._closed:
                    return 0
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return self._reports.serve()
                # At least a millisecond: a batch due "now" by rounding is sent on the next look, not spun on.
                step = min(remaining, POLL_STEP_S, max(self._accumulator.until_linger_s(POLL_STEP_S), 0.001))
            time.sleep(step)  # not under the lock: other threads produce, flush and commit meanwhile
            with self._lock:
                if self._closed:
                    return 0
                self._send_lingered()
                if self._reports:
                    return self._reports.serve()

    @locked
    def flush(self, timeout: float | None = None) -> int:
        """Send every queued message and serve their reports, again while the delivery callbacks produce more
        (until `timeout` seconds have passed, if given); returns how many are left (0: a send does not wait on
        a broker, so nothing is still in flight when it returns)."""
        self._require_open()
        self._emit_stats()
        timeout = check_timeout(timeout)
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        accumulator = self._accumulator
        while True:
            self._gated.send_all([batch for batch in map(accumulator.pop, accumulator.partitions()) if batch is not None])
            self._reports.serve()
            if not self._accumulator or (deadline is not None and time.monotonic() >= deadline):
                return len(self)

    @locked
    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Drop the queued messages (in_queue): each is reported with _PURGE_QUEUE at the next poll()/flush().

        Nothing is ever in flight (a batch is sent within the call that sends it), so `in_flight`
        and `blocking` change nothing. In a transaction the purge makes it abort-only, as a failed
        delivery does (S4.5): the purged messages are not in it."""
        self._require_open()
        if not in_queue or not self._accumulator:
            return
        purged = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue")
        count = 0
        for batch in self._accumulator.drain():
            self._reports.report(batch.tp, batch.messages, -1, purged)
            count += len(batch.messages)
        self._transactions.taint(purged)
        self._logger.info("purged %d queued message(s)", count)

    @locked
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The root's topics and their partitions. A topic the root does not hold comes back with
        UNKNOWN_TOPIC_OR_PART as its `error` and no partitions, as confluent-kafka's metadata carries it."""
        from lakelog.client.metadata import cluster_metadata

        self._require_open()
        return cluster_metadata(self._root, topic)

    # -- open or closed ---------------------------------------------------------------

    @locked
    def close(self, timeout: float | None = None) -> bool:
        """Abort an open transaction, deliver what is queued, then let go of every handle; True, as
        confluent-kafka's. A closed producer refuses every call after this one; closing again is a no-op.

        An open transaction is aborted (its queued messages reported with _PURGE_QUEUE) rather than
        left for its timeout, as confluent-kafka and Kafka's Java client do: read_committed readers are
        not held at its first offset (S5.1) until the sweep aborts it (S4.7). A failure to abort or to
        deliver is a RuntimeWarning, and the producer is closed all the same."""
        if self._closed:
            return True
        try:
            self._abort_open_transaction(timeout)
            left = self.flush(timeout)
            if left:
                warnings.warn(
                    f"Producer flush failed during close: {left} message(s) not delivered", RuntimeWarning, stacklevel=2
                )
        finally:
            # Let go of every handle; what is still queued is dropped unreported (close() flushed it first).
            self._closed = True
            self._accumulator.drain()
            self._reports.clear()
            self._sender.release()
            self._transactions.release()
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        """Close (deliver what is queued, then let go); an exception of the block goes on (returns None)."""
        self.close()

    def __bool__(self) -> bool:
        """Always True, as confluent-kafka's (confluent-kafka-python#1427): `if producer:` does not ask what is queued."""
        return True

    @locked
    def __len__(self) -> int:
        """Messages queued plus delivery reports not yet served (0 once closed), as confluent-kafka's len()."""
        if self._closed:
            return 0
        return self._accumulator.queued() + len(self._reports)

    # -- transactions (S4) ----------------------------------------------------------

    @locked
    def init_transactions(self, timeout: float | None = None) -> None:
        """Take over the transactional.id: get its producer id with a bumped epoch, fencing any
        earlier instance (S4.1), after finishing that instance's last transaction (S4.2)."""
        self._require_transactional("init_transactions")
        self._transactions.require_state("init_transactions", TransactionState.UNINITIALIZED)
        self._transactions.init(_timeout_s(timeout))

    @locked
    def begin_transaction(self) -> None:
        """Start a transaction: every message produced until its commit or abort belongs to it."""
        self._require_transactional("begin_transaction")
        self._transactions.require_state("begin_transaction", TransactionState.READY)
        self._transactions.begin()

    @locked
    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: every message of the transaction becomes visible to read_committed
        readers at once, on every partition (S4.5, S4.8). A failed delivery makes the
        transaction abort-only (the raised error says `txn_requires_abort()`)."""
        transactions = self._transactions
        self._require_transactional("commit_transaction")
        transactions.require_state("commit_transaction", TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)
        self.flush(timeout)
        if transactions.state is TransactionState.FATAL_ERROR:
            transactions.require_state("commit_transaction")
        transactions.require_committable()
        if self._gated.active:
            return self._gated.commit(timeout)  # validates, then commits with the results or aborts (S11.1)
        self._gated.end_transaction(commit=True, timeout=timeout)

    @locked
    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: queued messages are purged (reported with _PURGE_QUEUE) and written ones are
        marked aborted, so read_committed readers never see them (S4.5, S5.2)."""
        transactions = self._transactions
        self._require_transactional("abort_transaction")
        if self._gated.aborted and transactions.state is TransactionState.READY:
            return  # the quality gate aborted it before raising its PolicyViolation (S11.1): nothing left to do
        transactions.require_state("abort_transaction", TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)
        self._gated.purge_transaction()
        self._reports.serve()
        self._gated.end_transaction(commit=False, timeout=timeout)

    @locked
    def send_offsets_to_transaction(self, positions: list[Any], group_metadata: Any, timeout: float | None = None) -> None:
        """Commit the consumer's positions with this transaction (KIP-447, S7.1): they become the
        group's committed offsets when it commits, and vanish if it aborts. `group_metadata`
        comes from `Consumer.consumer_group_metadata()` and is checked like a commit of that
        member (S7.2): a zombie's offsets are refused (IllegalGeneration, FencedInstanceId,
        UnknownMemberId make the transaction abort-only)."""
        self._require_transactional("send_offsets_to_transaction")
        self._transactions.require_state("send_offsets_to_transaction", TransactionState.IN_TRANSACTION)
        self._transactions.send_offsets(positions, group_metadata)

    # -- internals -----------------------------------------------------------------

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError(CLOSED)

    def _require_transactional(self, call: str) -> None:
        self._require_open()
        self._transactions.require_transactional(call)

    def _send_lingered(self) -> None:
        """Send every batch that has waited linger.ms on the producer's clock."""
        accumulator = self._accumulator
        self._gated.send_all([batch for batch in map(accumulator.pop, accumulator.lingered()) if batch is not None])

    def _abort_open_transaction(self, timeout: float | None) -> None:
        if not self._transactions.open:
            return
        text = self._transactions.id_text
        try:
            self.abort_transaction(timeout)
            self._logger.info("%s: closed with a transaction open: aborted it", text)
        except KafkaException as error:
            self._logger.warning("%s: closing: could not abort the open transaction: %s: %s", text, error.error.name(), error)
            warnings.warn(f"Producer could not abort its open transaction during close: {error}", RuntimeWarning, stacklevel=3)

    # -- what tests and tools look at (the parts own the state) -------------------------------

    @property
    def _gate(self) -> ProducerGate:
        return self._gated.gate

    @property
    def _producer_id(self) -> int | None:
        return self._transactions.producer_id

    @property
    def _producer_epoch(self) -> int:
        return self._transactions.producer_epoch

    @property
    def _transaction_state(self) -> TransactionState:
        return self._transactions.state

    @property
    def _transaction_partitions(self) -> set[TopicPartitionKey]:
        return self._transactions.partitions

    @property
    def _default_on_delivery(self) -> DeliveryCallback | None:
        return self._reports.default_on_delivery

    @property
    def _coordinator(self) -> TransactionCoordinator | None:
        return self._transactions.coordinator

    @_coordinator.setter
    def _coordinator(self, coordinator: TransactionCoordinator | None) -> None:
        self._transactions.coordinator = coordinator


def _timeout_s(timeout: float | None) -> float:
    """confluent-kafka's timeouts: seconds, None or negative for "as long as it takes" (capped at a day)."""
    timeout = check_timeout(timeout)
    if timeout is None or timeout < 0:
        return 86_400.0
    return float(timeout)
