"""The transactional Producer's quality gate (S11.1-S11.3): `commit_transaction()` validates first.

Per transaction, each topic's suite is read once, on the first batch sent to it
(an ungated topic: one small read, no GX import). Batches of enforce and warn
topics are appended as usual and the columns their suite reads kept in hand
with their partition and offsets (StagedRows); batches of dead-letter topics are held back, unappended,
until the decision. Before the commit decision every gated topic's rows are
judged at once (table expectations see the whole unit), never re-read:

- an enforce failure: the result is recorded outside the transaction (that
  data can never commit, so "failed" holds whatever happens next), the
  transaction is aborted, and its PolicyViolation is raised; the producer is
  READY again, as after abort_transaction();
- otherwise held batches go to their topic, or to `<topic>.dlq` with the
  validation id in a header when a dead-letter suite failed; each result is
  appended to `__quality_results` inside the transaction, so it commits or
  aborts with the data (S11.2); then the usual commit.

A crash before the decision leaves an open transaction that the next
init_transactions or the sweep aborts (S4.2, S4.7), result rows and dead
letters with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakelog.client.types import TIMESTAMP_CREATE_TIME, Message
from lakelog.errors import KafkaError, KafkaException, TransactionAbortable
from lakelog.typedef import TopicPartitionKey

if TYPE_CHECKING:
    from lakelog.client.producer import Producer, _Pending
    from lakelog.quality.gate import Verdict
    from lakelog.quality.staged import StagedRows
    from lakelog.quality.suites import Suite

logger = logging.getLogger(__name__)

# Fault point (tests stop a process there): verdicts made, results and held rows appended, nothing decided.
FAULT_AFTER_VALIDATION = "after_validation"

Tp = TopicPartitionKey


@dataclass
class _Held:
    """A dead-letter topic's batch, held back until the verdict says where it goes."""

    tp: Tp
    payload: pa.Table
    messages: list[_Pending]
    expected_offset: int | None


