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

The gate decides and hands back what to do (verdicts, the appends held batches need, the result
rows); it never touches the producer: `gated.GatedDelivery` carries its decisions out.

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

from lakelog.typedef import TopicPartitionKey

if TYPE_CHECKING:
    from lakelog.client.producer.accumulator import Pending
    from lakelog.log import PartitionLog
    from lakelog.quality.gate import Verdict
    from lakelog.quality.staged import StagedRows
    from lakelog.quality.suites import Suite

logger = logging.getLogger(__name__)

# Fault point (tests stop a process there): verdicts made, results and held rows appended, nothing decided.
FAULT_AFTER_VALIDATION = "after_validation"

Tp = TopicPartitionKey


@dataclass(frozen=True)
class Identity:
    """Who wrote a transaction's rows, as a result row names it."""

    transactional_id: str | None
    producer_id: int | None
    producer_epoch: int

    def fields(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id, "producer_id": self.producer_id, "producer_epoch": self.producer_epoch}


@dataclass
class _Held:
    """A dead-letter topic's batch, held back until the verdict says where it goes."""

    tp: Tp
    payload: pa.Table
    messages: list[Pending]
    expected_offset: int | None


@dataclass(frozen=True)
class HeldAppend:
    """An append the verdict on a held batch asks for: to its topic, or to the dead-letter topic with the validation id."""

    tp: Tp
    payload: pa.Table
    messages: list[Pending]
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

    def hold(self, tp: Tp, payload: pa.Table, messages: list[Pending], expected_offset: int | None) -> bool:
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

    def purge(self) -> list[tuple[Tp, list[Pending]]]:
        """The transaction aborts: forget its rows; the messages of its held batches, for their _PURGE_QUEUE reports."""
        held = [(item.tp, item.messages) for items in self._held.values() for item in items]
        self._held.clear()
        self._staged.clear()
        return held

    def judge(self) -> list[Verdict]:
        """Every gated topic's verdict on the rows the transaction wrote to it (table expectations see them all).

        A KafkaException if a suite does not fit the rows: this transaction cannot commit."""
        return [staged.judge() for staged in self._staged.values()]

    def record_refusals(self, refused: list[Verdict], identity: Identity) -> None:
        """An enforce failure: its result, recorded outside the transaction (that data can never commit) (S11.1)."""
        from lakelog.quality.results import record_result

        for verdict in refused:
            record_result(
                self._root,
                verdict.result,
                validation_id=verdict.validation_id,
                offset_ranges=self._staged[verdict.topic].offset_ranges(),
                **identity.fields(),
            )

    def held(self, verdict: Verdict) -> list[HeldAppend] | None:
        """Where the verdict sends a topic's held batches: the appends to make (None: the topic held none)."""
        from lakelog.log import topic_config
        from lakelog.quality.dead_letter import with_dlq_header

        if verdict.topic not in self._held:
            return None
        destination = verdict.destination
        count = topic_config(self._root, destination).num_partitions
        appends = []
        for held in self._held.pop(verdict.topic):
            if verdict.dead_letter:
                tp = (destination, held.tp[1] % count)
                appends.append(HeldAppend(tp, with_dlq_header(held.payload, verdict.validation_id), held.messages, None))
            else:
                appends.append(HeldAppend(held.tp, held.payload, held.messages, held.expected_offset))
        return appends

    def offset_ranges(self, verdict: Verdict, landed: list[tuple[HeldAppend, int]] | None) -> list[Any]:
        """The offset ranges a topic's rows hold: kept rows where they were appended, held ones where they `landed`
        (each append with its base offset; -1: it failed, and the transaction cannot commit anyway)."""
        from lakelog.quality.results import OffsetRange

        if landed is None:
            return self._staged[verdict.topic].offset_ranges()
        return [OffsetRange(append.tp[1], base, base + append.payload.num_rows - 1) for append, base in landed if base >= 0]

    def results(self, verdicts: list[Verdict], ranges: dict[str, list[Any]], identity: Identity) -> pa.Table:
        """Every verdict's result row: one payload, appended to the results log inside the transaction (S11.2)."""
        from lakelog.quality.results import result_payload

        return pa.concat_tables(
            [
                result_payload(
                    verdict.result,
                    validation_id=verdict.validation_id,
                    offset_ranges=ranges[verdict.topic],
                    **identity.fields(),
                )
                for verdict in verdicts
            ]
        )

    def results_log(self) -> tuple[Tp, PartitionLog]:
        """The results log (created with its one partition before the transaction adds it) and its partition key."""
        from lakelog.quality.results import RESULTS_LOG, RESULTS_PARTITION, open_results_log

        return (RESULTS_LOG, RESULTS_PARTITION), open_results_log(self._root)

    def decided(self) -> None:
        """Judged and written: a commit_transaction() retried after a failed end only ends it (no second verdict)."""
        self._staged.clear()

    def reached_decision(self, verdicts: list[Verdict]) -> None:
        """The fault point tests stop a process at: verdicts made, results and held rows appended, nothing decided."""
        if self.fault is not None:
            self.fault(FAULT_AFTER_VALIDATION, {"validation_ids": [verdict.validation_id for verdict in verdicts]})

    # -- internals -------------------------------------------------------------------

    def _stage(self, topic: str, suite: Suite) -> StagedRows:
        from lakelog.quality.staged import StagedRows

        if topic not in self._staged:
            self._staged[topic] = StagedRows(suite, topic)
        return self._staged[topic]


__all__ = ["FAULT_AFTER_VALIDATION", "HeldAppend", "Identity", "ProducerGate"]
