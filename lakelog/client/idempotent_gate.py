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
from typing import TYPE_CHECKING

import pyarrow as pa

from lakelog.client.types import TIMESTAMP_CREATE_TIME, Message
from lakelog.errors import KafkaError, KafkaException
from lakelog.quality.suites import read_suite
from lakelog.store import Location
from lakelog.typedef import TopicPartitionKey

if TYPE_CHECKING:
    from lakelog.client.producer import Producer, _Pending
    from lakelog.quality.gate import Verdict

logger = logging.getLogger(__name__)

Tp = TopicPartitionKey


class IdempotentGate:
    """Judges each batch of a producer without transactional.id against its topic's suite, before it is appended."""

    def __init__(self, root: Location) -> None:
        self._root = root

    def send(self, producer: Producer, tp: Tp, payload: pa.Table, messages: list[_Pending], expected_offset: int | None) -> None:
        """Append the batch (or refuse it, or dead-letter it) as its topic's suite decides; reports go to its messages."""
        try:
            # Every batch: never decided on a suite read before it. A storage failure of the read is retried as the
            # append is (retries, retry.backoff.ms, message.timeout.ms); in the end it is the batch's delivery error.
            backoff = producer._retry.start(producer.config["message.timeout.ms"] / 1000)
            suite = producer._retrying(tp, payload.num_rows, lambda: read_suite(self._root, tp[0]), backoff)
        except KafkaException as error:
            _refuse(producer, tp, messages, error.error)
            return
        if suite is None:
            producer._deliver(tp, payload, messages, expected_offset)
            return
        from lakelog.quality.staged import StagedRows

        staged = StagedRows(suite, tp[0])
        staged.add(payload, tp[1])
        try:
            verdict = staged.judge()
        except KafkaException as error:  # a suite that does not fit the rows: the batch is not written
            _refuse(producer, tp, messages, error.error)
            return
        if not verdict.publish:
            self._refuse(producer, tp, messages, verdict)
            return
        target, expected = tp, expected_offset
        if verdict.dead_letter:
            from lakelog.quality.dead_letter import with_dlq_header

            count = producer._partition_count(verdict.destination) or 1
            target, expected = (verdict.destination, tp[1] % count), None
            payload = with_dlq_header(payload, verdict.validation_id)
        base_offset = producer._deliver(target, payload, messages, expected)
        if base_offset >= 0:  # a batch that failed to append published nothing: no result says it did
            self._record(producer, verdict, target[1], base_offset, base_offset + payload.num_rows - 1)

    def _refuse(self, producer: Producer, tp: Tp, messages: list[_Pending], verdict: Verdict) -> None:
        """An enforce failure: record it, report POLICY_VIOLATION to every message; nothing is appended (S11.1, S8.3)."""
        self._record(producer, verdict)
        # INFO: the refusal reaches the user in each message's delivery report (the CLI prints it as one line).
        logger.info(
            "%s-%d: a batch of %d refused by the quality gate (validation %s): %s",
            tp[0],
            tp[1],
            len(messages),
            verdict.validation_id,
            verdict.result.describe(),
        )
        violation = verdict.violation().error
        error = KafkaError(violation.code(), f"{violation.str()} (validation {verdict.validation_id}); nothing was written")
        _refuse(producer, tp, messages, error)

    def _record(self, producer: Producer, verdict: Verdict, partition: int | None = None, first: int = 0, last: int = 0) -> None:
        """The verdict's result row, outside any transaction (the batch is decided already)."""
        from lakelog.quality.results import OffsetRange, record_result

        try:
            record_result(
                self._root,
                verdict.result,
                validation_id=verdict.validation_id,
                producer_id=producer._producer_id,
                producer_epoch=producer._producer_epoch,
                offset_ranges=[] if partition is None else [OffsetRange(partition, first, last)],
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


def _refuse(producer: Producer, tp: Tp, messages: list[_Pending], error: KafkaError) -> None:
    """Queue a failed delivery report carrying `error` for every message of a batch that was not appended."""
    for pending in messages:
        message = Message(
            *tp, None, pending.key, pending.value, pending.headers, error, (TIMESTAMP_CREATE_TIME, pending.timestamp_ms)
        )
        producer._reports.append((pending.on_delivery or producer._default_on_delivery, error, message))


__all__ = ["IdempotentGate"]
