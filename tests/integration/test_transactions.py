"""Transactions on real Delta tables: the coordinator on __transaction_state and the transactional Producer (S4, S8.2, S8.3).

One test per rule that makes the rule fail on purpose. Crashes are simulated
in-process here by a fault hook that raises; tests/processes kills real processes.
"""

from __future__ import annotations

import json
import threading

import pytest
from helpers import Crash, crash_at, table_fingerprint

from lakelog import AdminClient, NewTopic, Producer
from lakelog.coordinator import TxnState
from lakelog.coordinator.transaction.coordinator import (
    FAULT_AFTER_DECISION,
    FAULT_AFTER_MARKER,
    FAULT_BEFORE_COMPLETE,
    FAULT_BEFORE_COMPLETE_AND_BEGIN,
    FAULT_BEFORE_MARKER,
    TRANSACTION_STATE_LOG,
    TransactionCoordinator,
)
from lakelog.errors import (
    ConcurrentTransactions,
    InvalidConfig,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    KafkaException,
    KafkaTimeout,
    ProducerFenced,
)
from lakelog.log import BatchHeader, open_partition, payload_table
from lakelog.log.partition import wall_clock_ms
from lakelog.store import Location

pytestmark = pytest.mark.roots("local", "s3", "azure", "gcs", release=("azure", "gcs"))

TOPIC = "orders"


@pytest.fixture
def lake(root):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(TOPIC, num_partitions=3)])
    return root


def producer(root, transactional_id="app", **conf):
    return Producer({"lakelog.root": root, "transactional.id": transactional_id, **conf})


def rows(root, partition):
    log = open_partition(root, TOPIC, partition)
    return log.fetch(0, max_records=1_000_000).rows.to_pylist() if log.log_end_offset() else []


def markers(root, partition):
    return [(row["control"], row["producer_id"], row["producer_epoch"]) for row in rows(root, partition) if row["control"]]


def state_records(root) -> list[tuple[str, str]]:
    """(transactional id, state) of every record in __transaction_state, in offset order per partition."""
    found = []
    for folder in sorted((Location.of(root) / TRANSACTION_STATE_LOG).children(), key=lambda folder: int(folder.name)):
        log = open_partition_at(root, int(folder.name))
        if log.log_end_offset():
            for row in log.fetch(0, max_records=1_000_000).rows.to_pylist():
                record = json.loads(row["value"])
                found.append((record["transactional_id"], record["state"]))
    return found


def open_partition_at(root, partition):
    from lakelog.log.topics import open_internal_partition

    return open_internal_partition(root, TRANSACTION_STATE_LOG, partition, 50)


def produce_to_all(p, tag):
    for partition in range(3):
        p.produce(TOPIC, value=f"{tag}-{partition}", partition=partition)
    p.flush()


# -- S4.1 -----------------------------------------------------------------------------------


def test_S4_1_init_maps_the_id_to_one_producer_id_and_fences_the_older_instance(lake):
    """S4.1: the id keeps its producer id across instances, each init bumps the epoch, the older instance is fenced."""
    first = producer(lake)
    first.init_transactions()
    second = producer(lake)
    second.init_transactions()
    assert second._producer_id == first._producer_id
    assert second._producer_epoch == first._producer_epoch + 1
    first.begin_transaction()
    first.produce(TOPIC, value="zombie", partition=0)
    with pytest.raises(ProducerFenced) as fenced:
        first.commit_transaction()
    assert fenced.value.error.fatal() and not fenced.value.error.retriable()
    with pytest.raises(ProducerFenced):  # every later call fails the same way
        first.begin_transaction()
    assert rows(lake, 0) == []
    second.begin_transaction()
    second.produce(TOPIC, value="rightful", partition=0)
    second.commit_transaction()
    assert [row["value"] for row in rows(lake, 0) if row["control"] is None] == [b"rightful"]


