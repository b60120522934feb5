"""Where the Producer's batches go under the quality gates (S11), and a gated transaction's commit.

The gates decide; this acts on their decisions with the producer's parts: a batch of a producer
without transactional.id goes where the batch gate's `BatchDecision` says (appended, dead-lettered
or refused with an error in its reports); a transaction's batches are held (dead-letter topics)
or appended with their rows kept for the verdict, and at commit the verdicts are carried out:
an enforce failure aborts, anything else appends the held batches and the result rows inside
the transaction, which then commits.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any

import pyarrow as pa

from lakelog.client.producer.accumulator import Batch, Pending, RecordAccumulator
from lakelog.client.producer.gate import Identity, ProducerGate
from lakelog.client.producer.idempotent_gate import IdempotentGate
from lakelog.client.producer.limits import split_oversized
from lakelog.client.producer.reports import DeliveryReports
from lakelog.client.producer.sender import Logger, Outgoing, Sender
from lakelog.client.producer.transactions import TransactionManager
from lakelog.errors import KafkaError, KafkaException
from lakelog.log import payload_table
from lakelog.quality.suites import Suite
from lakelog.typedef import TopicPartitionKey


class GatedDelivery:
    """Sends a producer's closed batches past its quality gates and ends its transactions with their verdicts."""

    def __init__(
        self,
        gate: ProducerGate,
        batch_gate: IdempotentGate | None,
        accumulator: RecordAccumulator,
        sender: Sender,
        transactions: TransactionManager,
        reports: DeliveryReports,
        logger: Logger,
    ) -> None:
        self.gate = gate  # the transaction's (tests set its `fault`)
        self._batch_gate = batch_gate  # without a transaction: each batch judged before it is appended (S11.1)
        self._accumulator = accumulator
        self._sender = sender
        self._transactions = transactions
        self._reports = reports
        self._logger = logger

    @property
    def active(self) -> bool:
        """Whether the open transaction wrote rows its verdicts must judge before it commits."""
        return self.gate.active

    @property
    def aborted(self) -> bool:
        """Whether the gate aborted the transaction (abort_transaction() after its PolicyViolation is a no-op)."""
        return self.gate.aborted

    def send(self, batch: Batch | None) -> None:
        """Send a closed batch where the quality gates say: held to the commit (a dead-letter topic of a transaction),
        judged first (no transaction), or appended and its rows kept for the transaction's verdict."""
        if batch is not None:
            self.send_all([batch])

    def send_all(self, batches: list[Batch]) -> None:
        """`send` each batch; those appended as they are go to their partitions side by side (Sender.send_many).

        A transaction's add of the partitions begins first, so the topics' suites are read while it is made."""
        outgoing: list[Outgoing] = []
        self._sender.start_add([batch.tp for batch in batches if batch.messages])
        for batch in batches:
            if not batch.messages:
                continue
            # The log refuses a whole batch holding a record past the topic's max.message.bytes: the producer takes
            # such records out first (Kafka's producer splits a batch the broker refused so), so they fail alone.
            max_bytes = self._topic_max_bytes(batch.tp)
            if max_bytes is not None and batch.largest > max_bytes:
                for part in split_oversized(batch, max_bytes):
                    if isinstance(part, Batch):
                        self._send_batch(part)
                    else:
                        self._reports.report(batch.tp, [part[0]], -1, part[1])
                        self._transactions.taint(part[1])  # a failed delivery makes a transaction abort-only (S4.5)
                continue
            ready = self._prepare(batch)
            if ready is not None:
                outgoing.append(ready)
        if not outgoing:
            self._sender.finish_add()
            return
        offsets = self._sender.send_many(outgoing)
        for (tp, payload, _, _), base_offset in zip(outgoing, offsets, strict=True):
            self.gate.keep(tp, payload, base_offset)

    def _topic_max_bytes(self, tp: TopicPartitionKey) -> int | None:
        """The topic's max.message.bytes, from the handle the batch is appended with (None: the log cannot be opened,
        and the send meets that error and reports it)."""
        try:
            return self._sender.log(tp).config.max_message_bytes
        except KafkaException:
            return None

    def _send_batch(self, batch: Batch) -> None:
        ready = self._prepare(batch)
        if ready is not None:
            tp, payload, messages, expected_offset = ready
            self.gate.keep(tp, payload, self._sender.send(tp, payload, messages, expected_offset))

    def _prepare(self, batch: Batch) -> Outgoing | None:
        """The batch's rows, to append as they are; None if it went elsewhere (failed alone, held, judged first)."""
        tp, messages = batch.tp, batch.messages
        # Pending is (key, value, headers, timestamp_ms, on_delivery).
        keys, values = [m[0] for m in messages], [m[1] for m in messages]
        headers, timestamps_ms = [m[2] for m in messages], [m[3] for m in messages]
        try:
            # No headers at all (the common case): one C-level count instead of a look at each.
            payload = payload_table(
                values, keys=keys, headers=None if headers.count(None) == len(headers) else headers, timestamps_ms=timestamps_ms
            )
        except (KafkaException, pa.ArrowException, ValueError, OverflowError) as error:
            self._send_alone(batch, error)  # produce() checks every message: this is the last guard, not the path
            return None
        if self.gate.hold(tp, payload, messages, batch.expected_offset):
            return None  # a dead-letter topic's batch: appended at commit, where its verdict sends it (S11.3)
        if self._batch_gate is None:
            return tp, payload, messages, batch.expected_offset
        self._send_judged(tp, payload, messages, batch.expected_offset)
        return None

    def _send_alone(self, batch: Batch, error: Exception) -> None:
        """A batch whose rows could not be built: each message sent as a batch of its own, so only the one that
        cannot be is reported failed (with _INVALID_ARG), and the others are delivered."""
        if len(batch.messages) > 1:
            for index, message in enumerate(batch.messages):
                expected = None if batch.expected_offset is None else batch.expected_offset + index
                self._send_batch(Batch(batch.topic, batch.partition, batch.created_ms, expected, [message]))
            return
        text = error.error.str() if isinstance(error, KafkaException) else str(error).splitlines()[0]
        failed = KafkaError(KafkaError._INVALID_ARG, f"{batch.topic}-{batch.partition}: the message cannot be written: {text}")
        self._reports.report(batch.tp, batch.messages, -1, failed)
        self._transactions.taint(failed)

    def _send_judged(self, tp: TopicPartitionKey, payload: Any, messages: list[Pending], expected_offset: int | None) -> None:
        """No transaction: the batch gate's decision on the batch, acted on (S11.1, S11.3, S8.3).

        The topic's suite is read while the batch's file is written: the commit waits for the read, and goes
        in only if the topic has no suite; else the file is deleted, and the batch is judged on what was read."""
        assert self._batch_gate is not None
        sender, gate = self._sender, self._batch_gate
        backoff = sender.backoff()

        # How the suite's read is retried (as the append is); once read beside the file, its answer or its error.
        retrying: Callable[[Callable[[], Suite | None]], Suite | None] = lambda call: sender.retrying(  # noqa: E731
            tp, payload.num_rows, call, backoff
        )
        # On a local root a read costs microseconds and a hand-off to a thread more: read first, then decide.
        if not gate.local:
            suite = sender.background(partial(gate.suite, tp, retrying))
            try:
                sender.send(tp, payload, messages, expected_offset, partial(_ungated, suite))
                return  # no suite: no verdict, no result row
            except _Gated:
                retrying = lambda _: suite.result()  # noqa: E731
        decision = gate.decide(tp, payload, expected_offset, retrying)
        identity = self._transactions
        if decision.error is not None:
            gate.record(decision, identity.producer_id, identity.producer_epoch)
            self._reports.report(tp, messages, -1, decision.error)
            return
        base_offset = sender.send(decision.tp, decision.payload, messages, decision.expected_offset)
        gate.record(decision, identity.producer_id, identity.producer_epoch, base_offset)

    def commit(self, timeout: float | None) -> None:
        """Commit a transaction that wrote gated rows, on its verdicts (S11.1-S11.3): an enforce failure is recorded,
        the transaction aborted and its PolicyViolation raised; otherwise held batches go where their verdicts send
        them, every result row is appended inside the transaction, and it commits."""
        transactions, gate, sender = self._transactions, self.gate, self._sender
        try:
            verdicts = gate.judge()
        except KafkaException as error:  # a suite that does not fit the rows: this transaction cannot commit
            transactions.abortable(error)
            raise
        refused = [verdict for verdict in verdicts if not verdict.publish]
        if refused:
            gate.record_refusals(refused, self._identity())
            self.purge_transaction()
            self.end_transaction(commit=False, timeout=timeout)
            gate.aborted = True
            self._reports.serve()
            self._logger.warning(
                "%s: transaction aborted by the quality gate of %s (validation %s)",
                transactions.id_text,
                refused[0].topic,
                refused[0].validation_id,
            )
            raise refused[0].violation()
        ranges = {}
        for verdict in verdicts:
            appends = gate.held(verdict)
            landed = None
            if appends is not None:
                landed = [(a, sender.send(a.tp, a.payload, a.messages, a.expected_offset)) for a in appends]
            ranges[verdict.topic] = gate.offset_ranges(verdict, landed)
        tp, log = gate.results_log()
        sender.adopt(tp, log)
        sender.send(tp, gate.results(verdicts, ranges, self._identity()), [], None)
        gate.decided()
        transactions.require_committable()
        gate.reached_decision(verdicts)
        self.end_transaction(commit=True, timeout=timeout)
        self._reports.serve()

    def _identity(self) -> Identity:
        transactions = self._transactions
        return Identity(transactions.transactional_id, transactions.producer_id, transactions.producer_epoch)

    def purge_transaction(self) -> None:
        """The transaction aborts: its queued messages and the gate's held ones are reported with _PURGE_QUEUE."""
        purged = KafkaError(KafkaError._PURGE_QUEUE, "purged: the transaction was aborted")
        for batch in self._accumulator.drain():
            self._reports.report(batch.tp, batch.messages, -1, purged)
        for tp, messages in self.gate.purge():
            self._reports.report(tp, messages, -1, purged)

    def end_transaction(self, commit: bool, timeout: float | None = None) -> None:
        self._transactions.end(commit, timeout)
        self.gate.reset()


class _Gated(Exception):
    """The batch's topic has a suite (or it could not be read): the batch is judged before anything commits."""


def _ungated(suite: Future[Any]) -> None:
    """A batch's `ready` without a transaction: raise _Gated unless its topic's suite was read and there is none."""
    try:
        found = suite.result()
    except KafkaException as error:
        raise _Gated() from error
    if found is not None:
        raise _Gated()
