"""KIP-890 verification where a transactional write lands (S4.4), on real tables.

A transactional batch, or a transactional offset commit, whose (producer id, epoch)
has no ongoing transaction holding its partition is refused there and leaves every
table byte-identical (S8.3): no marker would ever close it. Only the first batch of
a transaction at a partition asks the coordinator; a lost commit race asks again.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from helpers import table_fingerprint

from lakelog import Consumer, Producer, TopicPartition
from lakelog.coordinator.group import GroupMetadata
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG, GroupCoordinator
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import IllegalGeneration, InvalidTxnState, KafkaError, KafkaException, ProducerFenced, UnknownMemberId
from lakelog.log import BatchHeader, create_topic, open_partition, payload_table
from lakelog.log.verification import TransactionVerification

TOPIC = "events"
TID = "app"
GROUP = "g"


@pytest.fixture
def lake(root):
    create_topic(root, TOPIC, 2)
    return root


class Counting:
    """The coordinator's verify_partitions, counted; `after(calls)` runs once a verification has passed."""

    def __init__(self, coordinator: TransactionCoordinator, after=None) -> None:
        self.coordinator, self.after, self.calls = coordinator, after, 0

    def verify_partitions(self, *args):
        self.calls += 1
        result = self.coordinator.verify_partitions(*args)
        if self.after is not None:
            self.after(self.calls)
        return result


def ongoing(root: str, *partitions: tuple[str, int]) -> tuple[TransactionCoordinator, int, int]:
    """A transaction of TID holding `partitions`; returns its coordinator, producer id and epoch."""
    coordinator = TransactionCoordinator(root)
    identity = coordinator.init_producer_id(TID, 60_000)
    coordinator.add_partitions(TID, identity.producer_id, identity.producer_epoch, list(partitions))
    return coordinator, identity.producer_id, identity.producer_epoch


def one(value: bytes = b"v"):
    return payload_table([value])


# -- a batch the coordinator does not cover is refused at the partition ------------------------------------


@pytest.mark.parametrize("case", ["no transactional.id", "partition not added", "unknown producer id", "ended epoch"])
def test_S4_4_transactional_batch_outside_its_transaction_is_refused_at_the_partition(lake, case):
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0))
    header, transaction = BatchHeader(pid, epoch, 0, is_transactional=True), TransactionVerification(TID, coordinator)
    if case == "no transactional.id":
        transaction = None
    elif case == "unknown producer id":
        header = BatchHeader(pid + 1000, 0, 0, is_transactional=True)
    elif case == "ended epoch":
        # Its transaction ended (markers on partition 0 only): a zombie's first write to partition 1 has no marker coming.
        coordinator.end_transaction(TID, pid, epoch, commit=True)
    log = open_partition(lake, TOPIC, 1)
    before = table_fingerprint(lake)
    with pytest.raises(KafkaException) as refused:
        if transaction is None:
            log.append(one(), header)  # as every transactional write was made before verification
        else:
            log.append(one(), header, transaction=transaction)
    if case in ("no transactional.id", "partition not added"):
        assert isinstance(refused.value, InvalidTxnState)
        error = refused.value
        assert (error.producer_id, error.producer_epoch, error.topic, error.partition) == (pid, epoch, TOPIC, 1)
    assert not refused.value.retriable
    assert table_fingerprint(lake) == before  # S8.3
    assert log.high_watermark() == 0 and log.last_stable_offset() == 0


def test_S4_4_only_the_first_batch_of_a_transaction_at_a_partition_asks_the_coordinator(lake):
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0))
    counting = Counting(coordinator)
    transaction = TransactionVerification(TID, counting)
    log = open_partition(lake, TOPIC, 0)
    log.append(one(b"a"), BatchHeader(pid, epoch, 0, is_transactional=True), transaction=transaction)
    log.append(one(b"b"), BatchHeader(pid, epoch, 1, is_transactional=True), transaction=transaction)
    assert counting.calls == 1  # the partition's rows show the transaction open at this epoch
    ended = coordinator.end_transaction(TID, pid, epoch, commit=True)
    coordinator.add_partitions(TID, ended.producer_id, ended.producer_epoch, [(TOPIC, 0)])
    log.refresh()  # the marker was written through the coordinator's own handle: no lost race to verify again
    log.append(one(b"c"), BatchHeader(ended.producer_id, ended.producer_epoch, 0, is_transactional=True), transaction=transaction)
    assert counting.calls == 2  # a new epoch is a new transaction: verified again
    assert log.high_watermark() == 4


