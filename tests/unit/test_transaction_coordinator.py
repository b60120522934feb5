"""Pure tests of the transaction coordinator (S4.1-S4.7): lakelog/coordinator/transaction/, no tables.

`Harness` plays the store: it appends each outcome's records to an in-memory
`__transaction_state` log, checking every transition against the state table, and
allocates a producer id only when a handler's answer says it needs one, as the coordinator does.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, rule

from lakelog.config import load
from lakelog.coordinator import (
    AddPartitionsResult,
    EndTransactionResult,
    InitProducerIdResult,
    Outcome,
    SweepAction,
    TransactionConfig,
    TransactionMarkers,
    TransactionMetadata,
    TxnState,
    add_partitions,
    complete_transaction,
    end_transaction,
    init_producer_id,
    markers_for,
    partition_for_transactional_id,
    replay,
    sweep,
    verify_partitions,
)
from lakelog.coordinator.transaction import ROW_TYPES, java_string_hash, snapshot_of, state_after, state_from_snapshot
from lakelog.errors import (
    ConcurrentTransactions,
    CorruptRecord,
    InvalidProducerIdMapping,
    InvalidRequest,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
)
from lakelog.log.records import MAX_EPOCH, ControlType

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


# -- S4.1 init: a stable producer id, a bumped epoch, earlier instances fenced --


def test_S4_1_init_maps_the_id_to_a_stable_producer_id_and_bumps_the_epoch():
    h = Harness()
    identities = [h.init_until_done() for _ in range(3)]
    assert {i.producer_id for i in identities} == {1001}
    assert [i.producer_epoch for i in identities] == [0, 1, 2]
    assert h.allocated == [1001], "a producer id is allocated only on first init"
    assert h.current.state is TxnState.EMPTY
    # A restarted process recovers the mapping from the rows alone.
    h.state = h.replayed()
    assert h.init_until_done() == InitProducerIdResult(1001, 3)


def test_S4_1_a_later_init_fences_every_call_of_the_earlier_instance():
    h = Harness()
    zombie = h.init_until_done()
    fresh = h.init_until_done()
    assert fresh.producer_epoch == zombie.producer_epoch + 1
    log_before = list(h.log)
    for outcome in (
        h.add(zombie.producer_id, zombie.producer_epoch, [A0]),
        h.end(zombie.producer_id, zombie.producer_epoch, commit=True),
        h.end(zombie.producer_id, zombie.producer_epoch, commit=False),
        h.verify(zombie.producer_id, zombie.producer_epoch, [A0]),
    ):
        assert isinstance(outcome.error, ProducerFenced)
        assert outcome.error.fatal and outcome.error.producer_epoch == fresh.producer_epoch
    assert h.log == log_before, "a refused request writes nothing (S8.3)"
    assert h.add(fresh.producer_id, fresh.producer_epoch, [A0]).ok


def test_S4_1_unknown_id_or_producer_id_is_invalid_producer_id_mapping():
    h = Harness()
    assert isinstance(h.add(1, 0, [A0]).error, InvalidProducerIdMapping)
    assert isinstance(h.end(1, 0, commit=True).error, InvalidProducerIdMapping)
    ident = h.init_until_done()
    outcome = h.add(ident.producer_id + 99, ident.producer_epoch, [A0])
    assert isinstance(outcome.error, InvalidProducerIdMapping) and outcome.records == ()


def test_S4_1_exhausted_epoch_moves_the_id_to_a_new_producer_id():
    h = Harness()
    h.seed(metadata(epoch=MAX_EPOCH - 2))
    last_of_old = h.init_until_done()
    assert last_of_old == InitProducerIdResult(7, MAX_EPOCH - 1), "clients never get MAX_EPOCH"
    assert init_producer_id(h.current, TID, MINUTE, None, NOW, CONFIG).needs_producer_id
    rotated = h.init_until_done()
    assert rotated.producer_id not in (7, -1) and rotated.producer_epoch == 0
    assert h.current.previous_producer_id == 7
    assert isinstance(h.add(7, MAX_EPOCH - 1, [A0]).error, ProducerFenced)


@pytest.mark.parametrize(
    "current, needs",
    [
        (None, True),
        (metadata(TxnState.COMPLETE_COMMIT, epoch=MAX_EPOCH - 1), True),
        (metadata(), False),
        (metadata(TxnState.ONGOING, epoch=MAX_EPOCH - 1), False),
        (metadata(TxnState.PREPARE_ABORT, epoch=MAX_EPOCH), False),
    ],
    ids=["unknown", "exhausted", "idle", "ongoing", "prepared"],
)
def test_S8_3_init_asks_for_a_producer_id_only_when_it_uses_one(current, needs):
    """S4.1, S8.3: the answer says "needs a new producer id" (deciding nothing) instead of taking one up front."""
    outcome = init_producer_id(current, TID, MINUTE, None, NOW, CONFIG)
    assert outcome.needs_producer_id is needs
    if needs:
        assert (outcome.records, outcome.response, outcome.error) == ((), None, None)
        assert init_producer_id(current, TID, MINUTE, 42, NOW, CONFIG).response.producer_id == 42
        with pytest.raises(ValueError, match="newly allocated producer id"):
            init_producer_id(current, TID, MINUTE, -5, NOW, CONFIG)


def test_S8_3_a_refused_init_never_asks_for_a_producer_id():
    for outcome in (
        init_producer_id(None, "", MINUTE, None, NOW, CONFIG),
        init_producer_id(None, TID, 0, None, NOW, CONFIG),
        init_producer_id(None, TID, CONFIG.transaction_max_timeout_ms + 1, None, NOW, CONFIG),
    ):
        assert outcome.error is not None and not outcome.needs_producer_id and outcome.records == ()


def test_S4_1_init_refuses_an_empty_transactional_id():
    outcome = init_producer_id(None, "", MINUTE, 5, NOW, CONFIG)
    assert isinstance(outcome.error, InvalidRequest) and outcome.records == ()


# -- S4.2 init finishes an unfinished earlier transaction first --


def test_S4_2_init_over_an_ongoing_transaction_aborts_it_with_a_bump_and_asks_to_retry():
    h = Harness()
    zombie = ongoing(h)
    outcome = h.init()
    assert isinstance(outcome.error, ConcurrentTransactions) and outcome.error.retriable
    (fence,) = outcome.records
    assert fence.state is TxnState.PREPARE_ABORT
    assert fence.producer_epoch == zombie.producer_epoch + 1 and fence.last_producer_epoch == -1
    markers = h.finish()
    expected = TransactionMarkers(TID, ControlType.ABORT, zombie.producer_id, zombie.producer_epoch + 1, (A0, B0))
    assert markers == expected
    assert h.current.state is TxnState.COMPLETE_ABORT
    fresh = h.init_until_done()
    assert fresh == InitProducerIdResult(zombie.producer_id, zombie.producer_epoch + 2)
    assert isinstance(h.add(zombie.producer_id, zombie.producer_epoch, [A1]).error, ProducerFenced)
    assert isinstance(h.end(zombie.producer_id, zombie.producer_epoch, commit=True).error, ProducerFenced)


@pytest.mark.parametrize("commit", [True, False])
def test_S4_2_init_over_a_decided_end_waits_and_the_decision_rolls_forward(commit):
    h = Harness()
    ident = ongoing(h)
    assert h.end(ident.producer_id, ident.producer_epoch, commit=commit).ok
    outcome = h.init()
    assert isinstance(outcome.error, ConcurrentTransactions) and outcome.records == ()
    markers = h.finish()
    assert markers.control is (ControlType.COMMIT if commit else ControlType.ABORT)
    assert h.current.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert h.init().ok


def test_S4_2_the_fenced_holder_cannot_commit_while_the_abort_is_pending():
    h = Harness()
    zombie = ongoing(h)
    h.init()
    outcome = h.end(zombie.producer_id, zombie.producer_epoch, commit=True)
    assert isinstance(outcome.error, ProducerFenced) and outcome.records == ()
    assert h.current.state is TxnState.PREPARE_ABORT


# -- S4.3 the state table; illegal transitions are InvalidTxnState --


def test_S4_3_legal_previous_states_are_kafkas_table():
    S = TxnState
    idle = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert {state: set(state.legal_previous) for state in S} == {
        S.EMPTY: idle,
        S.ONGOING: idle | {S.ONGOING},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
        S.DEAD: idle,
    }
    assert [state for state in S if state.can_follow(None)] == [S.EMPTY]
    assert [state.value for state in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "PrepareEpochFence",
        "Dead",
    ]


def test_S4_3_illegal_requests_are_invalid_txn_state_and_write_nothing():
    h = Harness()
    ident = h.init_until_done()
    pid, epoch = ident.producer_id, ident.producer_epoch
    log_before = list(h.log)
    assert isinstance(h.end(pid, epoch, commit=True).error, InvalidTxnState), "commit with no transaction open"
    assert h.log == log_before
    assert h.add(pid, epoch, [A0]).ok
    aborted = h.end(pid, epoch, commit=False).response
    # The aborted end retried as a commit, during PREPARE_ABORT and after COMPLETE_ABORT; then a
    # commit with the new epoch while nothing is open.
    refused = [h.end(pid, epoch, commit=True)]
    h.finish()
    log_before = list(h.log)
    refused += [h.end(pid, epoch, commit=True), h.end(aborted.producer_id, aborted.producer_epoch, commit=True)]
    assert all(isinstance(outcome.error, InvalidTxnState) and outcome.records == () for outcome in refused)
    assert h.log == log_before


def test_S4_3_a_state_no_handler_writes_is_refused():
    fenced = metadata(TxnState.PREPARE_EPOCH_FENCE, epoch=3)
    assert isinstance(init_producer_id(fenced, TID, MINUTE, None, NOW, CONFIG).error, InvalidTxnState)
    assert isinstance(end_transaction(fenced, TID, 7, 3, False, NOW).error, InvalidTxnState)


def test_S4_3_records_round_trip_through_plain_rows():
    record = metadata(
        TxnState.PREPARE_COMMIT,
        epoch=MAX_EPOCH,
        previous_producer_id=3,
        next_producer_id=11,
        last_producer_epoch=MAX_EPOCH - 1,
        partitions={("b", 10), ("b", 2), ("__consumer_offsets", 4)},
        txn_start_ms=NOW - 5,
    )
    row = record.to_row()
    assert set(row) == set(ROW_TYPES)
    assert row["partitions"] == ["__consumer_offsets:4", "b:2", "b:10"]
    assert row["state"] == "PrepareCommit"
    assert all(type(value) in (str, int, list) for value in row.values())
    assert TransactionMetadata.from_row(row) == record
    as_dicts = dict(row, partitions=[{"topic": t, "partition": p} for t, p in sorted(record.partitions)])
    assert TransactionMetadata.from_row(as_dicts) == record


@pytest.mark.parametrize(
    "change",
    [
        {"state": "Finished"},
        {"partitions": ["nocolon"]},
        {"partitions": ["a:-1"]},
        {"producer_id": "7"},
        {"producer_epoch": True},
        {"transactional_id": ""},
        {"txn_start_ms": 1.5},
    ],
)
def test_S4_3_a_corrupt_row_is_corrupt_record(change):
    row = dict(metadata().to_row(), **change)
    with pytest.raises(CorruptRecord):
        TransactionMetadata.from_row(row)
    row = metadata().to_row()
    del row["state"]
    with pytest.raises(CorruptRecord):
        TransactionMetadata.from_row(row)


def test_S4_3_replay_keeps_the_last_record_per_id_and_dead_removes_it():
    first, second = metadata(epoch=0), metadata(epoch=1)
    other = metadata(epoch=5, transactional_id="other")
    state: dict[str, TransactionMetadata] = {}
    for record in (first, other, second):
        assert replay(state, record) is state
    assert state == {TID: second, "other": other}
    replay(state, dataclasses.replace(second, state=TxnState.DEAD))
    assert state == {"other": other}


# -- S4.4 partitions are added before data is written to them --


def test_S4_4_a_write_is_verified_against_the_ongoing_transaction():
    h = Harness()
    ident = h.init_until_done()
    pid, epoch = ident.producer_id, ident.producer_epoch
    outcome = h.verify(pid, epoch, [A0])
    assert isinstance(outcome.error, InvalidTxnState) and outcome.error.partitions == [A0]
    assert h.add(pid, epoch, [A0]).ok
    assert h.verify(pid, epoch, [A0]).ok
    outcome = h.verify(pid, epoch, [A0, B0])
    assert isinstance(outcome.error, InvalidTxnState) and outcome.error.partitions == [B0]
    ended = h.end(pid, epoch, commit=True).response
    assert isinstance(h.verify(pid, epoch, [A0]).error, ProducerFenced), "the transaction's epoch is over"
    assert isinstance(h.verify(ended.producer_id, ended.producer_epoch, [A0]).error, ConcurrentTransactions)
    h.finish()
    outcome = h.verify(ended.producer_id, ended.producer_epoch, [A0])
    assert isinstance(outcome.error, InvalidTxnState), "a finished transaction covers no partition"


def test_S4_4_add_partitions_starts_widens_and_is_idempotent():
    h = Harness()
    ident = h.init_until_done()
    pid, epoch = ident.producer_id, ident.producer_epoch
    started = h.add(pid, epoch, [A0])
    assert started.response == AddPartitionsResult(frozenset({A0}))
    (record,) = started.records
    assert record.state is TxnState.ONGOING and record.txn_start_ms == NOW
    h.now += 10
    again = h.add(pid, epoch, [A0])
    assert again.ok and again.records == ()
    widened = h.add(pid, epoch, [A1, B0])
    assert widened.records[0].partitions == {A0, A1, B0}
    assert widened.records[0].txn_start_ms == NOW, "widening does not restart the timeout clock"


@pytest.mark.parametrize("partitions", [[], [("a", -1)], [("", 0)], [("a", "0")], [("a", True)], ["a:0"]])
def test_S4_4_add_partitions_refuses_malformed_partitions(partitions):
    h = Harness()
    ident = h.init_until_done()
    outcome = h.add(ident.producer_id, ident.producer_epoch, partitions)
    assert isinstance(outcome.error, InvalidRequest) and outcome.records == ()


# -- S4.5 one decision record, then markers, then Complete*; crashes are finished --


def test_S4_5_commit_is_one_decision_record_then_markers_then_complete():
    h = Harness()
    ident = ongoing(h, partitions=(A0, B0, ("__consumer_offsets", 3)))
    start = len(h.log)
    outcome = h.end(ident.producer_id, ident.producer_epoch, commit=True)
    (decision,) = outcome.records
    assert decision.state is TxnState.PREPARE_COMMIT
    assert outcome.response == EndTransactionResult(ControlType.COMMIT, ident.producer_id, ident.producer_epoch + 1)
    markers = markers_for(decision)
    assert markers.control is ControlType.COMMIT
    assert markers.partitions == (("__consumer_offsets", 3), A0, B0)
    h.finish()
    assert [r.state for r in h.log[start:]] == [TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    assert h.current.partitions == frozenset() and markers_for(h.current) is None


def test_S4_5_a_crash_after_the_decision_is_finished_by_whoever_comes_next():
    h = Harness()
    ident = ongoing(h)
    h.end(ident.producer_id, ident.producer_epoch, commit=True)
    # The process dies here: no markers written. A new process rebuilds from rows.
    h.state = h.replayed()
    swept = h.sweep()
    assert swept.response is SweepAction.ROLL_FORWARD and swept.records == ()
    markers = h.finish()
    assert markers.control is ControlType.COMMIT
    assert h.current.state is TxnState.COMPLETE_COMMIT
    # Whoever finished second finds nothing left to do.
    again = complete_transaction(h.current, markers, h.now)
    assert again.ok and again.records == () and again.response == h.current


def test_S4_5_a_retried_end_is_answered_again_without_records():
    h = Harness()
    ident = ongoing(h)
    first = h.end(ident.producer_id, ident.producer_epoch, commit=True)
    for phase in ("prepared", "completed"):
        retry = h.end(ident.producer_id, ident.producer_epoch, commit=True)
        assert retry.ok and retry.records == (), phase
        assert retry.response == first.response
        wrong = h.end(ident.producer_id, ident.producer_epoch, commit=False)
        assert isinstance(wrong.error, InvalidTxnState) and wrong.records == (), phase
        h.finish()


def test_S4_5_stale_markers_never_complete_a_later_transaction():
    h = Harness()
    ident = ongoing(h)
    first = h.end(ident.producer_id, ident.producer_epoch, commit=False).response
    stale = h.finish()
    assert h.add(first.producer_id, first.producer_epoch, [A1]).ok
    assert h.end(first.producer_id, first.producer_epoch, commit=True).ok
    outcome = complete_transaction(h.current, stale, h.now)
    assert outcome.ok and outcome.records == ()
    assert h.current.state is TxnState.PREPARE_COMMIT


def test_S4_5_abort_with_no_transaction_open_succeeds_without_a_record():
    h = Harness()
    ident = h.init_until_done()
    outcome = h.end(ident.producer_id, ident.producer_epoch, commit=False)
    assert outcome.ok and outcome.records == ()
    assert outcome.response == EndTransactionResult(ControlType.ABORT, ident.producer_id, ident.producer_epoch)


# -- S4.6 markers carry the epoch; every end bumps it --


def test_S4_6_every_end_bumps_the_epoch_and_its_markers_carry_the_bumped_epoch():
    h = Harness()
    ident = h.init_until_done()
    pid, epoch = ident.producer_id, ident.producer_epoch
    for commit in (True, False, True, True, False):
        assert h.add(pid, epoch, [A0]).ok
        answer = h.end(pid, epoch, commit=commit).response
        markers = h.finish()
        assert (answer.producer_id, answer.producer_epoch) == (pid, epoch + 1)
        assert (markers.producer_id, markers.producer_epoch) == (pid, epoch + 1)
        late = h.add(pid, epoch, [A0])
        assert isinstance(late.error, ProducerFenced), "a late write of a finished transaction cannot join the next"
        epoch = answer.producer_epoch


def test_S4_6_the_next_epoch_waits_until_the_last_transaction_completes():
    h = Harness()
    ident = ongoing(h)
    answer = h.end(ident.producer_id, ident.producer_epoch, commit=True).response
    outcome = h.add(answer.producer_id, answer.producer_epoch, [A0])
    assert isinstance(outcome.error, ConcurrentTransactions) and outcome.records == ()
    outcome = h.end(answer.producer_id, answer.producer_epoch, commit=False)
    assert isinstance(outcome.error, ConcurrentTransactions)
    h.finish()
    assert h.add(answer.producer_id, answer.producer_epoch, [A0]).ok


def test_S4_5_the_holder_that_wrote_the_markers_completes_and_begins_in_one_outcome():
    """S4.5: add_partitions by the next identity, with the markers of the decided end it wrote, records Complete*
    then the new Ongoing in one outcome (the producer waits for no completion); without them, or with stale
    ones, it is ConcurrentTransactions with no record; a fenced identity gets no record even with them (S8.3)."""
    h = Harness()
    ident = ongoing(h)
    answer = h.end(ident.producer_id, ident.producer_epoch, commit=True).response
    markers = markers_for(h.current)
    stale = dataclasses.replace(markers, producer_epoch=markers.producer_epoch - 1)
    for written in (None, stale):
        outcome = add_partitions(h.current, TID, answer.producer_id, answer.producer_epoch, [A1], h.now, written)
        assert isinstance(outcome.error, ConcurrentTransactions) and outcome.records == ()
    fenced = add_partitions(h.current, TID, ident.producer_id, ident.producer_epoch, [A1], h.now, markers)
    assert isinstance(fenced.error, ProducerFenced) and fenced.records == ()
    h.now += 5
    outcome = h.apply(TID, add_partitions(h.current, TID, answer.producer_id, answer.producer_epoch, [A1], h.now, markers))
    complete, started = outcome.records
    assert (complete.state, complete.partitions, complete.producer_epoch) == (
        TxnState.COMPLETE_COMMIT,
        frozenset(),
        answer.producer_epoch,
    )
    assert (started.state, started.partitions, started.txn_start_ms) == (TxnState.ONGOING, {A1}, h.now)
    assert outcome.response == AddPartitionsResult(frozenset({A1}))
    # Those markers are spent: the next decided end needs its own.
    again = add_partitions(h.current, TID, answer.producer_id, answer.producer_epoch, [B0], h.now, markers)
    assert again.response == AddPartitionsResult(frozenset({A1, B0}))
    assert [record.state for record in again.records] == [TxnState.ONGOING]


def test_S4_5_S4_6_completing_and_beginning_moves_to_the_rotated_producer_id():
    """S4.6: an end at the last epoch names a new producer id; completing it with the next add_partitions moves
    the id to it at epoch 0, and the new transaction is that producer id's."""
    h = Harness()
    h.seed(metadata(epoch=MAX_EPOCH - 2))
    h.init_until_done()
    assert h.add(7, MAX_EPOCH - 1, [A0]).ok
    answer = h.end(7, MAX_EPOCH - 1, commit=False).response
    new_id = h.allocated[-1]
    assert (answer.producer_id, answer.producer_epoch) == (new_id, 0)
    outcome = h.apply(TID, add_partitions(h.current, TID, new_id, 0, [B0], h.now, markers_for(h.current)))
    complete, started = outcome.records
    assert (complete.state, complete.producer_id, complete.previous_producer_id) == (TxnState.COMPLETE_ABORT, new_id, 7)
    assert (started.state, started.producer_id, started.producer_epoch) == (TxnState.ONGOING, new_id, 0)


