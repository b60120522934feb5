"""Consumer groups through the confluent-kafka-shaped Consumer, on real tables (S6, S7.3).

`subscribe()` drives the group coordinator from `poll()`; commits go to
`__consumer_offsets`. Several consumers live in one process here: each keeps its
own state and talks to the tables only, as separate processes would.
"""

from __future__ import annotations

import time

import pytest
from helpers import FakeClock, table_fingerprint

from lakelog import OFFSET_BEGINNING, OFFSET_INVALID, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from lakelog.coordinator.group import GroupMetadata, Heartbeat
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import (
    FencedInstanceId,
    InvalidConfig,
    InvalidTopic,
    StaleMemberEpoch,
    UnknownMemberId,
    UnstableOffsetCommit,
)
from lakelog.log.partition import wall_clock_ms
from lakelog.store import Location

pytestmark = pytest.mark.roots("local", "s3", "azure", "gcs", release=("azure", "gcs"))

GROUP = "g"
FAST = {"heartbeat.interval.ms": 50, "auto.offset.reset": "earliest", "enable.auto.commit": False}


def group_consumer(lake: str, clock=wall_clock_ms, **conf) -> Consumer:
    return Consumer({"lakelog.root": lake, "group.id": GROUP, **FAST, **conf}, clock=clock)


def produce(lake: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"lakelog.root": lake, "linger.ms": 600_000})  # one batch per partition, at flush
    for partition in range(partitions):
        for n in range(per_partition):
            producer.produce(topic, f"p{partition}-{n}", partition=partition)
    producer.flush()


def poll_until(consumers: list[Consumer], done, timeout: float = 60.0) -> dict[int, list]:
    """Poll every consumer in turn until `done()`; returns the messages each got.

    `timeout` is a deadline, not a wait: generous, so that a slow S3 root under load does not fail a test.
    """
    got: dict[int, list] = {index: [] for index in range(len(consumers))}
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        for index, consumer in enumerate(consumers):
            got[index].extend(consumer.consume(100, 0.02))
    return got


