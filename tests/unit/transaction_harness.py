"""The in-memory store the pure transaction coordinator tests run the handlers on (tests/unit/test_transaction_coordinator*.py).

`Harness` appends each outcome's records to an in-memory `__transaction_state` log, checking every transition against the
state table, and allocates a producer id only when a handler's answer says it needs one, as the coordinator does.
"""

from __future__ import annotations

import dataclasses

from lakelog.coordinator import (
    InitProducerIdResult,
    Outcome,
    TransactionConfig,
    TransactionMarkers,
    TransactionMetadata,
    TxnState,
    add_partitions,
    complete_transaction,
    end_transaction,
    init_producer_id,
    markers_for,
    replay,
    sweep,
    verify_partitions,
)
from lakelog.coordinator.transaction import state_after
from lakelog.errors import (
    ConcurrentTransactions,
)

NOW = 1_700_000_000_000
MINUTE = 60_000
CONFIG = TransactionConfig(transaction_max_timeout_ms=15 * MINUTE, transactional_id_expiration_ms=7 * 24 * 60 * MINUTE)
TID = "txn-1"
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


class Harness:
    """An in-memory `__transaction_state`: the caller's side of the handlers."""

    def __init__(self, config: TransactionConfig = CONFIG, now: int = NOW) -> None:
        self.config = config
        self.now = now
        self.state: dict[str, TransactionMetadata] = {}
        self.log: list[TransactionMetadata] = []
        self.next_producer_id = 1000
        self.allocated: list[int] = []

    def allocate(self) -> int:
        self.next_producer_id += 1
        self.allocated.append(self.next_producer_id)
        return self.next_producer_id

    def seed(self, record: TransactionMetadata) -> None:
        """Start from a record as if loaded from an older log (not checked as a transition)."""
        self.log.append(record)
        replay(self.state, record)

    def apply(self, transactional_id: str, outcome: Outcome) -> Outcome:
        current = self.state.get(transactional_id)
        previous = current
        for record in outcome.records:
            assert record.transactional_id == transactional_id
            assert record.state.can_follow(previous.state if previous else None), (
                f"illegal transition {previous.state if previous else None} -> {record.state}"
            )
            previous = record
        self.log.extend(outcome.records)
        after = state_after(outcome, current)
        if after is None:
            self.state.pop(transactional_id, None)
        else:
            self.state[transactional_id] = after
        return outcome

    def with_new_producer_id(self, decide) -> tuple[Outcome, int | None]:
        """`decide(new_producer_id)` without an id first; with one allocated only if that answer needs it."""
        outcome = decide(None)
        if not outcome.needs_producer_id:
            return outcome, None
        assert (outcome.records, outcome.response, outcome.error) == ((), None, None), "it decided nothing"
        new_id = self.allocate()
        outcome = decide(new_id)
        assert not outcome.needs_producer_id
        return outcome, new_id

    def init(self, transactional_id: str = TID, timeout_ms: int = MINUTE) -> Outcome:
        current = self.state.get(transactional_id)
        outcome, _ = self.with_new_producer_id(
            lambda new_id: init_producer_id(current, transactional_id, timeout_ms, new_id, self.now, self.config)
        )
        return self.apply(transactional_id, outcome)

    def add(self, pid: int, epoch: int, partitions, transactional_id: str = TID) -> Outcome:
        current = self.state.get(transactional_id)
        return self.apply(transactional_id, add_partitions(current, transactional_id, pid, epoch, partitions, self.now))

    def end(self, pid: int, epoch: int, commit: bool, transactional_id: str = TID) -> Outcome:
        current = self.state.get(transactional_id)
        outcome, _ = self.with_new_producer_id(
            lambda new_id: end_transaction(current, transactional_id, pid, epoch, commit, self.now, new_id)
        )
        return self.apply(transactional_id, outcome)

    def verify(self, pid: int, epoch: int, partitions, transactional_id: str = TID) -> Outcome:
        outcome = verify_partitions(self.state.get(transactional_id), transactional_id, pid, epoch, partitions)
        assert outcome.records == ()
        return outcome

    def finish(self, transactional_id: str = TID) -> TransactionMarkers | None:
        """Roll a PREPARE_* forward: 'write' its markers, then complete."""
        markers = markers_for(self.state.get(transactional_id))
        if markers is not None:
            self.apply(transactional_id, complete_transaction(self.state.get(transactional_id), markers, self.now))
        return markers

    def sweep(self, transactional_id: str = TID) -> Outcome:
        return self.apply(transactional_id, sweep(self.state.get(transactional_id), self.now, self.config))

    def init_until_done(self, transactional_id: str = TID, timeout_ms: int = MINUTE) -> InitProducerIdResult:
        """The producer's retry loop: on ConcurrentTransactions, the earlier transaction is finished first."""
        for _ in range(3):
            outcome = self.init(transactional_id, timeout_ms)
            if outcome.ok:
                return outcome.response
            assert isinstance(outcome.error, ConcurrentTransactions)
            self.finish(transactional_id)
        raise AssertionError("init never completed")

    def replayed(self) -> dict[str, TransactionMetadata]:
        """The state rebuilt from the log's rows alone, as a restarted process would."""
        state: dict[str, TransactionMetadata] = {}
        for record in self.log:
            replay(state, TransactionMetadata.from_row(record.to_row()))
        return state

    @property
    def current(self) -> TransactionMetadata:
        return self.state[TID]


def ongoing(h: Harness, partitions=(A0, B0)) -> InitProducerIdResult:
    """Init TID and open a transaction over `partitions`; returns the holder's identity."""
    ident = h.init_until_done()
    assert h.add(ident.producer_id, ident.producer_epoch, partitions).ok
    return ident


def metadata(state: TxnState = TxnState.EMPTY, epoch: int = 0, pid: int = 7, **changes) -> TransactionMetadata:
    base = TransactionMetadata(
        transactional_id=TID,
        producer_id=pid,
        previous_producer_id=-1,
        producer_epoch=epoch,
        last_producer_epoch=-1,
        transaction_timeout_ms=MINUTE,
        state=state,
        partitions=frozenset(),
        txn_start_ms=-1,
        txn_last_update_ms=NOW,
    )
    return dataclasses.replace(base, **changes)
