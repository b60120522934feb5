"""The Producer's lifecycle and queue calls as confluent-kafka has them.

`ProducerLifecycle` is mixed into `Producer`: `close()` and the context manager,
truthiness, `len()`, `poll()` that waits, `flush()`, `purge()`, `produce_batch()`,
and what happens to a message for a topic the root does not hold (reported
through the delivery callback, unless the topic is created on first use). Every
call of a closed producer raises `RuntimeError("Producer has been closed")`, as
confluent-kafka's does.

The producer is thread-safe, as confluent-kafka's is: every public call that touches
its state runs under the producer's re-entrant lock (`locked`), so each is atomic with
respect to the others, from any thread. Delivery callbacks run on the thread calling
poll()/flush(), under the lock: a callback may produce() again. poll() sleeps outside
the lock, so an idle `while running: p.poll(1.0)` thread does not hold up produce().

The state it works on (`_batches`, `_reports`, `_closed`, `_lock`, ...) belongs to `Producer`.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from lakelog import config
from lakelog.client.types import TIMESTAMP_CREATE_TIME, ClusterMetadata, Message
from lakelog.config import validate_name
from lakelog.errors import InvalidTopic, KafkaError, KafkaException, UnknownTopicOrPartition
from lakelog.log import create_topic, open_partition, topic_config

if TYPE_CHECKING:
    import threading
    from collections import deque

    from lakelog.client.producer import DeliveryCallback, Producer, TransactionState, _Batch
    from lakelog.coordinator.group.coordinator import GroupCoordinator
    from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
    from lakelog.log import PartitionLog
    from lakelog.log.partition import Clock
    from lakelog.store import Location

logger = logging.getLogger(__name__)

CLOSED = "Producer has been closed"
# Internal logs (__consumer_offsets, __transaction_state, ...) are written by their coordinators, never by produce().
INTERNAL_PREFIX = "__"
# The longest single sleep of a waiting poll(): it looks again at the queue (and the clock) this often.
POLL_STEP_S = 0.1

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


class ProducerLifecycle:
    """close(), the context manager, poll()/flush()/purge()/produce_batch() and unknown topics, for `Producer`."""

    # The state these calls work on: set by `Producer.__init__` (see there), declared here so they are typed.
    config: config.Config
    _lock: threading.RLock
    _logger: logging.Logger | logging.LoggerAdapter
    _clock: Clock
    _root: Location
    _default_on_delivery: DeliveryCallback | None
    _logs: dict[tuple[str, int], PartitionLog]
    _num_partitions: dict[str, int]
    _batches: dict[tuple[str, int], _Batch]
    _reports: deque[tuple[DeliveryCallback | None, KafkaError | None, Message]]
    _closed: bool
    _transactional_id: str | None
    _coordinator: TransactionCoordinator | None
    _groups: GroupCoordinator | None
    _transaction_state: TransactionState
    _transaction_error: KafkaException | None

    if TYPE_CHECKING:
        # `Producer`'s calls these make (declarations only; defined in lakelog.client.producer).
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
        ) -> None: ...
        def abort_transaction(self, timeout: float | None = None) -> None: ...
        def _send(self, tp: tuple[str, int]) -> None: ...
        @property
        def _transaction_id_text(self) -> str: ...

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
            self._release()
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
        return sum(len(batch.messages) for batch in self._batches.values()) + len(self._reports)

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError(CLOSED)

    def _abort_open_transaction(self, timeout: float | None) -> None:
        from lakelog.client.producer import TransactionState

        if self._transactional_id is None or self._transaction_state not in (
            TransactionState.IN_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
        ):
            return
        try:
            self.abort_transaction(timeout)
            self._logger.info("%s: closed with a transaction open: aborted it", self._transaction_id_text)
        except KafkaException as error:
            self._logger.warning(
                "%s: closing: could not abort the open transaction: %s: %s", self._transaction_id_text, error.error.name(), error
            )
            warnings.warn(f"Producer could not abort its open transaction during close: {error}", RuntimeWarning, stacklevel=3)

    def _release(self) -> None:
        """Let go of every handle; what is still queued is dropped unreported (close() flushed it first)."""
        self._closed = True
        self._batches.clear()
        self._reports.clear()
        self._logs.clear()
        self._coordinator = None
        self._groups = None

    # -- waiting for reports ----------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> int:
        """Serve delivery reports; returns how many were served.

        Waits up to `timeout` seconds for one (None or negative: as long as a queued batch
        has to linger): a batch is sent once its linger.ms has passed on the producer's
        clock, and poll returns as soon as reports are ready. An idle producer waits the
        whole timeout, in steps of at most POLL_STEP_S, so `while running: p.poll(1.0)`
        does not spin.

        Each look at the queue is made under the producer's lock and each sleep outside it:
        a waiting poll never holds up produce() or flush() on another thread, and serves the
        reports their sends queue at its next look. A producer closed by another thread
        while poll waits ends the wait (0: close() served what was queued)."""
        with self._lock:
            self._require_open()
            self._send_lingered()
            if self._reports:
                return self._serve_reports()
            deadline = self._poll_deadline(timeout)
        while True:
            with self._lock:
                if self._closed:
                    return 0
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return self._serve_reports()
                # At least a millisecond: a batch due "now" by rounding is sent on the next look, not spun on.
                step = min(remaining, POLL_STEP_S, max(self._until_linger_s(), 0.001))
            time.sleep(step)  # not under the lock: other threads produce, flush and commit meanwhile
            with self._lock:
                if self._closed:
                    return 0
                self._send_lingered()
                if self._reports:
                    return self._serve_reports()

    def _poll_deadline(self, timeout: float | None) -> float:
        """When a poll gives up, on the monotonic clock. Without a timeout it waits for the queued
        batches' linger (in real time: a clock passed in that stands still cannot hold it longer);
        with nothing queued nothing can arrive, so it returns at once."""
        now = time.monotonic()
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)):
            raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
        if timeout is None or timeout < 0:
            # One step of slack: the producer's clock counts whole milliseconds, the monotonic clock does not.
            return now + (self._until_linger_s() + POLL_STEP_S if self._batches else 0.0)
        return now + timeout

    def _until_linger_s(self) -> float:
        """Seconds until the oldest queued batch has lingered linger.ms, on the producer's clock (0: due now)."""
        if not self._batches:
            return POLL_STEP_S
        oldest = min(batch.created_ms for batch in self._batches.values())
        return max(oldest + self.config["linger.ms"] - self._clock(), 0) / 1000

    def _send_lingered(self) -> None:
        """Send every batch that has waited linger.ms on the producer's clock (compared in its milliseconds)."""
        linger_ms = self.config["linger.ms"]
        now_ms = self._clock()
        for tp, batch in list(self._batches.items()):
            if now_ms - batch.created_ms >= linger_ms:
                self._send(tp)

    def _serve_reports(self) -> int:
        """Call the delivery callback of each report ready, in order; returns how many were served.

        Called under the producer's lock: callbacks run one at a time, on the serving thread. A callback
        that produces again may queue new reports (a batch it fills is sent at once): they are served too."""
        served = 0
        while self._reports:
            callback, error, message = self._reports.popleft()
            served += 1
            if callback is not None:
                callback(error, message)
        return served

    @locked
    def flush(self, timeout: float | None = None) -> int:
        """Send every queued message and serve their reports, again while the delivery callbacks produce more
        (until `timeout` seconds have passed, if given); returns how many are left (0: a send does not wait on
        a broker, so nothing is still in flight when it returns)."""
        self._require_open()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            for tp in list(self._batches):
                self._send(tp)
            self._serve_reports()
            if not self._batches or (deadline is not None and time.monotonic() >= deadline):
                return len(self)

    # -- dropping and batching --------------------------------------------------------------

    @locked
    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Drop the queued messages (in_queue): each is reported with _PURGE_QUEUE at the next poll()/flush().

        Nothing is ever in flight (a batch is sent within the call that sends it), so `in_flight`
        and `blocking` change nothing. In a transaction the purge makes it abort-only, as a failed
        delivery does (S4.5): the purged messages are not in it."""
        self._require_open()
        if not in_queue or not self._batches:
            return
        purged = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue")
        count = 0
        for tp in list(self._batches):
            batch = self._batches.pop(tp)
            for pending in batch.messages:
                message = Message(
                    topic=tp[0],
                    partition=tp[1],
                    offset=None,
                    key=pending.key,
                    value=pending.value,
                    headers=pending.headers,
                    timestamp=(TIMESTAMP_CREATE_TIME, pending.timestamp_ms),
                    error=purged,
                )
                self._reports.append((pending.on_delivery or self._default_on_delivery, purged, message))
                count += 1
        if self._transactional_id is not None and self._transaction_error is None:
            self._transaction_error = KafkaException(purged)
        self._logger.info("purged %d queued message(s)", count)

    @locked
    def produce_batch(
        self,
        topic: str,
        messages: list[dict[str, Any]],
        partition: int = -1,
        callback: DeliveryCallback | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> int:
        """Queue each message dict (value, key, headers, partition, timestamp, callback) as produce()
        would; returns how many were queued. A message that cannot be queued gets its error as
        `_error` in its dict, as confluent-kafka's. Malformed input raises TypeError before any is queued.
        Atomic: another thread's produce() does not land between the batch's messages."""
        if not isinstance(messages, list):
            raise TypeError("messages must be a list")
        if not messages:
            return 0
        self._require_open()
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise TypeError(f"partition must be int, not {type(partition).__name__}")
        for index, message in enumerate(messages):
            _check_batch_message(index, message)
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

    # -- topics the root does not hold (gap 4) ----------------------------------------------

    def _partition_count(self, topic: str) -> int | None:
        """The topic's partition count, or None when produce() cannot write it (see _report_unknown_topic).

        A missing topic is created on first use only when both the producer allows it
        (allow.auto.create.topics) and the root does (the broker key auto.create.topics.enable),
        as a Kafka broker would; never one named as internal (`__*`), nor an illegal name."""
        if topic in self._num_partitions:
            return self._num_partitions[topic]
        if topic.startswith(INTERNAL_PREFIX):
            return None
        try:
            # Partition 0's log carries the topic's config: kept for its first batch, so that is not a second table load.
            first = open_partition(self._root, topic, 0, clock=self._clock)
            count = first.config.num_partitions
            self._logs.setdefault((topic, 0), first)
        except InvalidTopic:
            return None
        except UnknownTopicOrPartition:
            if not self._may_create_topics():
                return None
            count = self._create_topic(topic)
        self._num_partitions[topic] = count
        return count

    def _may_create_topics(self) -> bool:
        if not self.config.get("allow.auto.create.topics", False):
            return False
        return bool(config.load("broker", {}).get("auto.create.topics.enable", False))

    def _create_topic(self, topic: str) -> int:
        from lakelog.errors import TopicAlreadyExists

        try:
            created = create_topic(self._root, topic, None, None)
        except TopicAlreadyExists:  # another client created it first
            return topic_config(self._root, topic).num_partitions
        self._logger.info("created topic %s on first produce (allow.auto.create.topics, auto.create.topics.enable)", topic)
        return created.num_partitions

    def _report_unknown_topic(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        timestamp_ms: int,
        on_delivery: DeliveryCallback | None,
    ) -> None:
        """A message produce() cannot write: its delivery report (served by the next poll()/flush(), as
        librdkafka fails such messages) carries UNKNOWN_TOPIC_OR_PART for a topic the root does not hold,
        or TOPIC_EXCEPTION for an illegal name or an internal one (`__*`, which Kafka refuses to clients
        too). Nothing is written. In a transaction the failed delivery makes it abort-only, as any does."""
        error = _undeliverable(topic)
        message = Message(
            topic=topic,
            partition=partition,
            offset=None,
            key=key,
            value=value,
            headers=headers,
            timestamp=(TIMESTAMP_CREATE_TIME, timestamp_ms),
            error=error,
        )
        self._reports.append((on_delivery or self._default_on_delivery, error, message))
        if self._transactional_id is not None and self._transaction_error is None:
            self._transaction_error = KafkaException(error)

    @locked
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The root's topics and their partitions. A topic the root does not hold comes back with
        UNKNOWN_TOPIC_OR_PART as its `error` and no partitions, as confluent-kafka's metadata carries it."""
        from lakelog.client.metadata import cluster_metadata

        self._require_open()
        return cluster_metadata(self._root, topic)