def test_S4_1_S8_3_a_fenced_instance_whose_appends_wrote_their_files_beside_its_add_leaves_the_tables_as_they_were(lake):
    """A transaction's first batches write their files while the add of their partitions is made (S4.4). The
    add of a fenced instance is refused: each append deletes its file, and every table is byte for byte as it was
    (S8.3). Fails when a file is left behind, or when an append commits without waiting for the add."""
    first = producer(lake)
    first.init_transactions()
    second = producer(lake)
    second.init_transactions()
    before = table_fingerprint(lake)
    first.begin_transaction()
    failed = []
    for partition in range(3):
        first.produce(TOPIC, value="zombie", partition=partition, on_delivery=lambda error, _: failed.append(error))
    first.flush()
    assert [error.name() for error in failed] == ["PRODUCER_FENCED"] * 3
    assert table_fingerprint(lake) == before
    with pytest.raises(ProducerFenced):
        first.commit_transaction()
    assert table_fingerprint(lake) == before


def test_S4_1_transactional_id_is_validated_like_a_topic_name(root):
    for bad in ("a/b", "..", "x" * 250, "sp ace"):
        with pytest.raises(InvalidConfig):
            producer(root, bad)
    with pytest.raises(InvalidConfig):
        producer(root, "ok", **{"enable.idempotence": False})


def test_S4_1_distinct_ids_get_distinct_producer_ids(lake):
    ids = set()
    for n in range(5):
        p = producer(lake, f"app-{n}")
        p.init_transactions()
        ids.add(p._producer_id)
    assert len(ids) == 5


# -- S4.2 -----------------------------------------------------------------------------------


def test_S4_2_init_aborts_the_ongoing_transaction_of_the_previous_instance(lake):
    """S4.2: a crashed instance's open transaction is aborted by the next init: markers in every partition it wrote."""
    crashed = producer(lake)
    crashed.init_transactions()
    crashed.begin_transaction()
    produce_to_all(crashed, "lost")
    pid, epoch = crashed._producer_id, crashed._producer_epoch
    successor = producer(lake)
    successor.init_transactions()
    for partition in range(3):
        assert markers(lake, partition) == [("ABORT", pid, epoch + 1)]
    assert [state for _, state in state_records(lake)][-4:] == ["Ongoing", "PrepareAbort", "CompleteAbort", "Empty"]
    assert successor._producer_epoch == epoch + 2


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize(
    "point,index", [(FAULT_AFTER_DECISION, None), (FAULT_AFTER_MARKER, 0), (FAULT_AFTER_MARKER, 1), (FAULT_BEFORE_COMPLETE, None)]
)
def test_S4_2_S4_5_init_rolls_a_decided_end_forward(lake, commit, point, index):
    """S4.2/S4.5: a producer dying anywhere between decision and completion; the next init finishes the decided end."""
    dying = producer(lake)
    dying.init_transactions()
    dying.begin_transaction()
    produce_to_all(dying, "txn")
    dying._coordinator = TransactionCoordinator(lake, fault=crash_at(point, index))
    with pytest.raises(Crash):
        dying.commit_transaction() if commit else dying.abort_transaction()
    decided = TransactionCoordinator(lake).describe("app")
    assert decided.state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    successor = producer(lake)
    successor.init_transactions()
    kind = "COMMIT" if commit else "ABORT"
    for partition in range(3):
        assert markers(lake, partition) == [(kind, decided.producer_id, decided.producer_epoch)]
    complete = "CompleteCommit" if commit else "CompleteAbort"
    assert [state for _, state in state_records(lake)][-2:] == [complete, "Empty"]


