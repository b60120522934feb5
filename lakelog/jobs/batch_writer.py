"""Exactly-once bulk writes: a whole batch of Arrow rows over many partitions as one transaction.

What a Spark job's write needs (pyspark_lakelog's sink): rows already grouped
per partition, appended as transactional batches by one producer id and
committed, or aborted, together (S4.5, S4.8), in the coordinator's own steps:
`init_producer_id`, `add_partitions`, appends with `(producer id, epoch,
sequence, is_transactional)` headers, `end_transaction`.

A retried job is recognised by its `batch_id` (an integer that grows from one
batch to the next of a `transactional.id`, like Delta's `txnVersion` or a
Structured Streaming batch id). The transaction that writes batch N also
appends one record row to `__sink_batches` (an internal log hashed by
transactional id, compacted by key), so the batch's record commits or aborts
with its data; the last committed batch is read from those rows alone
(lakelog.jobs.sink_records), and a record lives as long as the rows it
protects (S9.4). A batch at or below the last committed one is skipped, writing
nothing.

The record's value is JSON: the batch id, the batch committed before it, the
rows and offsets each partition received, and a note of the caller's (what the
batch covered), so a skipped retry can say where its batch landed. A retry is
checked read-only, before `init_producer_id`: a batch at or below one that is
committed is skipped without bumping the epoch (S8.3), even while a later
batch's transaction is open (whatever that one decides, the batch before it
stays committed). Only when the check cannot tell does the writer fence and
look again.

Topics with a quality suite are gated (S11.1-S11.3; lakelog.quality.batch_gate):
the batch's rows of each such topic are kept in hand (a dead-letter topic's
are held back, not appended) and judged all at once after the last row,
before the batch's record and the commit. A pass, a warn failure and a
dead-letter failure append the result row to `__quality_results` inside the
transaction (the held rows go to the topic, or to `<topic>.dlq` with the
validation id in a header), so the row commits or aborts with the data. An
enforce failure records its row at once, aborts, and raises PolicyViolation:
the batch is not committed, so a retry validates again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakelog import config
from lakelog.client.producer.sender import append_sequenced
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import (
    ConcurrentTransactions,
    InvalidRequest,
    KafkaException,
    KafkaTimeout,
    OffsetMismatch,
    PolicyViolation,
)
from lakelog.jobs.sink_records import (
    SINK_BATCHES_LOG,
    SINK_BATCHES_PARTITIONS,
    CommittedBatch,
    RecordState,
    open_batches_log,
    protected_after,
    read_records,
    record_value,
)
from lakelog.log import AppendResult, BatchHeader, PartitionLog, open_partition, payload_table, topic_config
from lakelog.log.partition import APPEND_TIMEOUT_S
from lakelog.log.records import next_sequence
from lakelog.log.verification import TransactionVerification
from lakelog.quality.batch_gate import BatchGate
from lakelog.quality.dead_letter import dlq_topic, ensure_dlq_topic, with_dlq_header
from lakelog.quality.results import RESULTS_LOG, open_results_log, record_result, result_payload
from lakelog.store import Location, open_root
from lakelog.store.io.retry import RetryPolicy
from lakelog.typedef import TopicPartitionKey

logger = logging.getLogger(__name__)

# How long a batch's record keeps trying for its offset.
RECORD_TIMEOUT_S = 60.0


# Kafka's "no producer id": what a batch skipped before `init_producer_id` reports.
NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class BatchWriteResult:
    """What `write` did: `skipped` if the batch was committed before (a retry); records written per partition.

    `offsets` holds, per partition, the first and last offset of the batch's rows
    there (other writers' rows may sit between them). For a skipped batch,
    `records`, `offsets` and `note` are what its record says was written (empty
    if the record is older than this format, or is of an earlier batch).
    """

    batch_id: int | None
    skipped: bool
    last_committed_batch: int | None
    records: Mapping[TopicPartitionKey, int]
    producer_id: int
    producer_epoch: int
    offsets: Mapping[TopicPartitionKey, tuple[int, int]] = field(default_factory=dict)
    note: Mapping[str, Any] = field(default_factory=dict)
    # Per gated topic, the id of the validation this batch's commit recorded (its row in __quality_results).
    validations: Mapping[str, str] = field(default_factory=dict)


class TransactionalBatchWriter:
    """Writes batches of rows to many partitions, each batch as one transaction of `transactional_id`."""

    def __init__(
        self,
        root: str | Location,
        transactional_id: str,
        *,
        transaction_timeout_ms: int | None = None,
        producer_config: Mapping[str, Any] | None = None,
    ) -> None:
        """`producer_config`: producer configs (`transaction.timeout.ms`, `retry.backoff.ms`, `partitioner`, ...)
        over the shipped defaults, validated; `transaction_timeout_ms` overrides its timeout."""
        self.root = open_root(root)
        if not isinstance(transactional_id, str) or not transactional_id:
            raise InvalidRequest(f"transactional.id must be a non-empty string, not {transactional_id!r}")
        self.transactional_id = transactional_id
        self.config = config.load("producer", {**(producer_config or {}), "lakelog.root": self.root})
        self.transaction_timeout_ms = transaction_timeout_ms or self.config["transaction.timeout.ms"]
        self.retry = RetryPolicy.from_config(self.config)
        self._logs: dict[TopicPartitionKey, PartitionLog] = {}
        self._coordinator = TransactionCoordinator(self.root, partition_logs=lambda *tp: self._logs.get(tp), retry=self.retry)
        # KIP-890: each partition checks that the transaction holds it before its first batch lands (S4.4).
        self._verification = TransactionVerification(transactional_id, self._coordinator)

    def write(
        self,
        batches: Mapping[TopicPartitionKey, Iterable[pa.Table]],
        batch_id: int | None = None,
        *,
        note: Mapping[str, Any] | None = None,
        unit: str | None = None,
    ) -> BatchWriteResult:
        """Append each partition's payload tables (PAYLOAD_SCHEMA columns) and commit them all at once.

        Without `batch_id` every call writes. With it, a batch at or below the
        last committed one of this transactional id is skipped. Fences earlier
        instances of the id (S4.1). On any error the transaction is aborted and
        the error raised; if the process dies instead, the next write (or the
        coordinator sweep) aborts it. A gated topic whose rows fail an enforce
        suite raises PolicyViolation, the transaction aborted; `unit` names the
        batch in the validation's result row (`load_unit`).
        """
        targets = sorted(batches)
        payloads = ((tp, payload) for tp in targets for payload in batches[tp])
        return self.write_stream(targets, payloads, batch_id, note=note, unit=unit)

    def write_stream(
        self,
        partitions: Iterable[TopicPartitionKey],
        rows: Iterable[tuple[TopicPartitionKey, pa.Table]],
        batch_id: int | None = None,
        *,
        note: Mapping[str, Any] | None = None,
        unit: str | None = None,
    ) -> BatchWriteResult:
        """`write`, for rows that arrive as a stream of (partition, payload) pairs in any order.

        Every partition a pair names must be in `partitions`, which are added to
        the transaction before the first row is appended. `rows` is iterated only
        once the batch is known not to be committed: given a generator, a skipped
        batch never reads its source.
        """
        if batch_id is not None and (not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < 0):
            raise InvalidRequest(f"batch.id must be a non-negative integer, not {batch_id!r}")
        note = dict(note or {})
        json.dumps(note)  # a note that is not JSON fails here, before anything is written
        if batch_id is not None:
            skipped = self._skip_before_init(batch_id)
            if skipped is not None:
                return skipped
        targets = sorted(set(partitions))
        # Read before anything is written: an unreadable suite refuses the batch with the tables unchanged (S8.3).
        gate = BatchGate(self.root, {topic for topic, _ in targets})
        identity = self._coordinator.init_producer_id(self.transactional_id, self.transaction_timeout_ms)
        producer_id, producer_epoch = identity.producer_id, identity.producer_epoch
        committed = self.committed_batch() if batch_id is not None else None
        last_committed = committed.batch_id if committed is not None else None
        if committed is not None and batch_id is not None and batch_id <= committed.batch_id:  # (committed: batch_id set)
            return _skipped(batch_id, committed, producer_id, producer_epoch)
        transaction_partitions = list(targets)
        if batch_id is not None:
            transaction_partitions.append(self._batches_partition_key())
        records: dict[TopicPartitionKey, int] = {}
        offsets: dict[TopicPartitionKey, tuple[int, int]] = {}
        if not transaction_partitions:
            return BatchWriteResult(batch_id, False, last_committed, records, producer_id, producer_epoch)
        for tp in targets:
            self._log(tp)
        self._coordinator.add_partitions(self.transactional_id, producer_id, producer_epoch, transaction_partitions)
        appends = _Appends(self, producer_id, producer_epoch, targets, records, offsets)
        validations: dict[str, str] = {}
        try:
            for tp, payload in rows:
                if tp not in appends.sequences:
                    raise InvalidRequest(f"{tp[0]}-{tp[1]} is not among the partitions of this batch")
                if payload.num_rows == 0:
                    continue
                if gate.holds_back(tp[0]):
                    gate.hold(tp, payload)
                    continue
                landed = appends.append(tp, payload)
                gate.appended(tp, payload, landed.base_offset, landed.last_offset)
            if gate:
                validations = self._pass_gate(gate, appends, unit)
            if batch_id is not None:
                self._record_batch(batch_id, committed, producer_id, producer_epoch, records, offsets, note)
        except BaseException as failure:
            try:
                self._coordinator.end_transaction(self.transactional_id, producer_id, producer_epoch, commit=False)
                # INFO for a quality gate's refusal: the PolicyViolation raised next tells the caller (one line in the CLI).
                (logger.info if isinstance(failure, PolicyViolation) else logger.warning)(
                    "batch %s of %s failed; its transaction was aborted", batch_id, self.transactional_id
                )
            except KafkaException as error:
                # Fenced or unreachable: whoever comes next aborts it (S4.2, S4.7).
                logger.warning(
                    "batch %s of %s failed and its transaction could not be aborted (%s); the next attempt or the "
                    "sweep aborts it",
                    batch_id,
                    self.transactional_id,
                    error,
                )
            raise
        ended = self._coordinator.end_transaction(self.transactional_id, producer_id, producer_epoch, commit=True)
        return BatchWriteResult(
            batch_id, False, last_committed, records, ended.producer_id, ended.producer_epoch, offsets, note, validations
        )

    def last_committed_batch(self) -> int | None:
        """The highest batch id of this transactional id whose transaction committed, or None.

        Raises ConcurrentTransactions while the transaction that wrote the last
        record is still open: call after `init_producer_id` to be sure of an answer.
        """
        committed = self.committed_batch()
        return committed.batch_id if committed is not None else None

    def committed_batch(self) -> CommittedBatch | None:
        """The last committed batch of this transactional id with what its record says, or None.

        If the last record's transaction aborted and no older record is left, the
        batch committed before it is returned without offsets or note. Raises
        ConcurrentTransactions while the last record's transaction is open.
        """
        state = self._records()
        if state.open_batch is not None:
            raise ConcurrentTransactions(
                f"the transaction that wrote batch {state.open_batch} of {self.transactional_id!r} is still open; retry"
            )
        return state.committed

    def _skip_before_init(self, batch_id: int) -> BatchWriteResult | None:
        """A batch already committed, told read-only before fencing anyone (S8.3); None to go on and write."""
        try:
            committed = self._records().committed
        except ConcurrentTransactions:
            return None  # a record of the older format is open: `init_producer_id` finishes it, then the check is made again
        # A later batch's open transaction does not matter: the batches committed before it stay committed.
        if committed is None or batch_id > committed.batch_id:
            return None
        return _skipped(batch_id, committed, NO_PRODUCER_ID, NO_PRODUCER_ID)

    # -- internals --------------------------------------------------------------------

    def _pass_gate(self, gate: BatchGate, appends: _Appends, unit: str | None) -> dict[str, str]:
        """Judge the gated topics' rows and act on the verdicts inside the transaction (S11.1-S11.3).

        An enforce failure records its result row at once (that data can never
        commit, so "failed" stays true) and raises PolicyViolation; the caller
        aborts. Otherwise held rows go to their topic or its DLQ, and every
        result row is appended to __quality_results in this transaction.
        Returns the validation id per gated topic.
        """
        verdicts = gate.judge()
        identity = {
            "transactional_id": self.transactional_id,
            "load_unit": unit,
            "producer_id": appends.producer_id,
            "producer_epoch": appends.producer_epoch,
        }
        refused = [verdict for verdict in verdicts if not verdict.publish]
        for verdict in refused:
            record_result(
                self.root,
                verdict.result,
                validation_id=verdict.validation_id,
                offset_ranges=gate.offset_ranges(verdict.topic),
                **identity,
            )
        if refused:
            raise refused[0].violation()
        destinations: dict[str, list[tuple[TopicPartitionKey, pa.Table]]] = {}
        for verdict in verdicts:
            held = gate.held(verdict.topic)
            if not held:
                continue
            if verdict.dead_letter:
                ensure_dlq_topic(self.root, verdict.topic)
                dlq = dlq_topic(verdict.topic)
                count = topic_config(self.root, dlq).num_partitions
                destinations[verdict.topic] = [
                    ((dlq, item.partition % count), with_dlq_header(item.payload, verdict.validation_id)) for item in held
                ]
            else:
                destinations[verdict.topic] = [((verdict.topic, item.partition), item.payload) for item in held]
        results = self._results_log()
        added = sorted({tp for routed in destinations.values() for tp, _ in routed} - set(appends.sequences))
        self._coordinator.add_partitions(
            self.transactional_id, appends.producer_id, appends.producer_epoch, [*added, (RESULTS_LOG, results.partition)]
        )
        for topic, routed in destinations.items():
            for tp, payload in routed:
                landed = appends.append(tp, payload)
                gate.landed(topic, tp[1], landed.base_offset, landed.last_offset)
        rows = pa.concat_tables(
            result_payload(
                verdict.result,
                validation_id=verdict.validation_id,
                offset_ranges=gate.offset_ranges(verdict.topic),
                **identity,
            )
            for verdict in verdicts
        )
        appends.append((RESULTS_LOG, results.partition), rows)
        for verdict in verdicts:
            if verdict.dead_letter:
                logger.warning(
                    "batch of %s: %d row(s) of %s failed suite %s and go to %s with validation %s (dead-letter)",
                    self.transactional_id,
                    verdict.result.row_count,
                    verdict.topic,
                    verdict.suite.name,
                    dlq_topic(verdict.topic),
                    verdict.validation_id,
                )
        return {verdict.topic: verdict.validation_id for verdict in verdicts}

    def _results_log(self) -> PartitionLog:
        found = next((log for (name, _), log in self._logs.items() if name == RESULTS_LOG), None)
        if found is None:
            found = open_results_log(self.root)
            self._logs[(RESULTS_LOG, found.partition)] = found
        return found

    def _record_batch(
        self,
        batch_id: int,
        committed: CommittedBatch | None,
        producer_id: int,
        producer_epoch: int,
        records: Mapping[TopicPartitionKey, int],
        offsets: Mapping[TopicPartitionKey, tuple[int, int]],
        note: Mapping[str, Any],
    ) -> None:
        log = self._batches_log()
        before = committed.batch_id if committed is not None else None
        value = record_value(batch_id, before, records, offsets, note, protected_after(committed, offsets))
        payload = payload_table([value], keys=[self.transactional_id.encode()])
        backoff = self.retry.start(RECORD_TIMEOUT_S)
        while True:
            expected = log.log_end_offset()
            header = BatchHeader(producer_id, producer_epoch, 0, is_transactional=True, expected_offset=expected)
            try:
                # A lost commit race waits in there, on this record's backoff, before the append decides again.
                log.append(payload, header, backoff=backoff, transaction=self._verification)
                return
            except OffsetMismatch:
                # Another id's record took the offset first: nothing was written. The refusal was checked on the
                # latest snapshot, so the next decision reads that snapshot's end offset without a reload.
                if backoff.expired():
                    message = f"batch {batch_id} of {self.transactional_id}: its record lost its offset past the deadline"
                    logger.warning("%s; giving up", message)
                    raise KafkaTimeout(message) from None

    def _records(self) -> RecordState:
        return read_records(self._batches_log(), self.transactional_id)

    def _batches_partition_key(self) -> TopicPartitionKey:
        return (SINK_BATCHES_LOG, self._batches_log().partition)

    def _batches_log(self) -> PartitionLog:
        found = next((log for (name, _), log in self._logs.items() if name == SINK_BATCHES_LOG), None)
        if found is None:
            found = open_batches_log(self.root, self.transactional_id)
            self._logs[(SINK_BATCHES_LOG, found.partition)] = found
        return found

    def _log(self, tp: TopicPartitionKey) -> PartitionLog:
        if tp not in self._logs:
            self._logs[tp] = open_partition(self.root, *tp)
        return self._logs[tp]


class _Appends:
    """One transaction's appends: per partition its next sequence, the rows it took and where they landed."""

    def __init__(
        self,
        writer: TransactionalBatchWriter,
        producer_id: int,
        producer_epoch: int,
        targets: Iterable[TopicPartitionKey],
        records: dict[TopicPartitionKey, int],
        offsets: dict[TopicPartitionKey, tuple[int, int]],
    ) -> None:
        self.writer = writer
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.sequences = dict.fromkeys(targets, 0)
        self.records = records
        self.offsets = offsets

    def append(self, tp: TopicPartitionKey, payload: pa.Table) -> AppendResult:
        """Append one payload to a partition already in the transaction; returns where it landed."""
        sequence = self.sequences.get(tp, 0)
        header = BatchHeader(self.producer_id, self.producer_epoch, sequence, is_transactional=True)
        writer = self.writer
        # The Producer's one sequenced append, on the same `retries` and backoff (S3.2).
        backoff = writer.retry.start(APPEND_TIMEOUT_S)
        landed = append_sequenced(
            writer._log(tp), payload, header, backoff, writer.config["retries"], logger, writer._verification
        )
        self.sequences[tp] = next_sequence(sequence + payload.num_rows - 1)
        if tp[0] != RESULTS_LOG:
            self.records[tp] = self.records.get(tp, 0) + payload.num_rows
            first = self.offsets[tp][0] if tp in self.offsets else landed.base_offset
            self.offsets[tp] = (first, landed.last_offset)
        return landed


def _skipped(batch_id: int, committed: CommittedBatch, producer_id: int, producer_epoch: int) -> BatchWriteResult:
    return BatchWriteResult(
        batch_id, True, committed.batch_id, committed.records, producer_id, producer_epoch, committed.offsets, committed.note
    )


__all__ = [
    "BatchWriteResult",
    "CommittedBatch",
    "NO_PRODUCER_ID",
    "SINK_BATCHES_LOG",
    "SINK_BATCHES_PARTITIONS",
    "TransactionalBatchWriter",
]
