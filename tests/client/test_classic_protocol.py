"""The classic group protocol as a client-side mode over the one group coordinator (S6): `group.protocol`,
`partition.assignment.strategy`, eager and cooperative rebalances, and the broker's timers run by the clients
(S6.5 session timeouts, S4.7 transaction timeouts) with no sweep."""

from __future__ import annotations

import time

import pytest
from helpers import FakeClock, table_fingerprint

from lakelog import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from lakelog.client.consumer.protocol import GroupProtocol
from lakelog.coordinator.group import Heartbeat
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.coordinator.transaction.state import TxnState
from lakelog.errors import InvalidConfig, UnknownMemberId

pytestmark = pytest.mark.roots("local")

FAST = {"heartbeat.interval.ms": 50, "auto.offset.reset": "earliest", "enable.auto.commit": False}


def member(root: str, clock=None, **conf) -> Consumer:
    extra = {} if clock is None else {"clock": clock}
    return Consumer({"lakelog.root": root, "group.id": "g", **FAST, **conf}, **extra)


def poll_until(consumers: list[Consumer], done, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        for consumer in consumers:
            consumer.consume(10, 0.02)


def test_group_protocol_defaults_keep_the_consumer_protocol_unless_the_program_names_a_classic_assignor():
    from lakelog import config

    def protocol(**conf) -> GroupProtocol:
        return GroupProtocol.from_config(config.load("consumer", conf))

    assert protocol() == GroupProtocol("consumer", False, "")
    assert protocol(**{"partition.assignment.strategy": "range"}) == GroupProtocol("classic", True, "range")
    assert protocol(**{"group.protocol": "classic"}) == GroupProtocol("classic", True, "range")  # range,roundrobin
    assert protocol(**{"partition.assignment.strategy": "roundrobin,range"}).assignor == "roundrobin"
    assert protocol(**{"partition.assignment.strategy": "cooperative-sticky"}) == GroupProtocol(
        "classic", False, "cooperative-sticky"
    )
    assert protocol(**{"group.protocol": "consumer", "group.remote.assignor": "range"}) == GroupProtocol(
        "consumer", False, "range"
    )
    for bad in ("sticky", "range,cooperative-sticky"):
        with pytest.raises(InvalidConfig, match="partition.assignment.strategy"):
            config.load("consumer", {"partition.assignment.strategy": bad})


def test_S6_2_classic_memberid_is_none_until_joined_and_the_rebalance_is_eager(root, topic):
    events = topic(name="events", partitions=4)
    calls: list[tuple[str, str, list[int]]] = []

    def callbacks(name: str):
        def on_assign(c, partitions):
            calls.append((name, "assign", sorted(p.partition for p in partitions)))
            c.assign(partitions)  # takes the assignment, as a classic program does

        def on_revoke(c, partitions):
            calls.append((name, "revoke", sorted(p.partition for p in partitions)))
            c.unassign()

        return on_assign, on_revoke

    first = member(root, **{"partition.assignment.strategy": "range"})
    assert first.memberid() is None
    on_assign, on_revoke = callbacks("first")
    first.subscribe([events], on_assign=on_assign, on_revoke=on_revoke)
    poll_until([first], lambda: len(first.assignment()) == 4)
    assert first.memberid() is not None
    assert calls == [("first", "assign", [0, 1, 2, 3])]

    second = member(root, **{"partition.assignment.strategy": "range"})
    on_assign, on_revoke = callbacks("second")
    second.subscribe([events], on_assign=on_assign, on_revoke=on_revoke)
    poll_until([first, second], lambda: len(first.assignment()) == len(second.assignment()) == 2)
    # Eager: every partition revoked, then the whole new assignment given (range: the first two to one member).
    assert ("first", "revoke", [0, 1, 2, 3]) in calls
    assert calls[-1][1] == "assign" and {tuple(c[2]) for c in calls[-2:] if c[1] == "assign"} <= {(0, 1), (2, 3)}
    owned = {p.partition for p in first.assignment()} | {p.partition for p in second.assignment()}
    assert owned == {0, 1, 2, 3}
    for consumer in (first, second):
        consumer.close()


def test_S6_2_each_protocol_takes_the_assignment_calls_librdkafka_allows_in_its_callbacks(root, topic):
    events = topic(name="events", partitions=2)
    errors: list[str] = []

    def wrong_call(kind: str):
        def on_assign(c, partitions):
            try:
                if kind == "eager":
                    c.incremental_assign(partitions)
                else:
                    c.assign(partitions)
            except KafkaException as error:
                assert error.args[0].code() == KafkaError._STATE
                errors.append(kind)

        return on_assign

    eager = member(root, **{"partition.assignment.strategy": "range"})
    eager.subscribe([events], on_assign=wrong_call("eager"))
    cooperative = Consumer(
        {"lakelog.root": root, "group.id": "other", **FAST, "partition.assignment.strategy": "cooperative-sticky"}
    )
    cooperative.subscribe([events], on_assign=wrong_call("cooperative"))
    poll_until([eager, cooperative], lambda: len(eager.assignment()) == len(cooperative.assignment()) == 2)
    assert sorted(errors) == ["cooperative", "eager"]  # refused, and the client took the assignment itself
    with pytest.raises(KafkaException):
        eager.assign([TopicPartition(events, 0)])  # outside the callbacks the group assigns
    for consumer in (eager, cooperative):
        consumer.close()


def test_S6_5_a_joining_member_expires_the_members_past_their_session_timeout_with_no_sweep(root, topic):
    events = topic(name="events", partitions=2)
    clock = FakeClock()
    dead = member(root, clock, **{"session.timeout.ms": 1000})
    dead.subscribe([events])
    poll_until([dead], lambda: len(dead.assignment()) == 2)
    dead_id = dead.memberid()  # it stops here, without leaving: a SIGKILL
    joiner = member(root, clock, **{"session.timeout.ms": 1000})
    joiner.subscribe([events])
    poll_until([joiner], lambda: GroupCoordinator(root).describe("g").members.keys() >= {joiner.memberid()})
    assert dead_id in GroupCoordinator(root).describe("g").members  # within its session: it keeps its partitions
    clock.advance(1001)
    poll_until([joiner], lambda: len(joiner.assignment()) == 2)
    assert dead_id not in GroupCoordinator(root).describe("g").members
    coordinator = GroupCoordinator(root, clock=clock)
    before = table_fingerprint(root)
    with pytest.raises(UnknownMemberId):  # the expired member is fenced; the refusal writes nothing (S8.3)
        coordinator.heartbeat(Heartbeat("g", dead_id, 1, (events,), frozenset()))
    assert table_fingerprint(root) == before
    joiner.close()


def test_S4_7_a_read_committed_consumer_held_by_a_timed_out_transaction_aborts_it_with_no_sweep(root, topic):
    events = topic(name="events")
    clock = FakeClock()
    zombie = Producer({"lakelog.root": root, "transactional.id": "zombie", "transaction.timeout.ms": 5000}, clock=clock)
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.produce(events, value="never")
    zombie.flush()
    plain = Producer({"lakelog.root": root})
    plain.produce(events, value="after")  # behind the open transaction
    plain.flush()
    reader = Consumer({"lakelog.root": root, "auto.offset.reset": "earliest"}, clock=clock)
    reader.assign([TopicPartition(events, 0, 0)])
    assert reader.consume(10, 0.2) == []  # held at the LSO, within the timeout: nothing is aborted
    assert TransactionCoordinator(root).describe("zombie").state is TxnState.ONGOING
    clock.advance(5001)
    got: list = []
    deadline = time.monotonic() + 20
    while not got:
        assert time.monotonic() < deadline
        got = [m.value() for m in reader.consume(10, 0.2) if m.error() is None]
    assert got == [b"after"]
    assert TransactionCoordinator(root).describe("zombie").state is TxnState.COMPLETE_ABORT
    with pytest.raises(KafkaException):  # fenced by the abort's epoch bump, as the sweep fences it
        zombie.commit_transaction()
    reader.close()
