"""Pure tests of the transaction coordinator (S4.1-S4.7): lakelog/coordinator/transaction/, no tables.

`Harness` plays the store: it appends each outcome's records to an in-memory
`__transaction_state` log, checking every transition against the state table, and
allocates a producer id only when a handler's answer says it needs one, as the coordinator does.
"""

from __future__ import annotations

import dataclasses

import pytest

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
)
from lakelog.coordinator.transaction import ROW_TYPES, java_string_hash
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
from tests.unit.transaction_harness import A0, A1, B0, CONFIG, MINUTE, NOW, TID, Harness, metadata, ongoing

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
