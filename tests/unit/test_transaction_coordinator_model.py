"""The transaction coordinator's handlers against a model (S4.1-S4.7): random request sequences from clients and
zombies, checked by hypothesis's stateful testing on the in-memory store of tests/unit/transaction_harness.py."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, rule

from lakelog.coordinator import (
    AddPartitionsResult,
    EndTransactionResult,
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
    sweep,
)
from lakelog.coordinator.transaction import snapshot_of, state_from_snapshot
from lakelog.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTxnState,
    ProducerFenced,
)
from lakelog.log.records import MAX_EPOCH, ControlType
from tests.unit.transaction_harness import Harness, metadata

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