def test_S4_2_init_meeting_a_decided_end_says_concurrent_transactions_at_the_handler(lake):
    """S4.2: the handler refuses init over PrepareCommit with ConcurrentTransactions (retriable); the coordinator
    finishes the transaction and retries, so the caller never sees it."""
    from lakelog.coordinator import transaction as txn

    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "x")
    p._coordinator = TransactionCoordinator(lake, fault=crash_at(FAULT_AFTER_DECISION))
    with pytest.raises(Crash):
        p.commit_transaction()
    coordinator = TransactionCoordinator(lake)
    current = coordinator.describe("app")
    outcome = txn.init_producer_id(current, "app", 60_000, None, wall_clock_ms(), coordinator.config)
    assert isinstance(outcome.error, ConcurrentTransactions) and outcome.error.error.retriable()
    assert outcome.records == ()
    assert coordinator.init_producer_id("app", 60_000).producer_epoch == current.producer_epoch + 1


# -- S4.3 -----------------------------------------------------------------------------------


def test_S4_3_every_transition_is_a_record_and_illegal_ones_are_refused(lake):
    """S4.3: the states a commit and an abort go through are records in __transaction_state; commit with no
    transaction is InvalidTxnState and writes nothing (S8.3)."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "c")
    p.commit_transaction()
    p.begin_transaction()
    p.produce(TOPIC, value="a", partition=1)
    p.flush()
    p.abort_transaction()
    # The producer's abort leaves CompleteAbort to its next transaction, or to the sweep (S4.5).
    assert TransactionCoordinator(lake).sweep().rolled_forward == ["app"]
    assert [state for tid, state in state_records(lake) if tid == "app"] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
        "Ongoing",
        "PrepareAbort",
        "CompleteAbort",
    ]
    coordinator = TransactionCoordinator(lake)
    before = table_fingerprint(lake)
    with pytest.raises(InvalidTxnState):
        coordinator.end_transaction("app", p._producer_id, p._producer_epoch, True)
    assert table_fingerprint(lake) == before


def test_S4_3_client_state_machine_refuses_calls_out_of_order(lake):
    p = producer(lake)
    for call in (p.begin_transaction, p.commit_transaction, p.abort_transaction):
        with pytest.raises(KafkaException) as error:
            call()
        assert error.value.error.code() == -172  # _STATE
    with pytest.raises(KafkaException):
        p.produce(TOPIC, value="before init")
    p.init_transactions()
    with pytest.raises(KafkaException):
        p.produce(TOPIC, value="outside a transaction")
    with pytest.raises(KafkaException):
        p.init_transactions()
    plain = Producer({"lakelog.root": lake})
    with pytest.raises(KafkaException) as error:
        plain.init_transactions()
    assert error.value.error.code() == -145  # _NOT_CONFIGURED


# -- S4.4 -----------------------------------------------------------------------------------


def test_S4_4_a_write_to_a_partition_not_in_the_transaction_is_refused(lake):
    """S4.4 (KIP-890): verification refuses a partition the transaction has not added, and any stale identity."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    p.produce(TOPIC, value="in", partition=0)
    p.flush()
    coordinator = TransactionCoordinator(lake)
    pid, epoch = p._producer_id, p._producer_epoch
    coordinator.verify_partitions("app", pid, epoch, [(TOPIC, 0)])
    before = table_fingerprint(lake)
    with pytest.raises(InvalidTxnState) as missing:
        coordinator.verify_partitions("app", pid, epoch, [(TOPIC, 1)])
    assert missing.value.partitions == [(TOPIC, 1)]
    with pytest.raises(ProducerFenced):
        coordinator.verify_partitions("app", pid, epoch - 1 if epoch else epoch + 1, [(TOPIC, 0)])
    with pytest.raises(InvalidProducerIdMapping):
        coordinator.verify_partitions("app", pid + 1000, 0, [(TOPIC, 0)])
    assert table_fingerprint(lake) == before
    p.commit_transaction()
    # After the end, the partition is no longer in a transaction: the old identity may not write.
    with pytest.raises(ProducerFenced):
        coordinator.verify_partitions("app", pid, epoch, [(TOPIC, 0)])


def test_S4_4_partitions_are_added_before_their_first_write(lake):
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    for partition in (2, 0):
        p.produce(TOPIC, value="x", partition=partition)
    assert TransactionCoordinator(lake).describe("app").state is TxnState.EMPTY  # nothing written yet
    p.flush()
    assert TransactionCoordinator(lake).describe("app").partitions == {(TOPIC, 0), (TOPIC, 2)}
    p.commit_transaction()
    assert markers(lake, 1) == []  # a partition the transaction never touched gets no marker