def test_S4_4_a_lost_race_verifies_again(lake):
    """Another writer takes the version the batch was decided for: the batch decides, and verifies, again."""
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0))
    other = open_partition(lake, TOPIC, 0)

    def race(calls: int) -> None:
        if calls == 1:
            other.append(one(b"other"))

    counting = Counting(coordinator, race)
    log = open_partition(lake, TOPIC, 0)
    landed = log.append(
        one(b"mine"), BatchHeader(pid, epoch, 0, is_transactional=True), transaction=TransactionVerification(TID, counting)
    )
    assert counting.calls == 2 and landed.base_offset == 1


def test_S4_4_the_writers_own_add_answers_the_first_decision_on_the_version_read_before_it(lake):
    """A partition whose snapshot was read before the writer's own add of it needs no second question for a batch
    decided on that snapshot: the add landed later, on the coordinator's latest state."""
    log = open_partition(lake, TOPIC, 0)
    version = log.version  # read before the add
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0))
    counting = Counting(coordinator)
    proven = {(TOPIC, 0): (pid, epoch, version)}
    log.append(
        one(b"a"), BatchHeader(pid, epoch, 0, is_transactional=True), transaction=TransactionVerification(TID, counting, proven)
    )
    assert counting.calls == 0
    assert log.high_watermark() == 1


@pytest.mark.parametrize("case", ["another version", "another epoch", "another partition"])
def test_S4_4_a_proof_of_another_version_epoch_or_partition_is_no_answer(lake, case):
    """A proof answers only for the (producer id, epoch, partition, snapshot version) it was taken for: a batch
    decided on a snapshot read after it (a lost race reloaded it) asks the coordinator, which may have ended the
    transaction since; a batch of another epoch or partition asks too."""
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0), (TOPIC, 1))
    log = open_partition(lake, TOPIC, 0)
    proven = {(TOPIC, 0): (pid, epoch, log.version)}
    if case == "another version":
        # Another writer commits after the proof: the batch is decided on a later snapshot (reloaded first, or after
        # losing its race to that commit), and that decision asks.
        open_partition(lake, TOPIC, 0).append(one(b"other"))
        counting = Counting(coordinator)
        landed = log.append(
            one(b"mine"),
            BatchHeader(pid, epoch, 0, is_transactional=True),
            transaction=TransactionVerification(TID, counting, proven),
        )
        assert counting.calls == 1 and landed.base_offset == 1
        return
    counting = Counting(coordinator)
    if case == "another epoch":
        proven = {(TOPIC, 0): (pid, epoch + 1, log.version)}
    else:
        log = open_partition(lake, TOPIC, 1)
    log.append(
        one(b"a"), BatchHeader(pid, epoch, 0, is_transactional=True), transaction=TransactionVerification(TID, counting, proven)
    )
    assert counting.calls == 1


def test_S4_4_a_producers_transaction_asks_the_coordinator_nothing_its_own_add_answered(lake, monkeypatch):
    """Through the public API: a transaction over both partitions adds them in one commit and then appends with no
    verification read; the batches are still verified where no proof holds (S4.4)."""
    calls: list[tuple] = []
    original = TransactionCoordinator.verify_partitions

    def counted(self, *args):
        calls.append(args)
        return original(self, *args)

    monkeypatch.setattr(TransactionCoordinator, "verify_partitions", counted)
    producer = Producer({"lakelog.root": lake, "transactional.id": TID})
    producer.init_transactions()
    for _ in range(2):
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"a", partition=0)
        producer.produce(TOPIC, value=b"b", partition=1)
        producer.commit_transaction()
    assert calls == []
    assert [open_partition(lake, TOPIC, p).last_stable_offset() for p in (0, 1)] == [4, 4]


