"""The quality gate of a Producer without transactional.id (S11.1, S11.3, S8.3): each batch is judged before it is appended.

An idempotent (or plain) producer publishes a batch the moment it is appended: there is no commit
decision to wait for, so the unit it judges is the batch. Before each append the topic's suite is
read, as the transactional Producer reads it once per transaction: one small read, so a suite
attached since the last batch gates the next one; an ungated topic costs that read and imports no GX.
For a gated topic the batch is judged, then:

- an `enforce` failure: nothing is appended; every message of the batch gets POLICY_VIOLATION in its
  delivery report, and the failed result is recorded (it names no offsets: no row was written);
- a pass, or `warn`: the batch is appended, then its result is recorded with where it landed;
- a `dead-letter` failure: the batch goes to `<topic>.dlq` (header DLQ_HEADER = the validation id),
  then its result is recorded.

Without a transaction the batch and its result row are two commits, the result after the data: a
crash between them leaves a judged batch without its result row (a transactional producer commits
both together, S11.2). No row is ever visible that its suite did not pass, or that `warn` or
`dead-letter` did not let through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from lakelog.errors import KafkaError, KafkaException
from lakelog.quality.suites import Suite, read_suite
from lakelog.store import Location
from lakelog.typedef import TopicPartitionKey

if TYPE_CHECKING:
    from lakelog.quality.gate import Verdict

logger = logging.getLogger(__name__)

Tp = TopicPartitionKey
T = TypeVar("T")


@dataclass(frozen=True)
class BatchDecision:
    """What the gate decided for one batch: append `payload` to `tp` (at `expected_offset`), or, with `error`,
    append nothing and report that error to every message. `verdict` None: the topic is not gated."""

    tp: Tp
    payload: pa.Table
    expected_offset: int | None
    verdict: Verdict | None = None
    error: KafkaError | None = None


class IdempotentGate:
    """Judges each batch of a producer without transactional.id against its topic's suite, before it is appended.

    `partition_count(topic)`: the producer's partition count of a topic (where a dead-letter batch goes)."""

    def __init__(self, root: Location, partition_count: Callable[[str], int | None]) -> None:
        self._root = root
        self._partition_count = partition_count
        # A local root: a suite read costs microseconds, not a round trip (nothing to overlap it with).
        self.local = root.is_local

    def decide(
        self,
        tp: Tp,
        payload: pa.Table,
        expected_offset: int | None,
        retrying: Callable[[Callable[[], Suite | None]], Suite | None],
    ) -> BatchDecision:
        """Where the batch goes as its topic's suite decides (`retrying`: how the suite's read is retried)."""
        try:
            suite = self.suite(tp, retrying)
        except KafkaException as error:
            return BatchDecision(tp, payload, expected_offset, error=error.error)
        if suite is None:
            return BatchDecision(tp, payload, expected_offset)
        from lakelog.quality.staged import StagedRows

        staged = StagedRows(suite, tp[0])
        staged.add(payload, tp[1])
        try:
            verdict = staged.judge()
        except KafkaException as error:  # a suite that does not fit the rows: the batch is not written
            return BatchDecision(tp, payload, expected_offset, error=error.error)
        if not verdict.publish:
            return self._refused(tp, payload, verdict)
        if not verdict.dead_letter:
            return BatchDecision(tp, payload, expected_offset, verdict)
        from lakelog.quality.dead_letter import with_dlq_header

        count = self._partition_count(verdict.destination) or 1
        target = (verdict.destination, tp[1] % count)
        return BatchDecision(target, with_dlq_header(payload, verdict.validation_id), None, verdict)

    def suite(self, tp: Tp, retrying: Callable[[Callable[[], Suite | None]], Suite | None]) -> Suite | None:
        """The topic's suite, read for this batch: never decided on a suite read before it. A storage failure of the
        read is retried as the append is (retries, retry.backoff.ms, message.timeout.ms); in the end it is the
        batch's delivery error."""
        return retrying(lambda: read_suite(self._root, tp[0]))

    def record(self, decision: BatchDecision, producer_id: int | None, producer_epoch: int, base_offset: int = -1) -> None:
        """The verdict's result row, outside any transaction (the batch is decided already): where the batch
        landed (`base_offset`), or no offsets for a refused batch. A batch that failed to append published
        nothing: no result says it did. Nothing for an ungated topic."""
        verdict = decision.verdict
        if verdict is None or (decision.error is None and base_offset < 0):
            return
        from lakelog.quality.results import OffsetRange, record_result

        last = base_offset + decision.payload.num_rows - 1
        try:
            record_result(
                self._root,
                verdict.result,
                validation_id=verdict.validation_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                offset_ranges=[] if decision.error is not None else [OffsetRange(decision.tp[1], base_offset, last)],
            )
        except KafkaException as error:  # the batch is decided and reported; only its result row is missing
            logger.error(
                "%s: validation %s (success=%s) could not be recorded: %s: %s",
                verdict.topic,
                verdict.validation_id,
                verdict.result.success,
                error.error.name(),
                error,
            )

    def _refused(self, tp: Tp, payload: pa.Table, verdict: Verdict) -> BatchDecision:
        """An enforce failure: nothing is appended; every message gets POLICY_VIOLATION (S11.1, S8.3)."""
        # INFO: the refusal reaches the user in each message's delivery report (the CLI prints it as one line).
        logger.info(
            "%s-%d: a batch of %d refused by the quality gate (validation %s): %s",
            tp[0],
            tp[1],
            payload.num_rows,
            verdict.validation_id,
            verdict.result.describe(),
        )
        violation = verdict.violation().error
        error = KafkaError(violation.code(), f"{violation.str()} (validation {verdict.validation_id}); nothing was written")
        return BatchDecision(tp, payload, None, verdict, error)


__all__ = ["BatchDecision", "IdempotentGate"]
