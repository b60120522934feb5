"""What the transaction handlers answer: the results of each request, the sweep's verdicts, the markers to write."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from lakelog.coordinator.transaction.metadata import TransactionMetadata
from lakelog.coordinator.transaction.state import CONTROL_OF
from lakelog.log.records import ControlType
from lakelog.typedef import TopicPartitionKey


@dataclass(frozen=True)
class InitProducerIdResult:
    """The identity the producer uses from now on (S4.1)."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class AddPartitionsResult:
    """Every partition now in the ongoing transaction (S4.4)."""

    partitions: frozenset[TopicPartitionKey]


@dataclass(frozen=True)
class EndTransactionResult:
    """The decided result, and the identity the producer uses for its next transaction (S4.6)."""

    result: ControlType
    producer_id: int
    producer_epoch: int


class SweepAction(enum.Enum):
    """What `sweep` found for one id."""

    NONE = "none"
    ABORT_TIMED_OUT = "abort_timed_out"
    EXPIRE = "expire"
    # A decided end whose markers the caller must write, then complete_transaction.
    ROLL_FORWARD = "roll_forward"


@dataclass(frozen=True)
class TransactionMarkers:
    """The control rows to append, one per partition, to finish a PREPARE_* transaction (S4.5)."""

    transactional_id: str
    control: ControlType
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartitionKey, ...]


def markers_for(metadata: TransactionMetadata | None) -> TransactionMarkers | None:
    """The markers a PREPARE_* state still needs written (S4.5); None for any other state."""
    if metadata is None or not metadata.state.is_prepared:
        return None
    return TransactionMarkers(
        transactional_id=metadata.transactional_id,
        control=CONTROL_OF[metadata.state],
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        partitions=tuple(sorted(metadata.partitions)),
    )


@dataclass
class SweepReport:
    """What one sweep did, counted per action."""

    partitions_scanned: int = 0
    ids_seen: int = 0
    aborted_timed_out: list[str] = field(default_factory=list)
    rolled_forward: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)

    @property
    def changed_anything(self) -> bool:
        return bool(self.aborted_timed_out or self.rolled_forward or self.expired)