def _undeliverable(topic: str) -> KafkaError:
    """Why produce() cannot write to `topic` (see ProducerLifecycle._report_unknown_topic)."""
    if topic.startswith(INTERNAL_PREFIX):
        return KafkaError(KafkaError.TOPIC_EXCEPTION, f"cannot produce to internal topic {topic}")
    try:
        validate_name(topic)
    except InvalidTopic as illegal:
        return KafkaError(KafkaError.TOPIC_EXCEPTION, str(illegal))
    return KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, f"topic {topic} does not exist under the root")


def _check_batch_message(index: int, message: Any) -> None:
    """TypeError for a produce_batch() message confluent-kafka would refuse before queueing any."""
    if not isinstance(message, dict):
        raise TypeError(f"Message at index {index} must be a dict")
    for name in ("value", "key"):
        item = message.get(name)
        if item is not None and not isinstance(item, (bytes, str)):
            raise TypeError(f"Message {name} at index {index} must be bytes or str")
    partition = message.get("partition")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)):
        raise TypeError(f"Message partition at index {index} must be int")
    timestamp = message.get("timestamp")
    if timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool)):
        raise TypeError(f"Message timestamp at index {index} must be int")
    callback = message.get("callback")
    if callback is not None and not callable(callback):
        raise TypeError(f"Message callback at index {index} must be callable")
    headers = message.get("headers")
    if headers is not None and not isinstance(headers, (Mapping, list, tuple)):
        raise ValueError(f"Invalid headers at index {index}")
