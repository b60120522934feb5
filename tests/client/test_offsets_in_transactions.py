"""Offset commits of consumers and transactions through the clients and the real GroupCoordinator (S6.4, S7).

KAFKA-19779's scenario is played on real tables: a member's epoch bumped without
a revocation still accepts a commit at its previous epoch; after a revocation
moves the epoch from 2 to 3, a commit at 2 is refused; and the partition-level
revocation epochs accept a commit for a partition that was never revoked.
"""

from __future__ import annotations

import shutil
import time

import pytest
from helpers import FakeClock

from lakelog import Consumer, Producer, TopicPartition
from lakelog.config import CONF_DIR_ENV, conf_dir
from lakelog.coordinator.group import GroupMetadata, Heartbeat
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import IllegalGeneration, StaleMemberEpoch, UnknownMemberId
from lakelog.log.partition import wall_clock_ms

pytestmark = pytest.mark.roots("local", "s3")

GROUP = "g"


def group_consumer(lake: str, clock=wall_clock_ms, **conf) -> Consumer:
    return Consumer(
        {
            "lakelog.root": lake,
            "group.id": GROUP,
            "heartbeat.interval.ms": 50,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        },
        clock=clock,
    )


def transactional(lake: str, transactional_id: str = "t", clock=wall_clock_ms) -> Producer:
    producer = Producer({"lakelog.root": lake, "transactional.id": transactional_id}, clock=clock)
    producer.init_transactions()
    return producer


def joined(consumer: Consumer, topic: str, partitions: int) -> GroupMetadata:
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60  # a deadline, not a wait: generous for S3 roots
    while len(consumer.assignment()) < partitions:
        assert time.monotonic() < deadline
        consumer.consume(100, 0.02)
    return consumer.consumer_group_metadata()


def split_between_two(lake: str, topic: str) -> tuple[Consumer, Consumer, GroupMetadata]:
    """`first` owns both partitions of `topic` at epoch 1; `second` joins, so `first` revokes one and moves to
    epoch 2. Returns both consumers and `first`'s metadata of epoch 1 (what a zombie would still hold)."""
    first, second = group_consumer(lake), group_consumer(lake)
    old = joined(first, topic, 2)
    second.subscribe([topic])
    deadline = time.monotonic() + 60
    while len(second.assignment()) < 1:
        assert time.monotonic() < deadline
        first.consume(10, 0.02)
        second.consume(10, 0.02)
    return first, second, old


def committed(lake: str, topic: str, partitions: int) -> dict[int, int | None]:
    """Committed offsets as an admin sees them (not asking for stable ones: pending offsets do not count)."""
    records = GroupCoordinator(lake).fetch_offsets(GROUP, [(topic, p) for p in range(partitions)], require_stable=False)
    return {tp[1]: None if record is None else record.offset for tp, record in records.items()}


# -- S7.1: offsets commit with the transaction, or vanish -----------------------------------------


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_S7_1_sent_offsets_become_committed_only_when_the_transaction_commits(lake, make_topic, end):
    topic = make_topic(partitions=2)
    with group_consumer(lake) as consumer:
        metadata = joined(consumer, topic, 2)
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        producer = transactional(lake)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)], metadata)
        assert committed(lake, topic, 2) == {0: 1, 1: None}  # pending, not committed
        producer.commit_transaction() if end == "commit" else producer.abort_transaction()
    assert committed(lake, topic, 2) == ({0: 7, 1: 3} if end == "commit" else {0: 1, 1: None})


# -- S7.2: group metadata fences a zombie's offsets ------------------------------------------------


def test_S7_2_a_removed_members_offsets_are_refused_though_its_producer_epoch_is_current(lake, make_topic):
    """The member, its producer and the sweep share a passed-in clock, moved past the member's session timeout
    (S6.5) but not past the transaction's timeout (60 s): only the group metadata fences the zombie."""
    topic = make_topic()
    clock = FakeClock()
    zombie = group_consumer(lake, clock, **{"session.timeout.ms": 45_000})
    metadata = joined(zombie, topic, 1)
    producer = transactional(lake, clock=clock)
    producer.begin_transaction()
    clock.advance(45_001)  # no poll: no heartbeat
    assert GroupCoordinator(lake, clock=clock).sweep() == [(GROUP, metadata.member_id)]
    with pytest.raises(UnknownMemberId) as caught:
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], metadata)
    assert caught.value.args[0].txn_requires_abort()
    producer.abort_transaction()  # the producer itself was never fenced: it aborts and goes on
    producer.begin_transaction()
    producer.abort_transaction()
    assert committed(lake, topic, 1) == {0: None}


def test_S7_2_a_stale_generation_is_illegal_generation_for_a_transaction_and_stale_epoch_for_a_commit(lake, make_topic):
    """After a revocation bumped the member 1 -> 2, metadata taken at epoch 1 is a zombie's (S6.4)."""
    topic = make_topic(partitions=2)
    first, second, old = split_between_two(lake, topic)
    current = first.consumer_group_metadata()
    assert (old.generation_id, current.generation_id) == (1, 2)
    [kept] = first.assignment()
    producer = transactional(lake)
    producer.begin_transaction()
    with pytest.raises(IllegalGeneration):
        producer.send_offsets_to_transaction([TopicPartition(kept.topic, kept.partition, 1)], old)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(kept.topic, kept.partition, 1)], current)
    producer.commit_transaction()
    with pytest.raises(StaleMemberEpoch):
        GroupCoordinator(lake).commit_offsets(GROUP, old.member_id, old.generation_id, {(kept.topic, kept.partition): (2, "")})
    assert committed(lake, topic, 2)[kept.partition] == 1
    first.close()
    second.close()