def test_S4_4_a_send_whose_first_partition_the_transaction_holds_adds_the_others(lake):
    """A flush of partition 0 (added already) and partition 1 (new) adds partition 1 before its batch lands: the
    transaction commits with both, and its batches are read whole."""
    producer = Producer({"lakelog.root": lake, "transactional.id": TID})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"first", partition=0)
    producer.flush()
    producer.produce(TOPIC, value=b"second", partition=0)
    producer.produce(TOPIC, value=b"third", partition=1)
    producer.flush()
    producer.commit_transaction()
    committed = [open_partition(lake, TOPIC, p).fetch(0, isolation_level="read_committed").rows for p in (0, 1)]
    assert [rows.column("value").to_pylist() for rows in committed] == [[b"first", b"second"], [b"third"]]


def test_S4_4_an_abort_marker_between_verification_and_commit_fences_the_batch(lake):
    """The abort's marker takes the version the verified batch was decided for: the batch loses the race, and on
    the latest snapshot its epoch is fenced (S4.6); nothing of it is written."""
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0))

    def abort(calls: int) -> None:
        if calls == 1:
            TransactionCoordinator(lake).end_transaction(TID, pid, epoch, commit=False)

    counting = Counting(coordinator, abort)
    log = open_partition(lake, TOPIC, 0)
    with pytest.raises(ProducerFenced):
        log.append(one(), BatchHeader(pid, epoch, 0, is_transactional=True), transaction=TransactionVerification(TID, counting))
    rows = log.fetch(0).rows
    assert rows.column("control").to_pylist() == ["ABORT"]
    assert log.last_stable_offset() == log.high_watermark() == 1


def test_S4_4_producer_writes_verify_through_its_coordinator(lake):
    """A producer's transactional batches are verified where they land, with its own coordinator: those of its
    transaction go through; one for a partition the transaction does not hold (what a producer whose
    add_partitions was lost would send) is refused there with INVALID_TXN_STATE and writes nothing (S8.3)."""
    p = Producer({"lakelog.root": lake, "transactional.id": TID})
    p.init_transactions()
    p.begin_transaction()
    for value in (b"a", b"b"):
        p.produce(TOPIC, value=value, partition=0)
        p.flush()
    p.commit_transaction()
    log = open_partition(lake, TOPIC, 0)
    assert log.fetch(0, isolation_level="read_committed").rows.column("value").to_pylist() == [b"a", b"b"]
    p.begin_transaction()
    p.produce(TOPIC, value=b"c", partition=0)
    p.flush()
    # The producer takes partition 1 for added; its coordinator never heard of it (a lost add_partitions).
    p._transaction_partitions.add((TOPIC, 1))
    before = table_fingerprint(lake)
    reports = []
    p.produce(TOPIC, value=b"stray", partition=1, on_delivery=lambda error, message: reports.append(error))
    p.flush()
    assert [error and error.code() for error in reports] == [KafkaError.INVALID_TXN_STATE]
    assert table_fingerprint(lake) == before
    with pytest.raises(KafkaException) as refused:
        p.commit_transaction()
    assert refused.value.args[0].txn_requires_abort()
    p.abort_transaction()
    stray = open_partition(lake, TOPIC, 1)
    assert stray.high_watermark() == stray.last_stable_offset() == 0
    assert log.fetch(0, isolation_level="read_committed").rows.column("value").to_pylist() == [b"a", b"b"]


# -- transactional offset commits (S4.4, S7.1) -------------------------------------------------------------


def offsets_partition(lake: str) -> tuple[str, int]:
    groups = GroupCoordinator(lake)
    groups.commit_offsets(GROUP, "", -1, {(TOPIC, 0): (1, "")})  # a group outside the protocol, and its partition
    return groups.offsets_partition(GROUP)


@pytest.mark.parametrize("verified", [False, True], ids=["no transactional.id", "partition not added"])
def test_S4_4_transactional_offsets_outside_the_transaction_are_refused(lake, verified):
    """Offsets whose __consumer_offsets partition the transaction never added would stay pending for good
    (UnstableOffsetCommit forever): no marker reaches them. Refused, and nothing is written (S8.3)."""
    offsets_tp = offsets_partition(lake)
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0))
    transaction = TransactionVerification(TID, coordinator) if verified else None
    before = table_fingerprint(lake)
    with pytest.raises(InvalidTxnState) as refused:
        GroupCoordinator(lake).commit_transactional_offsets(
            GroupMetadata(GROUP), pid, epoch, {(TOPIC, 0): (5, "")}, transaction=transaction
        )
    assert (refused.value.topic, refused.value.partition) == offsets_tp == (CONSUMER_OFFSETS_LOG, offsets_tp[1])
    assert table_fingerprint(lake) == before
    coordinator.add_partitions(TID, pid, epoch, [offsets_tp])
    GroupCoordinator(lake).commit_transactional_offsets(
        GroupMetadata(GROUP), pid, epoch, {(TOPIC, 0): (5, "")}, transaction=TransactionVerification(TID, coordinator)
    )
    coordinator.end_transaction(TID, pid, epoch, commit=True)
    [record] = GroupCoordinator(lake).fetch_offsets(GROUP, [(TOPIC, 0)]).values()
    assert record.offset == 5