# -- S4.5 / S4.6 -------------------------------------------------------------------------------


def state_log_end(lake, transactional_id="app") -> int:
    """The log end offset of the id's __transaction_state partition: one record more per record appended."""
    from lakelog.coordinator import partition_for_transactional_id

    return open_partition_at(lake, partition_for_transactional_id(transactional_id, 50)).log_end_offset()


def state_log_version(lake, transactional_id="app") -> int:
    """The Delta version of the id's __transaction_state partition: one more per commit."""
    from lakelog.coordinator import partition_for_transactional_id

    return open_partition_at(lake, partition_for_transactional_id(transactional_id, 50)).version


def test_S4_5_commit_writes_one_marker_per_partition_before_it_returns(lake):
    """S4.5: commit returns once every partition holds its COMMIT marker, so read_committed readers see the whole
    transaction (S4.8) at return; Complete* is not waited for: the id stays PrepareCommit until the producer's
    next add_partitions records CompleteCommit and the new Ongoing in one commit."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "t1")
    pid, epoch = p._producer_id, p._producer_epoch
    p.commit_transaction()
    for partition in range(3):
        assert markers(lake, partition) == [("COMMIT", pid, epoch + 1)]
        log = open_partition(lake, TOPIC, partition)
        assert log.last_stable_offset() == log.high_watermark() == 2
    assert TransactionCoordinator(lake).describe("app").state is TxnState.PREPARE_COMMIT
    records, version = state_log_end(lake), state_log_version(lake)
    p.begin_transaction()
    p.produce(TOPIC, value="t2", partition=1)
    p.flush()
    assert (state_log_end(lake), state_log_version(lake)) == (records + 2, version + 1)
    assert [state for _, state in state_records(lake)][-3:] == ["PrepareCommit", "CompleteCommit", "Ongoing"]
    ongoing = TransactionCoordinator(lake).describe("app")
    assert (ongoing.state, ongoing.partitions, ongoing.producer_epoch) == (TxnState.ONGOING, {(TOPIC, 1)}, epoch + 1)
    p.commit_transaction()
    assert markers(lake, 1) == [("COMMIT", pid, epoch + 1), ("COMMIT", pid, epoch + 2)]


@pytest.mark.parametrize("finisher", ["init", "sweep"])
def test_S4_5_a_commit_left_uncompleted_is_completed_by_the_next_init_or_the_sweep(lake, finisher):
    """S4.5, S4.2, S8.2: a producer that commits and goes away leaves PrepareCommit with every marker written; the
    next instance's init or the sweep records CompleteCommit, writing no marker again."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "t1")
    p.commit_transaction()
    decided = TransactionCoordinator(lake).describe("app")
    assert decided.state is TxnState.PREPARE_COMMIT
    before = [rows(lake, partition) for partition in range(3)]
    if finisher == "init":
        successor = producer(lake)
        successor.init_transactions()
        assert successor._producer_epoch == decided.producer_epoch + 1
        assert [state for _, state in state_records(lake)][-2:] == ["CompleteCommit", "Empty"]
    else:
        assert TransactionCoordinator(lake).sweep().rolled_forward == ["app"]
        assert TransactionCoordinator(lake).describe("app").state is TxnState.COMPLETE_COMMIT
    assert [rows(lake, partition) for partition in range(3)] == before


def test_S4_5_S8_3_a_zombie_cannot_complete_and_begin(lake):
    """S4.1, S8.3: the old instance, fenced by a new init after its commit, cannot record Complete* with a new
    transaction: its add_partitions is ProducerFenced and writes nothing."""
    old = producer(lake)
    old.init_transactions()
    old.begin_transaction()
    produce_to_all(old, "t1")
    old.commit_transaction()
    new = producer(lake)
    new.init_transactions()
    before = table_fingerprint(lake)
    old.begin_transaction()
    old.produce(TOPIC, value="zombie", partition=0)
    with pytest.raises(ProducerFenced):
        old.commit_transaction()
    assert table_fingerprint(lake) == before