class ProducerGate:
    """The rows one transaction wrote to gated topics, and the decision on them at commit."""

    def __init__(self, root: Any, transactional: bool) -> None:
        self._root = root
        self._transactional = transactional  # an idempotent producer is never gated (its writes publish at once)
        self._suites: dict[str, Suite | None] = {}
        self._staged: dict[str, StagedRows] = {}  # per gated topic the transaction wrote to (kept and held rows)
        self._held: dict[str, list[_Held]] = {}
        self.fault: Callable[[str, Mapping[str, Any]], None] | None = None
        # True from an abort by the gate to the next end: abort_transaction() after its PolicyViolation is a no-op.
        self.aborted = False

    @property
    def active(self) -> bool:
        """Whether the transaction wrote rows the gate must judge."""
        return bool(self._staged)

    def suite(self, topic: str) -> Suite | None:
        """The topic's suite, read once per transaction (no GX import)."""
        if topic not in self._suites:
            from lakelog.quality.suites import read_suite

            self._suites[topic] = read_suite(self._root, topic)
        return self._suites[topic]

    def hold(self, tp: Tp, payload: pa.Table, messages: list[_Pending], expected_offset: int | None) -> bool:
        """Hold a batch of a dead-letter topic back until the decision; False for any other topic (send it)."""
        if not self._transactional:
            return False
        suite = self.suite(tp[0])
        if suite is None or suite.mode != "dead-letter":
            return False
        self._held.setdefault(tp[0], []).append(_Held(tp, payload, messages, expected_offset))
        self._stage(tp[0], suite).add(payload, tp[1])
        return True

    def keep(self, tp: Tp, payload: pa.Table, base_offset: int) -> None:
        """Keep a sent batch of a gated topic in hand, with its partition and offsets, for the decision
        (`base_offset` -1: the batch failed, which makes the transaction abort-only anyway)."""
        if not self._transactional or base_offset < 0:
            return
        suite = self.suite(tp[0])
        if suite is not None:
            self._stage(tp[0], suite).add(payload, tp[1], base_offset)

    def reset(self) -> None:
        """Forget the transaction (it ended): suites are read again by the next one."""
        self._suites.clear()
        self._staged.clear()
        self._held.clear()
        self.aborted = False

    def purge(self, producer: Producer) -> None:
        """The transaction aborts: report its queued and held messages as purged (_PURGE_QUEUE), forget its rows."""
        purged = KafkaError(KafkaError._PURGE_QUEUE, "purged: the transaction was aborted")
        queued = [(tp, producer._batches.pop(tp).messages) for tp in list(producer._batches)]
        held = [(item.tp, item.messages) for items in self._held.values() for item in items]
        for tp, messages in queued + held:
            for pending in messages:
                message = Message(
                    *tp, None, pending.key, pending.value, pending.headers, purged, (TIMESTAMP_CREATE_TIME, pending.timestamp_ms)
                )
                producer._reports.append((pending.on_delivery or producer._default_on_delivery, purged, message))
        self._held.clear()
        self._staged.clear()

    def commit(self, producer: Producer, timeout: float | None) -> None:
        """Judge every gated topic's rows, then abort (enforce failure) or commit with the results (S11.1-S11.3)."""
        from lakelog.client.producer import TransactionState

        try:
            verdicts = [staged.judge() for staged in self._staged.values()]
        except KafkaException as error:  # a suite that does not fit the rows: this transaction cannot commit
            producer._transaction_error = error
            producer._transaction_state = TransactionState.ABORTABLE_ERROR
            raise
        refused = [verdict for verdict in verdicts if not verdict.publish]
        if refused:
            self._refuse(producer, refused, timeout)
        ranges = {verdict.topic: self._publish_held(producer, verdict) for verdict in verdicts}
        self._append_results(producer, verdicts, ranges)
        # Judged and written: a commit_transaction() retried after a failed end only ends it (no second verdict).
        self._staged.clear()
        if producer._transaction_error is not None:
            producer._transaction_state = TransactionState.ABORTABLE_ERROR
            raise TransactionAbortable(
                f"transaction of {producer._transaction_id_text} cannot commit: "
                f"{producer._transaction_error.error.str()}; abort it and start again"
            )
        if self.fault is not None:
            self.fault(FAULT_AFTER_VALIDATION, {"validation_ids": [verdict.validation_id for verdict in verdicts]})
        producer._end_transaction(commit=True, timeout=timeout)
        producer._serve_reports()

    # -- internals -------------------------------------------------------------------

    def _stage(self, topic: str, suite: Suite) -> StagedRows:
        from lakelog.quality.staged import StagedRows

        if topic not in self._staged:
            self._staged[topic] = StagedRows(suite, topic)
        return self._staged[topic]

    def _refuse(self, producer: Producer, refused: list[Verdict], timeout: float | None) -> None:
        """An enforce failure: record it (outside the transaction), abort, raise its PolicyViolation (S11.1)."""
        from lakelog.quality.results import record_result

        identity = {
            "transactional_id": producer._transactional_id,
            "producer_id": producer._producer_id,
            "producer_epoch": producer._producer_epoch,
        }
        for verdict in refused:
            record_result(
                self._root,
                verdict.result,
                validation_id=verdict.validation_id,
                offset_ranges=self._staged[verdict.topic].offset_ranges(),
                **identity,
            )
        self.purge(producer)
        producer._end_transaction(commit=False, timeout=timeout)
        self.aborted = True
        producer._serve_reports()
        logger.warning(
            "%s: transaction aborted by the quality gate of %s (validation %s)",
            producer._transaction_id_text,
            refused[0].topic,
            refused[0].validation_id,
        )
        raise refused[0].violation()

    def _publish_held(self, producer: Producer, verdict: Verdict) -> list[Any]:
        """Append a topic's held batches where the verdict sends them; the offset ranges its rows hold."""
        from lakelog.log import topic_config
        from lakelog.quality.dead_letter import with_dlq_header
        from lakelog.quality.results import OffsetRange

        if verdict.topic not in self._held:
            return self._staged[verdict.topic].offset_ranges()
        destination = verdict.destination
        count = topic_config(self._root, destination).num_partitions
        ranges = []
        for held in self._held.pop(verdict.topic):
            payload = held.payload
            if verdict.dead_letter:
                payload = with_dlq_header(payload, verdict.validation_id)
                tp = (destination, held.tp[1] % count)
            else:
                tp = held.tp
            base = producer._deliver(tp, payload, held.messages, None if verdict.dead_letter else held.expected_offset)
            if base >= 0:
                ranges.append(OffsetRange(tp[1], base, base + payload.num_rows - 1))
        return ranges

    def _append_results(self, producer: Producer, verdicts: list[Verdict], ranges: dict[str, list[Any]]) -> None:
        """Every verdict's result row, one append to the results log inside the transaction (S11.2)."""
        from lakelog.quality.results import RESULTS_LOG, RESULTS_PARTITION, open_results_log, result_payload

        tp = (RESULTS_LOG, RESULTS_PARTITION)
        if tp not in producer._logs:  # created with its one partition before the transaction adds it
            producer._logs[tp] = open_results_log(self._root)
        payload = pa.concat_tables(
            [
                result_payload(
                    verdict.result,
                    validation_id=verdict.validation_id,
                    transactional_id=producer._transactional_id,
                    producer_id=producer._producer_id,
                    producer_epoch=producer._producer_epoch,
                    offset_ranges=ranges[verdict.topic],
                )
                for verdict in verdicts
            ]
        )
        producer._deliver(tp, payload, [], None)


__all__ = ["FAULT_AFTER_VALIDATION", "ProducerGate"]