def test_S4_6_an_end_at_the_last_epoch_moves_to_a_new_producer_id_on_completion():
    h = Harness()
    h.seed(metadata(epoch=MAX_EPOCH - 2))
    ident = h.init_until_done()
    assert ident.producer_epoch == MAX_EPOCH - 1
    assert h.add(7, MAX_EPOCH - 1, [A0]).ok
    assert end_transaction(h.current, TID, 7, MAX_EPOCH - 1, True, h.now).needs_producer_id
    # S8.3: a refused end is refused before any producer id is asked for.
    for zombie in ((7, MAX_EPOCH - 2), (8, MAX_EPOCH - 1)):
        refused = end_transaction(h.current, TID, *zombie, True, h.now)
        assert isinstance(refused.error, (ProducerFenced, InvalidProducerIdMapping)) and not refused.needs_producer_id
    outcome = h.end(7, MAX_EPOCH - 1, commit=True)
    new_id = h.allocated[-1]
    assert outcome.response == EndTransactionResult(ControlType.COMMIT, new_id, 0)
    markers = markers_for(h.current)
    assert (markers.producer_id, markers.producer_epoch) == (7, MAX_EPOCH), "markers close the old producer id"
    assert isinstance(h.add(new_id, 0, [A0]).error, ConcurrentTransactions)
    h.finish()
    assert (h.current.producer_id, h.current.producer_epoch, h.current.previous_producer_id) == (new_id, 0, 7)
    retry = h.end(7, MAX_EPOCH - 1, commit=True)
    assert retry.ok and retry.records == () and retry.response == outcome.response
    assert isinstance(h.add(7, MAX_EPOCH - 1, [A0]).error, ProducerFenced)
    assert h.add(new_id, 0, [A0]).ok