def test_S4_5_markers_are_written_in_parallel(lake):
    """S4.5: the markers of one end are written at once, one thread per partition: every marker's thread reaches
    its write before any of them has written (a barrier that a one-after-another writer would never pass)."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "par")
    barrier = threading.Barrier(3, timeout=30)
    threads = set()

    def meet(point, details):
        if point == FAULT_BEFORE_MARKER:
            threads.add(threading.get_ident())
            barrier.wait()

    p._coordinator._fault = meet
    p.commit_transaction()
    assert len(threads) == 3
    for partition in range(3):
        assert [marker[0] for marker in markers(lake, partition)] == ["COMMIT"]


def test_S4_5_a_failed_marker_fails_the_commit_and_its_retry_writes_only_what_is_missing(lake):
    """S4.5: a marker that fails (here: its thread dies before writing) fails commit_transaction after the other
    markers are written; the retried commit writes the missing marker only, each partition ending with one."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "m")
    pid, epoch = p._producer_id, p._producer_epoch
    coordinator = p._coordinator
    coordinator._fault = crash_at(FAULT_BEFORE_MARKER, 1)
    with pytest.raises(Crash):
        p.commit_transaction()
    assert [len(markers(lake, partition)) for partition in range(3)] == [1, 0, 1]
    coordinator._fault = None
    p.commit_transaction()
    for partition in range(3):
        assert markers(lake, partition) == [("COMMIT", pid, epoch + 1)]
    assert p._producer_epoch == epoch + 1


