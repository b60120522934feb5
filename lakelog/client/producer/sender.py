"""The producer's sender (Kafka's `Sender`): a closed batch appended to its partition, retried on one policy.

`append_sequenced` is the one sequenced append with retries, used by the Producer and by the
transactional batch writer of the jobs: a storage failure is retried with the same producer id,
epoch and sequence, so a retry that finds its batch already in the log gets the original offsets
(S3.2); a lost commit race and a storage failure wait on the same backoff. Retries stop after
`retries` (the producer config's key) or at the backoff's deadline, whichever comes first.

`Sender.send_many` appends the batches of several partitions side by side: each partition is a
table of its own and its append a commit of its own, decided on its own snapshot, so none waits
for another's round trips. What the producer keeps (sequences, delivery reports, the
transaction's errors) is updated on the calling thread, in the batches' order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from lakelog.errors import KafkaError, KafkaException, KafkaStorageError, RetriableError
from lakelog.log import AppendResult, BatchHeader, PartitionLog, open_partition
from lakelog.log.partition import Clock
from lakelog.log.verification import TransactionVerification
from lakelog.store import Location
from lakelog.store.io.retry import Backoff, RetryPolicy
from lakelog.typedef import TopicPartitionKey

if TYPE_CHECKING:
    from lakelog.client.producer.accumulator import Pending
    from lakelog.client.producer.reports import DeliveryReports
    from lakelog.client.producer.transactions import TransactionManager

# What a retried call returns.
T = TypeVar("T")

# A logger, or confluent-kafka's `logger` config (an adapter) a client logs through.
Logger = logging.Logger | logging.LoggerAdapter
# Partitions appended to at once by one send_many (more wait for a free thread).
MAX_SEND_THREADS = 16
# One batch of a send_many: its partition, rows, delivery reports' messages and expected offset.
Outgoing = tuple[TopicPartitionKey, pa.Table, "Sequence[Pending]", "int | None"]


def retrying(
    call: Callable[[], T], backoff: Backoff, retries: int, what: str, log: Logger, *, retry_storage_errors: bool = True
) -> T:
    """`call()`, again after the backoff's wait on a retriable error, up to `retries` times or the backoff's deadline.

    `retry_storage_errors` False: a storage failure is raised at once (an append without a producer id
    cannot be told apart from its duplicate, so retrying it is not safe)."""
    attempts = 0
    while True:
        try:
            return call()
        except RetriableError as error:
            attempts += 1
            retry_allowed = retry_storage_errors or not isinstance(error, KafkaStorageError)
            if attempts > retries or not retry_allowed or not backoff.wait():
                log.warning(
                    "%s: giving up after %d attempt(s)%s: %s: %s",
                    what,
                    attempts,
                    "" if retry_allowed else " (no producer id to retry it safely)",
                    error.error.name(),
                    error,
                )
                raise
            log.warning("%s: retrying (attempt %d) after %s: %s", what, attempts + 1, error.error.name(), error)


def append_sequenced(
    log: PartitionLog,
    payload: pa.Table,
    header: BatchHeader,
    backoff: Backoff,
    retries: int,
    logger: Logger,
    transaction: TransactionVerification | None = None,
    ready: Callable[[], TransactionVerification | None] | None = None,
) -> AppendResult:
    """Append one batch, retrying a storage failure with the same sequence when the batch has a producer id (S3.2).

    A transactional batch names its transactional.id and coordinator (`transaction`, or `ready` while the
    transaction's add of the partition is in flight: `PartitionLog.append`), so the partition verifies the
    transaction's first batch there (KIP-890, S4.4)."""
    what = f"{log.topic}-{log.partition}: a batch of {payload.num_rows}"
    return retrying(
        lambda: log.append(payload, header, backoff=backoff, transaction=transaction, ready=ready),
        backoff,
        retries,
        what,
        logger,
        retry_storage_errors=header.is_idempotent,
    )


class Sender:
    """Appends a producer's closed batches, each with the header its transaction manager gives, and reports them.

    Holds the producer's open partition logs: one handle per partition, lent to the transaction coordinator
    for its markers (TransactionManager's `lend_log`)."""

    def __init__(
        self,
        root: Location,
        clock: Clock,
        retry: RetryPolicy,
        retries: int,
        timeout_s: float,
        logger: Logger,
        transactions: TransactionManager,
        reports: DeliveryReports,
        queued: Callable[[], Sequence[TopicPartitionKey]],
    ) -> None:
        self._root = root
        self._clock = clock
        self._retry = retry
        self._retries = retries  # `retries`
        self._timeout_s = timeout_s  # `message.timeout.ms`: one send's deadline, every retry included
        self._logger = logger
        self._transactions = transactions
        self._reports = reports
        self._queued = queued  # the partitions holding a queued batch: added to a transaction with the first
        self._logs: dict[TopicPartitionKey, PartitionLog] = {}
        self._threads: ThreadPoolExecutor | None = None
        # The transaction's add of partitions begun by start_add, and the partitions it covers.
        self._add: tuple[Future[None], frozenset[TopicPartitionKey]] | None = None

    def log(self, tp: TopicPartitionKey) -> PartitionLog:
        """Our open handle of a partition (opened on first use)."""
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = open_partition(self._root, *tp, clock=self._clock)
        return log

    def adopt(self, tp: TopicPartitionKey, log: PartitionLog) -> None:
        """Keep a handle opened elsewhere (partition 0's, read for the topic's config; the results log), unless one is open."""
        self._logs.setdefault(tp, log)

    def lend(self, topic: str, partition: int) -> PartitionLog:
        return self.log((topic, partition))

    def retrying(self, tp: TopicPartitionKey, count: int, call: Callable[[], T], backoff: Backoff) -> T:
        """`call()` retried as a send of `count` records to `tp` is (`retries`, the backoff's deadline)."""
        return retrying(call, backoff, self._retries, f"{tp[0]}-{tp[1]}: a batch of {count}", self._logger)

    def backoff(self) -> Backoff:
        """One send's backoff: lost races and storage failures grow the same wait, until message.timeout.ms."""
        return self._retry.start(self._timeout_s)

    def send(
        self,
        tp: TopicPartitionKey,
        payload: pa.Table,
        messages: Sequence[Pending],
        expected_offset: int | None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        """Append a batch and queue its delivery reports; its base offset, or -1 if it failed (reported).

        `ready` (without a transaction): what the commit waits for and the batch's file does not, made on
        another thread meanwhile (`background`); if it raises, nothing is committed nor reported, and its
        error leaves here (PartitionLog.append)."""
        return self.send_many([(tp, payload, messages, expected_offset)], ready)[0]

    def background(self, call: Callable[[], T]) -> Future[T]:
        """`call()` on the sender's threads."""
        return self._pool().submit(call)

    def start_add(self, tps: Sequence[TopicPartitionKey]) -> None:
        """Begin the transaction's add of `tps` (with the partitions holding a queued batch) on another thread,
        so the work before their appends overlaps it; a send_many of them takes it (else `finish_add`)."""
        if self._transactions.transactional and tps:
            self.finish_add()
            add = self._begin_add(tps)
            if add is not None:
                self._add = (add, frozenset(tps))

    def finish_add(self) -> None:
        """Wait for an add start_add began that no send took; its failure is the next add's to meet again."""
        pending, self._add = self._add, None
        if pending is not None and pending[0].exception() is not None:
            self._logger.debug(
                "an add of %d partition(s) no batch was sent for failed: %s", len(pending[1]), pending[0].exception()
            )

    def _take_add(self, tps: Sequence[TopicPartitionKey]) -> Future[None] | None:
        """The add these batches' appends wait for: start_add's if it covers them, else one begun now."""
        if self._add is not None and set(tps) <= self._add[1]:
            add, self._add = self._add[0], None
            return add
        self.finish_add()
        return self._begin_add(tps)

    def _begin_add(self, tps: Sequence[TopicPartitionKey]) -> Future[None] | None:
        try:
            call = self._transactions.adding(tps[0], list(tps[1:]) + list(self._queued()))
        except KafkaException as exception:
            return _failed(exception)
        return None if call is None else self._pool().submit(call)

    def send_many(self, batches: Sequence[Outgoing], ready: Callable[[], None] | None = None) -> list[int]:
        """`send` each batch, the partitions' appends side by side; their base offsets (-1: failed, reported).

        The transaction (if any) gets every partition in one add, on another thread: each append writes its file
        meanwhile and puts its commit once the add is in (S4.4). Each batch's header is taken here, in order, so
        only the appends run on other threads. Two batches of one partition are sent one after the other.
        `ready`: see `send`."""
        if len({batch[0] for batch in batches}) < len(batches):
            return [self.send(*batch, ready) for batch in batches]
        transactions = self._transactions
        assert ready is None or not transactions.transactional, "a transaction's appends wait for its add"
        add = self._take_add([batch[0] for batch in batches]) if transactions.transactional else None
        prepared: list[tuple[BatchHeader, Backoff] | KafkaException] = []
        for tp, payload, _, expected_offset in batches:
            backoff = self.backoff()
            try:
                header = self.retrying(tp, payload.num_rows, partial(transactions.header, tp, expected_offset), backoff)
                self.log(tp)  # opened here: a handle opens on this thread, once
            except KafkaException as exception:
                prepared.append(exception)
                continue
            prepared.append((header, backoff))
        verification = transactions.verification() if transactions.transactional and add is None else None
        added = None if add is None else partial(_added, add, transactions.verification)
        futures: list[Future[AppendResult] | KafkaException] = []
        for (tp, payload, _, _), item in zip(batches, prepared, strict=True):
            if isinstance(item, KafkaException):
                futures.append(item)
                continue
            header, backoff = item
            transactional = header.is_transactional
            futures.append(
                (self._pool().submit if len(batches) > 1 else _now)(
                    append_sequenced,
                    self._logs[tp],
                    payload,
                    header,
                    backoff,
                    self._retries,
                    self._logger,
                    verification if transactional else None,
                    added if transactional else ready,
                )
            )
        failed_add = _add_error(add, futures)
        offsets = []
        for (tp, payload, messages, _), item, future in zip(batches, prepared, futures, strict=True):
            error: KafkaError | None = None
            base_offset = -1
            try:
                if failed_add is not None:
                    raise failed_add  # no batch of a transaction that did not get the partition (S4.4)
                if isinstance(future, KafkaException):
                    raise future
                landed = future.result()
                base_offset = landed.base_offset
                assert not isinstance(item, KafkaException)
                transactions.sent(tp, item[0], payload.num_rows)
            except KafkaException as exception:
                error, base_offset = exception.error, -1
                transactions.failed(exception)
            self._reports.report(tp, messages, base_offset, error)
            offsets.append(base_offset)
        return offsets

    def _pool(self) -> ThreadPoolExecutor:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(MAX_SEND_THREADS, thread_name_prefix="lakelog-send")
        return self._threads

    def release(self) -> None:
        """Let go of every handle (a closed producer)."""
        self._logs.clear()
        self._add = None
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False)


class _AddFailed(Exception):
    """An append's wait for the transaction's add, which failed: never retried, the add's own error is reported."""


def _added(add: Future[None], verification: Callable[[], TransactionVerification]) -> TransactionVerification:
    """An append's `ready`: wait for the transaction's add of its partition, then what to verify the batch with."""
    try:
        add.result()
    except BaseException as error:
        raise _AddFailed() from error
    return verification()


def _add_error(add: Future[None] | None, appends: Sequence[Future[AppendResult] | KafkaException]) -> KafkaException | None:
    """Once every append ended: the add's failure, which every batch of the send then reports (None: it went in)."""
    if add is None:
        return None
    for append in appends:
        if isinstance(append, Future):
            append.exception()
    error = add.exception()
    if error is not None and not isinstance(error, KafkaException):
        raise error
    return error


def _failed(exception: KafkaException) -> Future[None]:
    future: Future[None] = Future()
    future.set_exception(exception)
    return future


def _now(call: Callable[..., AppendResult], *args: object) -> Future[AppendResult]:
    """`call(*args)` on this thread, as a done Future (a send of one batch needs no other thread)."""
    future: Future[AppendResult] = Future()
    try:
        future.set_result(call(*args))
    except BaseException as error:  # noqa: BLE001 - handed to the caller through the future, as the pool would
        future.set_exception(error)
    return future


__all__ = ["MAX_SEND_THREADS", "Outgoing", "Sender", "append_sequenced", "retrying"]