def test_S4_4_transactional_offsets_after_a_marker_through_the_groups_handle_ask_the_coordinator_once(lake):
    """The last transaction's marker was written through the group coordinator's own offsets handle (as a producer
    lends it): the next transactional offset commit replays that row, then asks the coordinator once, at the
    position it commits at (asking at the position before the marker too cost a second read per commit)."""
    offsets_tp = offsets_partition(lake)
    groups = GroupCoordinator(lake)
    coordinator = TransactionCoordinator(
        lake, partition_logs=lambda topic, partition: groups.offsets_log(partition) if topic == CONSUMER_OFFSETS_LOG else None
    )
    identity = coordinator.init_producer_id(TID, 60_000)
    pid, epoch = identity.producer_id, identity.producer_epoch
    for offset in (5, 6):
        coordinator.add_partitions(TID, pid, epoch, [offsets_tp])
        counting = Counting(coordinator)
        groups.commit_transactional_offsets(
            GroupMetadata(GROUP), pid, epoch, {(TOPIC, 0): (offset, "")}, transaction=TransactionVerification(TID, counting)
        )
        assert counting.calls == 1
        ended = coordinator.end_transaction(TID, pid, epoch, commit=True)
        pid, epoch = ended.producer_id, ended.producer_epoch
    [record] = GroupCoordinator(lake).fetch_offsets(GROUP, [(TOPIC, 0)]).values()
    assert record.offset == 6


def test_S4_4_offsets_without_a_transactional_id_are_refused(lake):
    """The call as it was before verification (no transactional.id): refused, nothing written."""
    offsets_partition(lake)
    coordinator, pid, epoch = ongoing(lake, (TOPIC, 0))
    before = table_fingerprint(lake)
    with pytest.raises(InvalidTxnState):
        GroupCoordinator(lake).commit_transactional_offsets(GroupMetadata(GROUP), pid, epoch, {(TOPIC, 0): (5, "")})
    assert table_fingerprint(lake) == before


def member_of_the_group(lake: str) -> tuple[Consumer, GroupMetadata]:
    """A consumer that joined GROUP (the consumer protocol) and owns both partitions, and its group metadata."""
    consumer = Consumer(
        {
            "lakelog.root": lake,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 60_000,
            "session.timeout.ms": 600_000,
        }
    )
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 60  # a deadline, not a wait
    while len(consumer.assignment()) < 2:
        assert time.monotonic() < deadline
        consumer.consume(1, 0.05)
    return consumer, consumer.consumer_group_metadata()


@pytest.mark.parametrize("bad", ["unknown member", "stale generation"])
def test_S8_3_send_offsets_with_bad_group_metadata_changes_no_table(lake, bad):
    """S7.2 refuses a zombie's group metadata before the transaction adds the offsets partition (S8.3)."""
    if bad == "unknown member":
        offsets_partition(lake)
        metadata, error = GroupMetadata(GROUP, "ghost", 3), UnknownMemberId
    else:
        consumer, current = member_of_the_group(lake)
        # An epoch the member never had: the member's own commit at it is refused (IllegalGeneration, S6.4).
        metadata, error = replace(current, generation_id=current.generation_id + 1), IllegalGeneration
    p = Producer({"lakelog.root": lake, "transactional.id": TID})
    p.init_transactions()
    p.begin_transaction()
    before = table_fingerprint(lake)
    with pytest.raises(error) as refused:
        p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 5)], metadata)
    assert refused.value.error.txn_requires_abort()
    assert table_fingerprint(lake) == before
    p.abort_transaction()