def test_S4_2_S4_5_a_crash_before_the_completing_begin_is_finished_by_the_next_init(lake):
    """S4.2, S4.5: the producer dies in its next begin, just before the commit that records Complete* with the new
    Ongoing: the id is PrepareCommit with every marker written, nothing of the new transaction is anywhere,
    and the next init completes the commit without writing any marker again."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "t1")
    p.commit_transaction()
    p._coordinator._fault = crash_at(FAULT_BEFORE_COMPLETE_AND_BEGIN)
    p.begin_transaction()
    p.produce(TOPIC, value="t2", partition=0)
    with pytest.raises(Crash):
        p.flush()
    decided = TransactionCoordinator(lake).describe("app")
    assert decided.state is TxnState.PREPARE_COMMIT
    before = [rows(lake, partition) for partition in range(3)]
    successor = producer(lake)
    successor.init_transactions()
    assert [state for _, state in state_records(lake)][-3:] == ["PrepareCommit", "CompleteCommit", "Empty"]
    assert [rows(lake, partition) for partition in range(3)] == before


def test_S4_6_every_end_bumps_the_epoch_and_a_late_write_of_the_old_epoch_is_fenced(lake):
    """S4.6: after commit the producer holds epoch+1; a retried batch of the finished transaction cannot join the next."""
    p = producer(lake)
    p.init_transactions()
    epochs = [p._producer_epoch]
    for n in range(3):
        p.begin_transaction()
        p.produce(TOPIC, value=f"n{n}", partition=0)
        p.commit_transaction()
        epochs.append(p._producer_epoch)
    assert epochs == [epochs[0] + n for n in range(4)]
    log = open_partition(lake, TOPIC, 0)
    before = table_fingerprint(log.table.uri)
    with pytest.raises(ProducerFenced):  # a late write of transaction 2 (epoch before the last bump)
        log.append(payload_table([b"late"]), BatchHeader(p._producer_id, epochs[2], 1, is_transactional=True))
    assert table_fingerprint(log.table.uri) == before


def test_S4_6_an_exhausted_epoch_moves_the_id_to_a_new_producer_id(lake):
    """S4.6: a producer id whose epoch would overflow is replaced at the end of a transaction (markers keep the old one)."""
    from lakelog.coordinator import transaction as txn
    from lakelog.log.records import MAX_EPOCH

    coordinator = TransactionCoordinator(lake)
    first = coordinator.init_producer_id("tired", 60_000)
    log = coordinator._log_of("tired")
    worn = txn.TransactionMetadata(**{**log.state["tired"].__dict__, "producer_epoch": MAX_EPOCH - 1})
    log.log.append(log._encode([worn]), BatchHeader(expected_offset=log.catch_up() and log.position))
    coordinator.add_partitions("tired", first.producer_id, MAX_EPOCH - 1, [(TOPIC, 0)])
    result = coordinator.end_transaction("tired", first.producer_id, MAX_EPOCH - 1, True)
    assert result.producer_id != first.producer_id and result.producer_epoch == 0
    assert markers(lake, 0) == [("COMMIT", first.producer_id, MAX_EPOCH)]


# -- S4.7 / S8.2 -------------------------------------------------------------------------------


def test_S4_7_sweep_aborts_a_transaction_past_its_timeout_and_fences_its_producer(lake):
    # A timeout far longer than the test takes on any root; the sweep that aborts it runs on a clock moved past it.
    p = producer(lake, **{"transaction.timeout.ms": 60_000})
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "slow")
    pid, epoch = p._producer_id, p._producer_epoch
    assert TransactionCoordinator(lake).sweep().aborted_timed_out == []  # not yet
    later = TransactionCoordinator(lake, clock=lambda: wall_clock_ms() + 120_000)
    report = later.sweep()
    assert report.aborted_timed_out == ["app"]
    for partition in range(3):
        assert markers(lake, partition) == [("ABORT", pid, epoch + 1)]
    with pytest.raises(ProducerFenced):
        p.produce(TOPIC, value="after the abort", partition=0)
        p.commit_transaction()
    before = table_fingerprint(lake)
    assert not later.sweep().changed_anything  # idempotent (S8.2)
    assert table_fingerprint(lake) == before


def test_S4_7_transaction_timeout_above_the_maximum_is_refused(lake):
    p = producer(lake, **{"transaction.timeout.ms": 900_001})
    before = table_fingerprint(lake)
    with pytest.raises(InvalidTransactionTimeout):
        p.init_transactions()
    assert table_fingerprint(lake) == before


def test_S8_2_sweep_rolls_forward_and_expires_idle_ids(lake):
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "r")
    p._coordinator = TransactionCoordinator(lake, fault=crash_at(FAULT_AFTER_MARKER, 0))
    with pytest.raises(Crash):
        p.commit_transaction()
    report = TransactionCoordinator(lake).sweep()
    assert report.rolled_forward == ["app"]
    assert all(markers(lake, partition)[0][0] == "COMMIT" for partition in range(3))
    week_later = TransactionCoordinator(lake, clock=lambda: wall_clock_ms() + 8 * 86_400_000)
    assert week_later.sweep().expired == ["app"]
    assert TransactionCoordinator(lake).describe("app") is None


def test_S8_2_sweep_with_nothing_to_do_changes_nothing(lake):
    p = producer(lake)
    p.init_transactions()
    before = table_fingerprint(lake)
    report = TransactionCoordinator(lake).sweep()
    assert not report.changed_anything and report.ids_seen == 1
    assert table_fingerprint(lake) == before


def test_S4_race_on_another_id_of_the_same_state_partition_does_not_fail_the_request(lake):
    """One __transaction_state partition for all ids: a request that loses its commit to another id replays and wins."""
    broker = {"transaction.state.log.num.partitions": 1}
    a, b = TransactionCoordinator(lake, broker), TransactionCoordinator(lake, broker)
    a.init_producer_id("id-a", 60_000)
    b.init_producer_id("id-b", 60_000)  # b's state log is now ahead of a's replay
    assert a.init_producer_id("id-a", 60_000).producer_epoch == 1
    assert {m.transactional_id for m in a.list_transactions()} == {"id-a", "id-b"}


def test_S4_failed_delivery_makes_the_transaction_abort_only(lake):
    """A write refused inside a transaction: commit raises an abortable error; abort, then the producer goes on."""
    AdminClient({"lakelog.root": lake}).create_topics([NewTopic("strict", 1, config={"check.expected.offsets": True})])
    reports = []
    p = producer(lake, on_delivery=lambda error, message: reports.append(error))
    p.init_transactions()
    p.begin_transaction()
    p.produce(TOPIC, value="fine", partition=0)
    p.produce("strict", value="no expected offset")
    with pytest.raises(KafkaException) as failed:
        p.commit_transaction()
    assert failed.value.error.txn_requires_abort() and not failed.value.error.fatal()
    assert any(error is not None and error.code() == 44 for error in reports)  # POLICY_VIOLATION
    with pytest.raises(KafkaException) as again:
        p.commit_transaction()
    assert again.value.error.txn_requires_abort()
    p.abort_transaction()
    assert markers(lake, 0) and markers(lake, 0)[0][0] == "ABORT"
    p.begin_transaction()
    p.produce(TOPIC, value="next", partition=0)
    p.commit_transaction()
    assert [m[0] for m in markers(lake, 0)] == ["ABORT", "COMMIT"]


def test_S4_abort_purges_queued_messages(lake):
    reports = []
    p = producer(lake, on_delivery=lambda error, message: reports.append((error, message.value())))
    p.init_transactions()
    p.begin_transaction()
    p.produce(TOPIC, value="queued", partition=0)
    p.abort_transaction()
    assert [(error.code(), value) for error, value in reports] == [(-152, b"queued")]  # _PURGE_QUEUE
    assert rows(lake, 0) == []


def test_S4_5_commit_retries_a_retriable_error_until_its_timeout(lake):
    """S4.5 (librdkafka's commit_transaction): a retriable error after the decision is retried by the producer
    itself; the coordinator recognises the retried end and finishes it: one marker per partition, one bump."""
    p = producer(lake, **{"retry.backoff.ms": 1, "retry.backoff.max.ms": 1})
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "r")
    pid, epoch = p._producer_id, p._producer_epoch
    failures = []

    def time_out_once(point, details):
        if point == FAULT_AFTER_DECISION and not failures:
            failures.append(point)
            raise KafkaTimeout("the decision's answer was lost")

    p._coordinator._fault = time_out_once
    p.commit_transaction()
    assert failures == [FAULT_AFTER_DECISION]
    assert (p._producer_id, p._producer_epoch) == (pid, epoch + 1)
    for partition in range(3):
        assert markers(lake, partition) == [("COMMIT", pid, epoch + 1)]


def test_S4_5_commit_gives_up_at_its_timeout_and_a_later_call_finishes_the_end(lake):
    """S4.5: past its timeout commit_transaction raises the retriable error; the producer stays in its transaction,
    and the next call finishes the decided commit without deciding again."""
    p = producer(lake)
    p.init_transactions()
    p.begin_transaction()
    produce_to_all(p, "g")
    pid, epoch = p._producer_id, p._producer_epoch

    def time_out(point, details):
        if point == FAULT_AFTER_DECISION:
            raise KafkaTimeout("the decision's answer was lost")

    p._coordinator._fault = time_out
    with pytest.raises(KafkaTimeout) as timed_out:
        p.commit_transaction(0)
    assert timed_out.value.error.retriable()
    assert TransactionCoordinator(lake).describe("app").state is TxnState.PREPARE_COMMIT
    assert all(markers(lake, partition) == [] for partition in range(3))
    p._coordinator._fault = None
    p.commit_transaction()
    assert (p._producer_id, p._producer_epoch) == (pid, epoch + 1)
    assert [state for _, state in state_records(lake)].count("PrepareCommit") == 1
    for partition in range(3):
        assert markers(lake, partition) == [("COMMIT", pid, epoch + 1)]
