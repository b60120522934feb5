"""The transaction state machine: Kafka's states and their legal transitions (S4.3), and the coordinator's settings."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.log.records import MAX_EPOCH, ControlType

NO_TIMESTAMP = -1


class TxnState(enum.Enum):
    """A coordinator state (S4.3); the value is Kafka's name, as DescribeTransactions shows it."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"

    @property
    def legal_previous(self) -> frozenset[TxnState]:
        """The states this one may follow; `can_follow(None)` says whether it may start an id."""
        return _LEGAL_PREVIOUS[self]

    def can_follow(self, previous: TxnState | None) -> bool:
        if previous is None:
            return self is TxnState.EMPTY
        return previous in self.legal_previous

    @property
    def is_prepared(self) -> bool:
        """A decided end whose markers may not all be written yet (S4.5)."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_idle(self) -> bool:
        """No transaction is open (EMPTY, COMPLETE_*): the id may start one, or expire."""
        return self in IDLE


IDLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

# Kafka's table (TransactionState.java) less TV2's aborts of an empty transaction,
# which lakelog answers without a record. PREPARE_EPOCH_FENCE keeps Kafka's entries
# but is never written here: fencing goes straight to PREPARE_ABORT.
_LEGAL_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: IDLE,
    TxnState.ONGOING: IDLE | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
    TxnState.DEAD: IDLE,
}

CONTROL_OF = {
    TxnState.PREPARE_COMMIT: ControlType.COMMIT,
    TxnState.PREPARE_ABORT: ControlType.ABORT,
    TxnState.COMPLETE_COMMIT: ControlType.COMMIT,
    TxnState.COMPLETE_ABORT: ControlType.ABORT,
}


@dataclass(frozen=True)
class TransactionConfig:
    """The broker keys the coordinator decides with (S4.7, S8.2)."""

    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int

    @classmethod
    def from_broker_config(cls, config: Mapping[str, Any]) -> TransactionConfig:
        """From a loaded `broker` config: `TransactionConfig.from_broker_config(lakelog.config.load("broker"))`."""
        return cls(
            transaction_max_timeout_ms=config["transaction.max.timeout.ms"],
            transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
        )


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No further client epoch is left: MAX_EPOCH stays free so a holder can always be fenced."""
    return producer_epoch >= MAX_EPOCH - 1