# -- S4.7 transaction timeouts: bounded, and enforced by the sweep --


@pytest.mark.parametrize("timeout", [0, -1, 15 * MINUTE + 1, True, "60000"])
def test_S4_7_a_timeout_outside_the_maximum_is_refused(timeout):
    outcome = init_producer_id(None, TID, timeout, 5, NOW, CONFIG)
    assert isinstance(outcome.error, InvalidTransactionTimeout) and outcome.records == ()
    assert outcome.error.code == 50


def test_S4_7_the_maximum_timeout_itself_is_accepted():
    assert init_producer_id(None, TID, 15 * MINUTE, 5, NOW, CONFIG).ok


def test_S4_7_the_sweep_aborts_a_timed_out_transaction_with_an_epoch_bump():
    h = Harness()
    ident = h.init_until_done(timeout_ms=10_000)
    assert h.add(ident.producer_id, ident.producer_epoch, [A0]).ok
    h.now += 10_000
    assert h.sweep().response is SweepAction.NONE and h.sweep().records == ()
    h.now += 1
    outcome = h.sweep()
    assert outcome.response is SweepAction.ABORT_TIMED_OUT
    (fence,) = outcome.records
    assert fence.state is TxnState.PREPARE_ABORT and fence.producer_epoch == ident.producer_epoch + 1
    assert h.sweep().records == (), "the sweep is idempotent"
    assert h.finish().control is ControlType.ABORT
    for late in (
        h.add(ident.producer_id, ident.producer_epoch, [A0]),
        h.end(ident.producer_id, ident.producer_epoch, commit=True),
    ):
        assert isinstance(late.error, ProducerFenced)