# -- KAFKA-19779 -----------------------------------------------------------------------------------


def test_S6_4_kafka_19779_epoch_bumped_without_revocation_accepts_the_old_epoch_then_a_revocation_fences_it(lake, make_topic):
    topic, other = make_topic(partitions=4, name="orders"), make_topic(partitions=1, name="other")
    coordinator = GroupCoordinator(lake)
    precise = GroupCoordinator(lake, broker_config={"group.consumer.partition.revocation.epochs.enable": True})
    p0, p1, p3 = (topic, 0), (topic, 1), (topic, 3)

    def beat(member_id: str, epoch: int, topics: tuple[str, ...], owned) -> tuple[int, frozenset]:
        response = coordinator.heartbeat(Heartbeat(GROUP, member_id, epoch, topics, frozenset(owned)))
        return response.member_epoch, response.assignment

    # A member owns P0..P3 at epoch 1.
    a = coordinator.heartbeat(Heartbeat(GROUP, "", 0, (topic,), frozenset()))
    assert a.member_epoch == 1 and a.assignment == {(topic, p) for p in range(4)}
    epoch_1_metadata = GroupMetadata(GROUP, a.member_id, 1)

    # B joins for another topic: the group epoch moves to 2 and A is bumped to 2 without revoking anything.
    b = coordinator.heartbeat(Heartbeat(GROUP, "", 0, (other,), frozenset()))
    epoch, owned = beat(a.member_id, 1, (topic,), a.assignment)
    assert (epoch, owned) == (2, a.assignment)
    member = coordinator.describe(GROUP).members[a.member_id].current
    assert (member.revocation_epoch, member.member_epoch) == (0, 2)

    # A commit still carrying epoch 1 (the member had not heard of 2) is not a zombie's: accepted.
    coordinator.commit_offsets(GROUP, a.member_id, 1, {p1: (10, "")})
    producer = transactional(lake)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(*p1, 11)], epoch_1_metadata)
    producer.commit_transaction()
    assert coordinator.fetch_offsets(GROUP, [p1])[p1].offset == 11

    # B subscribes to A's topic too: A must give up P3; once it reports that, it moves 2 -> 3, revocation epoch 2.
    beat(b.member_id, b.member_epoch, (topic, other), ())
    epoch, owned = beat(a.member_id, 2, (topic,), owned)
    assert epoch == 2 and p3 not in owned  # revoke first
    epoch, owned = beat(a.member_id, 2, (topic,), owned)
    member = coordinator.describe(GROUP).members[a.member_id].current
    assert (member.revocation_epoch, member.member_epoch, epoch) == (2, 3, 3)

    # Now a commit at epoch 2 is refused, even for a partition A still owns (member-level bound).
    with pytest.raises(StaleMemberEpoch):
        coordinator.commit_offsets(GROUP, a.member_id, 2, {p0: (20, "")})
    producer.begin_transaction()
    with pytest.raises(IllegalGeneration):
        producer.send_offsets_to_transaction([TopicPartition(*p0, 20)], GroupMetadata(GROUP, a.member_id, 2))
    producer.abort_transaction()
    coordinator.commit_offsets(GROUP, a.member_id, 3, {p0: (20, "")})

    # Partition-level revocation epochs: P0 was never revoked, so epoch 2 is accepted for it; P3 was
    # revoked at 2, so epoch 2 stays refused for P3.
    precise.commit_offsets(GROUP, a.member_id, 2, {p0: (21, "")})
    with pytest.raises(StaleMemberEpoch):
        precise.commit_offsets(GROUP, a.member_id, 2, {p3: (21, "")})
    assert committed(lake, topic, 4) == {0: 21, 1: 11, 2: None, 3: None}


def test_S6_4_partition_level_revocation_epochs_are_switched_on_in_broker_properties_for_every_client(
    lake, make_topic, tmp_path, monkeypatch
):
    """`group.consumer.partition.revocation.epochs.enable=true` in the conf dir's broker.properties: a producer
    sending a member's late offsets (epoch 1, after the member revoked *another* partition at 1 and moved to 2)
    gets them accepted for the partition the member kept, and still refused for the one it gave up."""
    conf = tmp_path / "conf"
    shutil.copytree(conf_dir(), conf)
    with open(conf / "broker.properties", "a") as properties:
        properties.write("group.consumer.partition.revocation.epochs.enable=true\n")
    topic = make_topic(partitions=2)
    first, second, old = split_between_two(lake, topic)
    [kept], [given_up] = first.assignment(), second.assignment()
    assert first.consumer_group_metadata().generation_id == 2
    for precise in (False, True):
        if precise:
            monkeypatch.setenv(CONF_DIR_ENV, str(conf))
        producer = transactional(lake, f"t-{precise}")
        producer.begin_transaction()
        if precise:
            producer.send_offsets_to_transaction([TopicPartition(kept.topic, kept.partition, 5)], old)
            producer.commit_transaction()
        else:
            with pytest.raises(IllegalGeneration):
                producer.send_offsets_to_transaction([TopicPartition(kept.topic, kept.partition, 5)], old)
            producer.abort_transaction()
        producer.begin_transaction()
        with pytest.raises(IllegalGeneration):
            producer.send_offsets_to_transaction([TopicPartition(given_up.topic, given_up.partition, 5)], old)
        producer.abort_transaction()
    assert committed(lake, topic, 2) == {kept.partition: 5, given_up.partition: None}
    first.close()
    second.close()