def owned(consumer: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def recorder(events: list, name: str):
    return lambda _consumer, partitions: events.append((name, sorted((p.topic, p.partition) for p in partitions)))


@pytest.fixture
def four(lake, make_topic) -> str:
    topic = make_topic(partitions=4)
    produce(lake, topic, 4, 5)
    return topic


# -- S6.2: membership, revoke before assign ------------------------------------------------


def test_S6_2_a_lone_member_gets_every_partition_and_reads_it_from_the_start(lake, four):
    events: list = []
    with group_consumer(lake) as c:
        c.subscribe([four], on_assign=recorder(events, "assign"))
        got = poll_until([c], lambda: len(owned(c)) == 4)[0]
        got += c.consume(100, 0.5)
        assert sorted(m.value() for m in got) == sorted(f"p{p}-{n}".encode() for p in range(4) for n in range(5))
        assert events == [("assign", [(four, p) for p in range(4)])]
        metadata = c.consumer_group_metadata()
        assert (metadata.group_id, metadata.generation_id) == (GROUP, 1) and metadata.member_id


def test_S6_2_a_second_member_gets_partitions_only_after_the_first_revoked_them(lake, four):
    events: list = []
    a, b = group_consumer(lake), group_consumer(lake)
    a.subscribe([four], on_assign=recorder(events, "a+"), on_revoke=recorder(events, "a-"))
    poll_until([a], lambda: len(owned(a)) == 4)
    b.subscribe([four], on_assign=recorder(events, "b+"), on_revoke=recorder(events, "b-"))
    poll_until([b, a], lambda: len(owned(b)) == 2 and len(owned(a)) == 2)
    assert owned(a) | owned(b) == {(four, p) for p in range(4)} and not owned(a) & owned(b)
    revoked = next(parts for name, parts in events if name == "a-")
    assert events.index(("a-", revoked)) < events.index(("b+", revoked))
    # The revocation moved a's epoch on (S6.3), and both are at the target epoch now.
    group = GroupCoordinator(lake).describe(GROUP)
    a_state = group.members[a.consumer_group_metadata().member_id].current
    assert a_state.revocation_epoch == 1 < a_state.member_epoch == group.target_epoch == 2
    a.close()
    poll_until([b], lambda: len(owned(b)) == 4)
    b.close()
    assert GroupCoordinator(lake).describe(GROUP).members == {}


def test_S6_2_close_and_unsubscribe_revoke_and_leave(lake, four):
    events: list = []
    c = group_consumer(lake)
    c.subscribe([four], on_revoke=recorder(events, "revoke"))
    poll_until([c], lambda: len(owned(c)) == 4)
    c.unsubscribe()
    assert events == [("revoke", [(four, p) for p in range(4)])] and c.assignment() == []
    assert GroupCoordinator(lake).describe(GROUP).members == {}
    c.close()


# -- S6.1: commit and committed -------------------------------------------------------------


def test_S6_1_commit_stores_the_next_offset_to_read_and_a_new_member_starts_there(lake, four):
    with group_consumer(lake) as c:
        c.subscribe([four])
        first = (poll_until([c], lambda: len(owned(c)) == 4)[0] + c.consume(100, 0.5))[0]
        committed = c.commit(message=first, asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [(four, first.partition(), first.offset() + 1)]
        c.commit(offsets=[TopicPartition(four, 3, 4, "done to 4")], asynchronous=False)
        result = c.committed([TopicPartition(four, p) for p in range(4)])
    offsets = {tp.partition: (tp.offset, tp.metadata) for tp in result}
    assert offsets[first.partition()] == (first.offset() + 1, None)
    assert offsets[3] == (4, "done to 4")
    assert all(offsets[p] == (OFFSET_INVALID, None) for p in range(3) if p != first.partition())
    with group_consumer(lake) as again:
        again.subscribe([four])
        got = poll_until([again], lambda: len(owned(again)) == 4)[0] + again.consume(100, 0.5)
        assert [m.offset() for m in got if m.partition() == 3] == [4]


def test_S6_1_commit_without_arguments_commits_the_stored_positions(lake, four):
    with group_consumer(lake) as c:
        c.subscribe([four])
        got = poll_until([c], lambda: len(owned(c)) == 4)[0] + c.consume(100, 0.5)
        assert len(got) == 20
        c.commit(asynchronous=False)
        assert [tp.offset for tp in c.committed([TopicPartition(four, p) for p in range(4)])] == [5, 5, 5, 5]


def test_S6_1_asynchronous_commit_reports_through_on_commit_on_the_next_poll(lake, four):
    reports: list = []
    c = group_consumer(
        lake, **{"enable.auto.offset.store": False}, on_commit=lambda error, partitions: reports.append((error, partitions))
    )
    c.subscribe([four])
    poll_until([c], lambda: len(owned(c)) == 4)
    c.commit(offsets=[TopicPartition(four, 0, 2)])
    assert reports == []
    c.poll(0.1)
    [(error, partitions)] = reports
    assert error is None and [(p.partition, p.offset) for p in partitions] == [(0, 2)]
    c.commit()  # nothing stored
    c.poll(0.1)
    assert reports[-1][0].code() == KafkaError._NO_OFFSET
    with pytest.raises(KafkaException) as caught:
        c.commit(asynchronous=False)
    assert caught.value.args[0].code() == KafkaError._NO_OFFSET
    c.close()


def test_S6_1_store_offsets_needs_auto_store_off_and_an_assigned_partition(lake, four):
    with group_consumer(lake) as c:
        c.subscribe([four])
        poll_until([c], lambda: len(owned(c)) == 4)
        with pytest.raises(KafkaException) as caught:
            c.store_offsets(offsets=[TopicPartition(four, 0, 1)])
        assert caught.value.args[0].code() == KafkaError._INVALID_ARG
    with group_consumer(lake, **{"enable.auto.offset.store": False}) as c:
        c.subscribe([four])
        message = (poll_until([c], lambda: len(owned(c)) == 4)[0] + c.consume(100, 0.5))[0]
        with pytest.raises(KafkaException) as caught:
            c.commit(asynchronous=False)  # polled, but nothing stored
        assert caught.value.args[0].code() == KafkaError._NO_OFFSET
        c.store_offsets(message)
        with pytest.raises(KafkaException) as caught:
            c.store_offsets(offsets=[TopicPartition(four, 9, 1)])
        assert caught.value.args[0].code() == KafkaError._STATE
        [committed] = c.commit(asynchronous=False)
        assert (committed.partition, committed.offset) == (message.partition(), message.offset() + 1)


def test_S6_1_auto_commit_commits_stored_offsets_on_its_interval(lake, four):
    reports: list = []
    c = group_consumer(
        lake,
        **{"enable.auto.commit": True, "auto.commit.interval.ms": 200},
        on_commit=lambda error, partitions: reports.append((error, sorted((p.partition, p.offset) for p in partitions))),
    )
    c.subscribe([four])
    got = poll_until([c], lambda: len(owned(c)) == 4)[0] + c.consume(100, 0.3)
    assert len(got) == 20
    poll_until([c], lambda: bool(reports))
    assert reports == [(None, [(p, 5) for p in range(4)])]
    c.consume(100, 0.5)
    assert len(reports) == 1  # nothing moved: nothing sent again
    c.close()


def test_S6_1_auto_commit_commits_stored_offsets_at_close(lake, four):
    c = group_consumer(lake, **{"enable.auto.commit": True, "auto.commit.interval.ms": 600_000})
    c.subscribe([four])
    got = poll_until([c], lambda: len(owned(c)) == 4)[0] + c.consume(100, 0.3)
    assert len(got) == 20
    assert GroupCoordinator(lake).fetch_offsets(GROUP, [(four, 0)]) == {(four, 0): None}
    c.close()
    final = GroupCoordinator(lake).fetch_offsets(GROUP, [(four, p) for p in range(4)])
    assert {tp: record.offset for tp, record in final.items()} == {(four, p): 5 for p in range(4)}


def test_S6_1_manual_assignment_with_group_id_starts_at_the_committed_offset(lake, four):
    with group_consumer(lake) as c:
        c.assign([TopicPartition(four, 1)])
        c.commit(offsets=[TopicPartition(four, 1, 3)], asynchronous=False)
    with group_consumer(lake) as c:
        c.assign([TopicPartition(four, 1), TopicPartition(four, 2, OFFSET_BEGINNING)])
        got = c.consume(100, 1.0) + c.consume(100, 0.3)
        assert sorted((m.partition(), m.offset()) for m in got) == [(1, 3), (1, 4)] + [(2, n) for n in range(5)]


# -- S6.4, S6.5: fenced members ---------------------------------------------------------------


def test_S6_5_a_member_past_its_session_timeout_is_removed_then_commits_fail_and_it_rejoins_on_lost(lake, four):
    """The consumer and the sweep share a passed-in clock: the member stops polling (no heartbeat), the clock
    moves to the last millisecond of its lease (the sweep leaves it), then one past (the sweep removes it)."""
    events: list = []
    clock = FakeClock()
    c = group_consumer(lake, clock, **{"session.timeout.ms": 45_000})
    c.subscribe([four], on_lost=recorder(events, "lost"), on_assign=recorder(events, "assign"))
    poll_until([c], lambda: len(owned(c)) == 4)
    old = c.consumer_group_metadata()
    sweeper = GroupCoordinator(lake, clock=clock)
    lease_end = sweeper.describe(GROUP).members[old.member_id].metadata.lease_expires_ms
    assert lease_end - clock() == 45_000
    clock.advance(lease_end - clock())  # no poll: no heartbeat
    assert sweeper.sweep() == []
    clock.advance(1)
    assert sweeper.sweep() == [(GROUP, old.member_id)]
    with pytest.raises(UnknownMemberId):
        c.commit(offsets=[TopicPartition(four, 0, 1)], asynchronous=False)
    poll_until([c], lambda: len(events) == 3)
    assert events[1] == ("lost", [(four, p) for p in range(4)])
    assert events[2] == ("assign", [(four, p) for p in range(4)])
    new = c.consumer_group_metadata()
    # KIP-1082: it rejoins under its own member id (as confluent-kafka against Kafka 4, tests/kafka), at a new epoch.
    assert new.member_id == old.member_id and new.generation_id > old.generation_id
    c.commit(offsets=[TopicPartition(four, 0, 1)], asynchronous=False)
    c.close()


def test_S6_5_a_member_that_never_revokes_is_removed_by_the_sweep_after_its_rebalance_timeout(lake, four):
    """A keeps heartbeating within its session but keeps reporting the partition it was asked to give up:
    the sweep leaves it alone until its rebalance timeout (max.poll.interval.ms), then removes it, and only
    then does the partition move to B; A's later commits are UnknownMemberId (S6.2, S6.5)."""
    now = [1_000_000]
    coordinator = GroupCoordinator(lake, clock=lambda: now[0])

    def beat(member_id, epoch, owned):
        request = Heartbeat(GROUP, member_id, epoch, (four,), frozenset(owned), None, 45_000, 1_000)
        return coordinator.heartbeat(request)

    a = beat("", 0, ())
    assert len(a.assignment) == 4
    b = beat("", 0, ())
    stuck = beat(a.member_id, a.member_epoch, a.assignment)  # asked to revoke two partitions
    assert len(stuck.assignment) == 2
    for elapsed in (400, 900):
        now[0] = 1_000_000 + elapsed
        beat(a.member_id, stuck.member_epoch, a.assignment)  # still reporting all four: not revoked
        assert coordinator.sweep() == []
        assert beat(b.member_id, b.member_epoch, ()).assignment == frozenset()  # nothing moves yet
    now[0] = 1_000_000 + 1_500
    beat(a.member_id, stuck.member_epoch, a.assignment)  # heartbeats alone do not save it
    assert coordinator.sweep() == [(GROUP, a.member_id)]
    moved = beat(b.member_id, b.member_epoch, ())
    moved = beat(b.member_id, moved.member_epoch, moved.assignment)
    assert moved.assignment == {(four, p) for p in range(4)}
    with pytest.raises(UnknownMemberId):
        coordinator.commit_offsets(GROUP, a.member_id, stuck.member_epoch, {(four, 0): (1, "")})


def test_S6_5_a_settled_group_writes_only_lease_renewals_and_a_stalled_member_is_fenced_at_its_lease_end(lake, four):
    """Liveness is a lease (issue 11): two members, each with its own coordinator state as separate
    processes have, heartbeat every 3 s for 90 s of a passed-in clock and commit only their renewals,
    one per member when a third of the 45 s session is left. One stalls: the sweep leaves it alone up
    to the last millisecond of its lease and removes it one after; its commits are then UnknownMemberId,
    and the other member learns of its partitions by heartbeats that read (S6.2, S6.5, S7.2)."""
    now = [1_000_000]
    coordinators = [GroupCoordinator(lake, clock=lambda: now[0]) for _ in range(2)]
    responses = []
    for coordinator in coordinators:
        responses.append(coordinator.heartbeat(Heartbeat(GROUP, "", 0, (four,), frozenset())))

    def beat(index: int):
        response = responses[index]
        request = Heartbeat(GROUP, response.member_id, response.member_epoch, (four,), response.assignment)
        responses[index] = coordinators[index].heartbeat(request)
        return responses[index]

    while sorted(len(r.assignment) for r in responses) != [2, 2] or len({r.member_epoch for r in responses}) != 1:
        beat(0), beat(1)
    offsets_log = coordinators[0].offsets_log(coordinators[0].offsets_partition(GROUP)[1])
    offsets_log.refresh()
    before, settled = offsets_log.version, list(responses)
    for _ in range(90_000 // 3_000):
        now[0] += 3_000
        assert [beat(0), beat(1)] == settled
    offsets_log.refresh()
    assert offsets_log.version - before == 2 * 3, "each member renews its lease every 30 s, nothing else"

    stalled, alive = responses
    lease_end = coordinators[1].describe(GROUP).members[stalled.member_id].metadata.lease_expires_ms
    while now[0] < lease_end:
        now[0] = min(now[0] + 3_000, lease_end)
        beat(1)
    assert coordinators[1].sweep() == []
    now[0] += 1
    assert coordinators[1].sweep() == [(GROUP, stalled.member_id)]
    with pytest.raises(UnknownMemberId):
        coordinators[0].commit_offsets(GROUP, stalled.member_id, stalled.member_epoch, {(four, 0): (1, "")})
    assert beat(1).assignment == {(four, p) for p in range(4)}


def test_S6_5_a_static_member_replaced_by_a_new_instance_is_fenced(lake, four):
    first = group_consumer(lake, **{"group.instance.id": "worker-1"})
    first.subscribe([four])
    poll_until([first], lambda: len(owned(first)) == 4)
    second = group_consumer(lake, **{"group.instance.id": "worker-1"})
    second.subscribe([four])
    poll_until([second], lambda: len(owned(second)) == 4)
    with pytest.raises(FencedInstanceId):
        first.consume(10, 1.0)
    assert first.assignment() == []
    assert second.consumer_group_metadata().group_instance_id == "worker-1"
    second.close()
    first.close()


# -- S6.6: no commit between a revocation and the epoch bump past it -------------------------------


def test_S6_6_a_commit_inside_on_revoke_is_accepted_at_the_revocation_epoch(lake, four):
    """The coordinator holds the member's epoch bump until it reports the revocation: on_revoke may commit."""
    seen: list = []

    def commit_on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        seen.append(consumer.consumer_group_metadata().generation_id)
        consumer.commit(offsets=[TopicPartition(p.topic, p.partition, 2) for p in partitions], asynchronous=False)

    a, b = group_consumer(lake), group_consumer(lake)
    a.subscribe([four], on_revoke=commit_on_revoke)
    poll_until([a], lambda: len(owned(a)) == 4)
    b.subscribe([four])
    poll_until([b, a], lambda: len(owned(b)) == 2)
    assert seen == [1]
    committed = {tp.partition: tp.offset for tp in b.committed([TopicPartition(four, p) for p in range(4)])}
    assert [committed[tp[1]] for tp in sorted(owned(b))] == [2, 2]
    a.close()
    b.close()


def test_S6_6_after_a_revocation_the_consumer_commits_only_once_its_epoch_moved_past_it(lake, four):
    """on_revoke fails, so poll() stops before reporting the revocation: the member sits on its revocation
    epoch. The consumer's commit first reports the revocation (the coordinator bumps the epoch) and commits
    at the new epoch. A client that committed at the revocation epoch after the bump is refused (S6.4)."""
    a, b = group_consumer(lake), group_consumer(lake)
    failures = ["on_revoke failed"]

    def fail(_consumer, _partitions):
        if failures:
            raise RuntimeError(failures.pop())

    a.subscribe([four], on_revoke=fail)
    poll_until([a], lambda: len(owned(a)) == 4)
    member_id = a.consumer_group_metadata().member_id
    b.subscribe([four])
    b.poll(0.1)
    with pytest.raises(RuntimeError, match="on_revoke failed"):
        poll_until([a], lambda: False)
    kept = sorted(owned(a))
    assert len(kept) == 2
    coordinator = GroupCoordinator(lake)
    before = coordinator.describe(GROUP).members[member_id].current
    assert before.member_epoch == 1 and before.pending_revocation  # revoked by the client, not yet reported
    a.commit(offsets=[TopicPartition(*kept[0], 3)], asynchronous=False)
    after = coordinator.describe(GROUP).members[member_id].current
    assert (after.revocation_epoch, after.member_epoch) == (1, 2) and not after.pending_revocation
    assert coordinator.fetch_offsets(GROUP, [kept[0]])[kept[0]].offset == 3
    with pytest.raises(StaleMemberEpoch):
        coordinator.commit_offsets(GROUP, member_id, 1, {kept[0]: (4, "")})
    a.close()
    b.close()


# -- S7.3: stable offset fetch -----------------------------------------------------------------------


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_S7_3_a_read_committed_member_waits_for_pending_transactional_offsets(lake, four, end):
    owner = group_consumer(lake)
    owner.subscribe([four])
    poll_until([owner], lambda: len(owned(owner)) == 4)
    owner.commit(offsets=[TopicPartition(four, 0, 1)], asynchronous=False)
    producer = Producer({"lakelog.root": lake, "transactional.id": "t"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(four, 0, 4)], owner.consumer_group_metadata())
    owner.close()

    waiting = group_consumer(lake)
    waiting.subscribe([four])
    got = poll_until([waiting], lambda: len(owned(waiting)) == 4)[0] + waiting.consume(100, 0.5)
    assert {m.partition() for m in got} == {1, 2, 3}  # partition 0 waits for the transaction
    assert waiting.position([TopicPartition(four, 0)])[0].offset == OFFSET_INVALID
    with pytest.raises(UnstableOffsetCommit):
        waiting.committed([TopicPartition(four, 0)], timeout=0.2)
    with group_consumer(lake, **{"isolation.level": "read_uncommitted"}) as uncommitted:
        assert uncommitted.committed([TopicPartition(four, 0)], timeout=0.2)[0].offset == 1  # no wait
    producer.commit_transaction() if end == "commit" else producer.abort_transaction()
    got = waiting.consume(100, 5.0)  # returns as soon as partition 0 resolved and read
    assert [m.offset() for m in got if m.partition() == 0] == ([4] if end == "commit" else [1, 2, 3, 4])
    waiting.close()


# -- consumer_group_metadata and bad input ------------------------------------------------------------


def test_consumer_group_metadata_outside_a_subscription_commits_as_no_member(lake, four):
    with group_consumer(lake, **{"group.instance.id": "i"}) as c:
        assert c.consumer_group_metadata() == GroupMetadata(GROUP)
        c.subscribe([four])
        poll_until([c], lambda: len(owned(c)) == 4)
        metadata = c.consumer_group_metadata()
        assert (metadata.generation_id, metadata.group_instance_id) == (1, "i")


def test_group_calls_refuse_bad_input_and_write_nothing(lake, four):
    before = table_fingerprint(lake)
    with Consumer({"lakelog.root": lake}) as no_group:
        for call in (
            lambda: no_group.subscribe([four]),
            lambda: no_group.commit(offsets=[TopicPartition(four, 0, 1)]),
            lambda: no_group.committed([TopicPartition(four, 0)]),
            no_group.consumer_group_metadata,
        ):
            with pytest.raises(InvalidConfig, match="group.id"):
                call()
    with pytest.raises(InvalidConfig, match="group.instance.id"):
        Consumer({"lakelog.root": lake, "group.instance.id": "i"})
    with group_consumer(lake) as c:
        with pytest.raises(InvalidTopic):
            c.subscribe(["bad topic"])
        with pytest.raises(KafkaException):
            c.subscribe([])
        with pytest.raises(KafkaException):
            c.commit(offsets=[TopicPartition(four, 0, -5)], asynchronous=False)
        c.subscribe([four])
        with pytest.raises(KafkaException) as caught:
            c.assign([TopicPartition(four, 0)])
        assert caught.value.args[0].code() == KafkaError._STATE
    assert table_fingerprint(lake) == before
    assert not (Location.of(lake) / "__consumer_offsets").exists()


def test_a_heartbeat_from_a_removed_member_id_is_unknown_member(lake, four):
    """What the consumer turns into on_lost: the coordinator's answer to a member it removed."""
    coordinator = GroupCoordinator(lake)
    joined = coordinator.heartbeat(Heartbeat(GROUP, "", 0, (four,), frozenset()))
    coordinator.heartbeat(Heartbeat(GROUP, joined.member_id, -1, (four,), frozenset()))
    with pytest.raises(UnknownMemberId):
        coordinator.heartbeat(Heartbeat(GROUP, joined.member_id, joined.member_epoch, (four,), frozenset()))


def test_S6_5_a_heartbeat_at_an_epoch_the_coordinator_moved_past_loses_the_partitions_and_rejoins(lake, four, make_topic):
    """FencedMemberEpoch: the consumer reports on_lost, leaves under its old member id at once (so its
    partitions need not wait for its session timeout) and joins again with epoch 0."""
    other = make_topic(partitions=1)
    events: list = []
    c = group_consumer(lake)
    c.subscribe([four], on_lost=recorder(events, "lost"), on_assign=recorder(events, "assign"))
    poll_until([c], lambda: len(owned(c)) == 4)
    old = c.consumer_group_metadata()
    coordinator = GroupCoordinator(lake)
    # Behind the consumer's back, its member id is moved two epochs on (1 -> 2 -> 3) by heartbeats of its
    # own, so epoch 1 is neither its epoch nor the one before (a bump by another member's write, which
    # revokes nothing, would leave epoch 1 good).
    mine = frozenset(owned(c))
    assert coordinator.heartbeat(Heartbeat(GROUP, old.member_id, 1, (four, other), mine)).member_epoch == 2
    assert coordinator.heartbeat(Heartbeat(GROUP, old.member_id, 2, (four,), mine | {(other, 0)})).member_epoch == 2
    assert coordinator.heartbeat(Heartbeat(GROUP, old.member_id, 2, (four,), mine)).member_epoch == 3
    poll_until([c], lambda: len(events) == 3)
    assert events[1:] == [("lost", [(four, p) for p in range(4)]), ("assign", [(four, p) for p in range(4)])]
    new = c.consumer_group_metadata()
    # KIP-1082: it rejoins under its own member id (as confluent-kafka against Kafka 4, tests/kafka), at a new epoch.
    assert new.member_id == old.member_id and new.generation_id > old.generation_id
    assert set(coordinator.describe(GROUP).members) == {new.member_id}
    c.close()


def test_S6_5_a_static_member_that_closes_keeps_its_place_for_its_next_instance(lake, four):
    first = group_consumer(lake, **{"group.instance.id": "worker-1"})
    first.subscribe([four])
    poll_until([first], lambda: len(owned(first)) == 4)
    first_id = first.consumer_group_metadata().member_id
    first.close()  # epoch -2: a temporary leave
    assert set(GroupCoordinator(lake).describe(GROUP).members) == {first_id}
    second = group_consumer(lake, **{"group.instance.id": "worker-1"})
    second.subscribe([four])
    poll_until([second], lambda: len(owned(second)) == 4)
    assert set(GroupCoordinator(lake).describe(GROUP).members) == {second.consumer_group_metadata().member_id}
    second.unsubscribe()  # epoch -1: leaves for good
    assert GroupCoordinator(lake).describe(GROUP).members == {}
    second.close()