def test_S4_7_idle_ids_expire_and_come_back_with_a_new_producer_id():
    config = dataclasses.replace(CONFIG, transactional_id_expiration_ms=1000)
    h = Harness(config)
    old = ongoing(h)
    h.now += 10**9
    assert h.sweep().response is SweepAction.ABORT_TIMED_OUT, "an open transaction aborts, never expires"
    h.finish()
    h.now += 999
    assert h.sweep().response is SweepAction.NONE
    h.now += 1
    outcome = h.sweep()
    assert outcome.response is SweepAction.EXPIRE and outcome.records[0].state is TxnState.DEAD
    assert TID not in h.state and h.replayed() == {}
    assert isinstance(h.add(old.producer_id, old.producer_epoch, [A0]).error, InvalidProducerIdMapping)
    fresh = h.init_until_done()
    assert fresh.producer_id != old.producer_id and fresh.producer_epoch == 0


def test_S4_7_config_comes_from_the_broker_defaults():
    config = TransactionConfig.from_broker_config(load("broker"))
    assert config == TransactionConfig(transaction_max_timeout_ms=900_000, transactional_id_expiration_ms=604_800_000)


# -- __transaction_state partitioning --


@pytest.mark.parametrize(
    "text,expected",
    [("", 0), ("hello", 99162322), ("Hello World", -862545276), ("polygenelubricants", -(2**31)), ("😀", 1772899)],
)
def test_java_string_hash_matches_java(text, expected):
    assert java_string_hash(text) == expected


