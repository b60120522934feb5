"""Per-partition producer state and the idempotence check (S3), as pure functions.

A partition remembers, for each producer id, the epoch and the last sequence it
appended, and when. That entry is written with every append as two Delta `txn`
actions, so any process recovers it from the table's snapshot alone, after
checkpoints too, without reading data (S3.5).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequence, ProducerFenced, UnknownProducerId
from lakelog.log.records import NO_SEQUENCE, BatchHeader, last_sequence, next_sequence

_EPOCH_SHIFT = 2**32


def state_app_id(producer_id: int) -> str:
    return f"lakelog.producer.{producer_id}.state"


def time_app_id(producer_id: int) -> str:
    return f"lakelog.producer.{producer_id}.time"


@dataclass(frozen=True)
class ProducerEntry:
    """What a partition knows of one producer id."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int

    def app_versions(self) -> dict[str, int]:
        """The two `txn` actions that record this entry in a commit."""
        return {
            state_app_id(self.producer_id): self.producer_epoch * _EPOCH_SHIFT + (self.last_sequence + 1),
            time_app_id(self.producer_id): self.last_timestamp_ms,
        }

    @classmethod
    def from_app_versions(cls, producer_id: int, state: int | None, time_ms: int | None) -> ProducerEntry | None:
        if state is None:
            return None
        return cls(
            producer_id=producer_id,
            producer_epoch=state // _EPOCH_SHIFT,
            last_sequence=state % _EPOCH_SHIFT - 1,
            last_timestamp_ms=time_ms or 0,
        )

    def is_expired(self, now_ms: int, expiration_ms: int) -> bool:
        return now_ms - self.last_timestamp_ms > expiration_ms


class Verdict(enum.Enum):
    APPEND = "append"
    # Not the next sequence: either a retry of a batch already in the log, or a gap.
    MAYBE_DUPLICATE = "maybe_duplicate"


def check_batch(
    entry: ProducerEntry | None,
    header: BatchHeader,
    record_count: int,
    now_ms: int,
    expiration_ms: int,
) -> Verdict:
    """Decide an idempotent batch against the partition's entry for its producer id.

    Raises InvalidProducerEpoch / ProducerFenced (stale epoch, S3.4),
    OutOfOrderSequence (gap, or a new epoch not starting at 0, S3.3/S3.4) or
    UnknownProducerId (no live entry and the batch does not start at 0).
    """
    pid, epoch, base = header.producer_id, header.producer_epoch, header.base_sequence
    if entry is not None and entry.is_expired(now_ms, expiration_ms):
        entry = None
    if entry is None:
        if base != 0:
            raise UnknownProducerId(
                f"partition has no state for producer id {pid} and its batch starts at sequence {base}, not 0",
                producer_id=pid,
            )
        return Verdict.APPEND
    if epoch < entry.producer_epoch:
        error = ProducerFenced if header.is_transactional else InvalidProducerEpoch
        raise error(
            f"producer id {pid} epoch {epoch} is older than the partition's epoch {entry.producer_epoch}",
            producer_id=pid,
            producer_epoch=entry.producer_epoch,
        )
    if epoch > entry.producer_epoch or entry.last_sequence == NO_SEQUENCE:
        if base != 0:
            raise OutOfOrderSequence(
                f"producer id {pid} epoch {epoch} must start at sequence 0, not {base}",
                producer_id=pid,
                expected_sequence=0,
            )
        return Verdict.APPEND
    if base == next_sequence(entry.last_sequence):
        return Verdict.APPEND
    return Verdict.MAYBE_DUPLICATE


def after_append(header: BatchHeader, record_count: int, now_ms: int) -> ProducerEntry:
    """The entry a partition holds once the batch is appended."""
    return ProducerEntry(
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        last_sequence=last_sequence(header.base_sequence, record_count),
        last_timestamp_ms=now_ms,
    )


def out_of_order(entry: ProducerEntry, header: BatchHeader) -> OutOfOrderSequence:
    expected = next_sequence(entry.last_sequence)
    return OutOfOrderSequence(
        f"producer id {header.producer_id} sent sequence {header.base_sequence}; the partition expects {expected}",
        producer_id=header.producer_id,
        expected_sequence=expected,
    )