def test_partition_for_transactional_id_is_kafkas_partition_for():
    assert partition_for_transactional_id("Hello World", 50) == 862545276 % 50
    assert partition_for_transactional_id("polygenelubricants", 50) == 0, "Utils.abs(Integer.MIN_VALUE) is 0"
    assert partition_for_transactional_id("hello", 1) == 0
    with pytest.raises(ValueError):
        partition_for_transactional_id("hello", 0)


def test_an_outcome_is_a_response_or_an_error():
    with pytest.raises(ValueError):
        Outcome(response=1, error=InvalidRequest("x"))


# -- random sequences against a model --

IDS = st.sampled_from(["t1", "t2"])
PARTITION_SETS = st.sets(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2)), min_size=1, max_size=3)
SMALL = TransactionConfig(transaction_max_timeout_ms=1000, transactional_id_expiration_ms=5000)


class Client:
    """A producer instance: the identity it was last told; a zombie once a later init succeeded."""

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.zombie = False
        self.last_end: tuple[int, int, bool, EndTransactionResult, int, int] | None = None

    def __repr__(self) -> str:
        return f"Client({self.transactional_id}, {self.producer_id}, {self.producer_epoch}, zombie={self.zombie})"


def expected_identity_error(before: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> type:
    """What a request from an identity other than the current holder's must get."""
    if before is None:
        return InvalidProducerIdMapping
    if before.state.is_prepared and (producer_id, producer_epoch) == (before.next_producer_id, 0):
        return ConcurrentTransactions
    if producer_id in (before.producer_id, before.previous_producer_id):
        return ProducerFenced
    return InvalidProducerIdMapping


class CoordinatorMachine(RuleBasedStateMachine):
    clients = Bundle("clients")

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(SMALL)
        self.all_clients: list[Client] = []
        self.max_epoch: dict[int, int] = {}
        self.seen_markers: list[TransactionMarkers] = []
        self.checked = 0

    # Ids loaded near the last epoch, so that producer id rotation is reached in a few steps.
    @initialize(epochs=st.tuples(*[st.sampled_from([None, MAX_EPOCH - 3, MAX_EPOCH - 2])] * 2))
    def seed(self, epochs):
        for pid, (tid, epoch) in enumerate(zip(("t1", "t2"), epochs, strict=True), start=1):
            if epoch is not None:
                self.h.seed(dataclasses.replace(metadata(epoch=epoch, pid=pid), transactional_id=tid))

    def _apply(self, transactional_id: str, outcome: Outcome) -> Outcome:
        self.h.apply(transactional_id, outcome)
        for record in outcome.records:
            assert 0 <= record.producer_epoch <= MAX_EPOCH
            assert record.producer_epoch >= self.max_epoch.get(record.producer_id, 0), "epoch went back"
            self.max_epoch[record.producer_id] = record.producer_epoch
        return outcome

    @rule(target=clients, transactional_id=IDS, timeout=st.integers(1, 1000))
    def init(self, transactional_id, timeout):
        h = self.h
        before = h.state.get(transactional_id)
        outcome, new_id = h.with_new_producer_id(
            lambda new_id: init_producer_id(before, transactional_id, timeout, new_id, h.now, h.config)
        )
        self._apply(transactional_id, outcome)
        if not outcome.ok:
            assert new_id is None, "S8.3: a refusal allocates no producer id"
        if before is not None and before.state is TxnState.ONGOING:
            assert isinstance(outcome.error, ConcurrentTransactions)
            (fence,) = outcome.records
            assert fence.state is TxnState.PREPARE_ABORT and fence.producer_epoch == before.producer_epoch + 1
            event("init fenced an ongoing transaction")
            return multiple()
        if before is not None and before.state.is_prepared:
            assert isinstance(outcome.error, ConcurrentTransactions) and outcome.records == ()
            return multiple()
        assert outcome.ok, outcome.error
        after = h.state[transactional_id]
        assert after.state is TxnState.EMPTY and outcome.response == InitProducerIdResult(after.producer_id, after.producer_epoch)
        if before is None:
            assert (after.producer_id, after.producer_epoch) == (new_id, 0)
        elif new_id is not None:
            event("init moved to a new producer id")
            assert (after.producer_id, after.producer_epoch, after.previous_producer_id) == (
                new_id,
                0,
                before.producer_id,
            )
        else:
            assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch + 1)
        assert after.producer_epoch <= MAX_EPOCH - 1
        for client in self.all_clients:
            if client.transactional_id == transactional_id:
                client.zombie = True
        client = Client(transactional_id, after.producer_id, after.producer_epoch)
        self.all_clients.append(client)
        return client

    def holder(self, transactional_id: str) -> Client | None:
        live = [c for c in self.all_clients if c.transactional_id == transactional_id and not c.zombie]
        return live[-1] if live else None

    @rule(transactional_id=IDS, partitions=PARTITION_SETS)
    def add_by_holder(self, transactional_id, partitions):
        client = self.holder(transactional_id)
        if client is not None:
            self.add(client, partitions)

    @rule(transactional_id=IDS, commit=st.booleans())
    def end_by_holder(self, transactional_id, commit):
        client = self.holder(transactional_id)
        if client is not None:
            self.end(client, commit)

    @rule(client=clients, partitions=PARTITION_SETS)
    def add(self, client, partitions):
        h, tid = self.h, client.transactional_id
        before = h.state.get(tid)
        outcome = self._apply(tid, add_partitions(before, tid, client.producer_id, client.producer_epoch, partitions, h.now))
        identity = (client.producer_id, client.producer_epoch)
        if client.zombie:
            assert isinstance(outcome.error, (ProducerFenced, InvalidProducerIdMapping))
        if before is None:
            assert isinstance(outcome.error, InvalidProducerIdMapping)
        elif identity == (before.producer_id, before.producer_epoch):
            if before.state.is_prepared:
                assert isinstance(outcome.error, ConcurrentTransactions)
            elif before.state is TxnState.ONGOING:
                union = before.partitions | partitions
                assert outcome.response == AddPartitionsResult(union)
                assert len(outcome.records) == (0 if union == before.partitions else 1)
            else:
                (record,) = outcome.records
                assert record.state is TxnState.ONGOING and record.partitions == partitions
                assert record.txn_start_ms == h.now
        else:
            assert isinstance(outcome.error, expected_identity_error(before, *identity))
        if not outcome.ok:
            assert outcome.records == ()

    @rule(client=clients, commit=st.booleans())
    def end(self, client, commit):
        h, tid = self.h, client.transactional_id
        before = h.state.get(tid)
        request = (client.producer_id, client.producer_epoch)
        outcome, new_id = h.with_new_producer_id(lambda new_id: end_transaction(before, tid, *request, commit, h.now, new_id))
        self._apply(tid, outcome)
        if not outcome.ok:
            assert new_id is None, "S8.3: a refusal allocates no producer id"
        if client.zombie:
            assert isinstance(outcome.error, (ProducerFenced, InvalidProducerIdMapping))
        is_current = before is not None and request == (before.producer_id, before.producer_epoch)
        if is_current and before.state is TxnState.ONGOING:
            (decision,) = outcome.records
            assert decision.state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
            assert decision.producer_epoch == before.producer_epoch + 1
            assert decision.last_producer_epoch == before.producer_epoch
            assert decision.partitions == before.partitions
            answer = outcome.response
            if new_id is not None:
                event("end moved to a new producer id")
            expected = (new_id, 0) if new_id is not None else (before.producer_id, before.producer_epoch + 1)
            assert (answer.producer_id, answer.producer_epoch) == expected
            assert answer.producer_epoch <= MAX_EPOCH - 1
            event("end decided")
            client.last_end = (*request, commit, answer, decision.producer_id, decision.producer_epoch)
            client.producer_id, client.producer_epoch = answer.producer_id, answer.producer_epoch
            return
        assert outcome.records == ()
        if is_current and before.state.is_prepared:
            assert isinstance(outcome.error, ConcurrentTransactions)
        elif is_current and before.state.is_idle:
            if commit:
                assert isinstance(outcome.error, InvalidTxnState)
            else:
                assert outcome.response == EndTransactionResult(ControlType.ABORT, *request)
        elif not is_current:
            # A client never holds the epoch an end was sent with once it is answered, so no retry here.
            assert isinstance(outcome.error, expected_identity_error(before, *request))

    @rule(data=st.data())
    def retry_end(self, data):
        ended = [client for client in self.all_clients if client.last_end is not None]
        if not ended:
            return
        client = data.draw(st.sampled_from(ended))
        flip = data.draw(st.booleans())
        h, tid = self.h, client.transactional_id
        pid, epoch, commit, answer, decided_pid, decided_epoch = client.last_end
        before = h.state.get(tid)
        outcome = self._apply(tid, end_transaction(before, tid, pid, epoch, commit != flip, h.now, None))
        assert outcome.records == ()
        states = (
            (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT) if commit else (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
        )
        same_decision = (
            before is not None
            and before.state in states
            and (
                (before.producer_id, before.producer_epoch) == (decided_pid, decided_epoch)
                or (
                    before.state.is_complete
                    and (before.previous_producer_id, before.producer_epoch) == (decided_pid, 0)
                    and before.producer_id == answer.producer_id
                )
            )
        )
        if same_decision and flip:
            assert isinstance(outcome.error, InvalidTxnState)
        elif same_decision:
            event(f"retried end answered again ({before.state.value})")
            assert outcome.ok and outcome.response == answer
        else:
            assert not outcome.ok

    @rule(transactional_id=IDS)
    def complete(self, transactional_id):
        h = self.h
        before = h.state.get(transactional_id)
        markers = markers_for(before)
        if markers is None:
            return
        self.seen_markers.append(markers)
        outcome = self._apply(transactional_id, complete_transaction(before, markers, h.now))
        (record,) = outcome.records
        assert record.state is (TxnState.COMPLETE_COMMIT if before.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT)
        assert record.partitions == frozenset()
        if before.next_producer_id != -1:
            assert (record.producer_id, record.producer_epoch) == (before.next_producer_id, 0)
        else:
            assert (record.producer_id, record.producer_epoch) == (before.producer_id, before.producer_epoch)

    @rule(client=clients, partitions=PARTITION_SETS, data=st.data())
    def add_with_markers_written(self, client, partitions, data):
        """add_partitions by a client that wrote markers: the current decided end's, or stale ones (S4.5)."""
        h, tid = self.h, client.transactional_id
        before = h.state.get(tid)
        candidates = [m for m in self.seen_markers if m.transactional_id == tid] + [markers_for(before)]
        written = data.draw(st.sampled_from(candidates))
        request = (tid, client.producer_id, client.producer_epoch, partitions, h.now)
        plain = add_partitions(before, *request)
        outcome = self._apply(tid, add_partitions(before, *request, written))
        if written is None or written != markers_for(before):
            assert (outcome.records, outcome.response, type(outcome.error)) == (plain.records, plain.response, type(plain.error))
            return
        if not outcome.ok:
            assert outcome.records == ()
            return
        self.seen_markers.append(written)  # stale from now on
        event("completed and began in one outcome")
        complete, started = outcome.records
        assert complete.state.is_complete and complete.partitions == frozenset()
        assert (client.producer_id, client.producer_epoch) == (complete.producer_id, complete.producer_epoch)
        assert not client.zombie
        assert started.state is TxnState.ONGOING and started.partitions == partitions

    @rule(transactional_id=IDS, data=st.data())
    def complete_with_stale_markers(self, transactional_id, data):
        stale = [m for m in self.seen_markers if m.transactional_id == transactional_id]
        if not stale:
            return
        markers = data.draw(st.sampled_from(stale))
        before = self.h.state.get(transactional_id)
        outcome = self._apply(transactional_id, complete_transaction(before, markers, self.h.now))
        assert outcome.records == () and outcome.ok

    @rule(transactional_id=IDS)
    def sweep(self, transactional_id):
        h = self.h
        before = h.state.get(transactional_id)
        outcome = self._apply(transactional_id, sweep(before, h.now, h.config))
        if before is None:
            assert outcome.records == ()
        elif before.state is TxnState.ONGOING and before.txn_start_ms + before.transaction_timeout_ms < h.now:
            (fence,) = outcome.records
            assert fence.state is TxnState.PREPARE_ABORT and fence.producer_epoch == before.producer_epoch + 1
            event("sweep aborted a timed-out transaction")
        elif before.state.is_idle and before.txn_last_update_ms + h.config.transactional_id_expiration_ms <= h.now:
            assert outcome.records[0].state is TxnState.DEAD and transactional_id not in h.state
            event("sweep expired an id")
        else:
            assert outcome.records == ()

    @rule(ms=st.one_of(st.integers(0, 100), st.integers(0, 3000)))
    def tick(self, ms):
        self.h.now += ms

    @invariant()
    def replay_from_scratch_equals_the_state_held(self):
        assert self.h.replayed() == self.h.state

    @invariant()
    def a_snapshot_restores_the_state_held(self):
        """S8.2: a cold coordinator that loads a snapshot (through JSON, as on disk) has the same state."""
        assert state_from_snapshot(json.loads(json.dumps(snapshot_of(self.h.state)))) == self.h.state

    @invariant()
    def zombies_stay_fenced(self):
        for client in self.all_clients:
            if not client.zombie:
                continue
            event("zombie checked")
            tid = client.transactional_id
            current = self.h.state.get(tid)
            identity = (client.producer_id, client.producer_epoch)
            for outcome in (
                add_partitions(current, tid, *identity, [("a", 0)], self.h.now),
                add_partitions(current, tid, *identity, [("a", 0)], self.h.now, markers_for(current)),
                end_transaction(current, tid, *identity, True, self.h.now, None),
            ):
                assert outcome.records == ()
                if current is not None and client.producer_id in (current.producer_id, current.previous_producer_id):
                    assert isinstance(outcome.error, ProducerFenced)
                else:
                    assert isinstance(outcome.error, InvalidProducerIdMapping)

    @invariant()
    def held_state_is_consistent(self):
        for tid, md in self.h.state.items():
            assert md.transactional_id == tid and md.state is not TxnState.DEAD
            assert (md.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)) == bool(md.partitions)
            assert md.next_producer_id == -1 or md.state.is_prepared


CoordinatorMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
test_S4_random_sequences_against_a_model = CoordinatorMachine.TestCase
