"""A consumer group of two members through a rebalance (KIP-848, group.protocol=consumer), one program on Kafka and
on lakelog: assignments, revocation callbacks, what each member reads, incremental assign and unassign in and outside
the callbacks, and their errors (S6.2, S6.3)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .harness import System, compare, raised

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("kafka-broker")]

PARTITIONS = 4


def poll_until(consumers: list[Any], done: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the group did not settle"
        for consumer in consumers:
            consumer.poll(0.1)


def two_members(system: System) -> dict[str, Any]:
    topic = system.create_topic("group", partitions=PARTITIONS)
    producer = system.Producer(system.conf())
    for partition in range(PARTITIONS):
        producer.produce(topic, value=f"p{partition}".encode(), partition=partition)
    producer.flush(30)
    group = system.group("two")
    events: dict[str, list[tuple[str, list[int]]]] = {"a": [], "b": [], "callback errors": []}  # type: ignore[dict-item]
    owned: dict[str, set[int]] = {"a": set(), "b": set()}

    def callbacks(name: str) -> dict[str, Any]:
        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            numbers = sorted(p.partition for p in partitions)
            events[name].append(("assign", numbers))
            owned[name].update(numbers)
            if partitions:
                # Inside the callback, an assign of what is being assigned is the member's own: then one already
                # assigned is a conflict, and an unassign of one it does not own is refused.
                consumer.incremental_assign(partitions)
                events["callback errors"].append(("assign again", [raised(lambda: consumer.incremental_assign(partitions[:1]))]))

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            numbers = sorted(p.partition for p in partitions)
            events[name].append(("revoke", numbers))
            owned[name].difference_update(numbers)
            if partitions:
                consumer.incremental_unassign(partitions)

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    conf = system.conf(group_id=group, group_protocol="consumer", auto_offset_reset="earliest", enable_auto_commit=False)
    a = system.Consumer(conf)
    a.subscribe([topic], **callbacks("a"))
    read: dict[str, list[bytes]] = {"a": [], "b": []}
    poll_until([a], lambda: len(owned["a"]) == PARTITIONS)
    b = system.Consumer(conf)
    b.subscribe([topic], **callbacks("b"))
    deadline = time.monotonic() + 30
    while not (owned["a"] and owned["b"] and len(owned["a"] | owned["b"]) == PARTITIONS and not owned["a"] & owned["b"]):
        assert time.monotonic() < deadline, f"the group did not settle: {owned}"
        for name, consumer in (("a", a), ("b", b)):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read[name].append(message.value())
    observed: dict[str, Any] = {
        "a's events": [(kind, len(numbers)) for kind, numbers in events["a"]],
        "b's events": [(kind, len(numbers)) for kind, numbers in events["b"]],
        "a's revoked were a's": set(events["a"][1][1]) <= set(range(PARTITIONS)) if len(events["a"]) > 1 else None,
        "b got what a gave up": sorted(owned["b"]) == events["a"][1][1] if len(events["a"]) > 1 else None,
        "assignments": (len(a.assignment()), len(b.assignment())),
        "callback errors": events["callback errors"],
        "outside a callback": system.accepted(
            "manual-assign-while-subscribed",
            raised(lambda: b.incremental_assign([system.TopicPartition(topic, sorted(owned["a"])[0])])),
            kafka=None,
            lakelog={"code": "_STATE", "retriable": False, "fatal": False, "txn_requires_abort": False},
        ),
    }
    b.close()
    poll_until([a], lambda: len(owned["a"]) == PARTITIONS)
    observed["a after b left"] = [(kind, len(numbers)) for kind, numbers in events["a"][2:]]
    a.close()
    return observed


def test_two_members_through_a_rebalance(systems: tuple[System, System]) -> None:
    compare(two_members, *systems)


def rejoin_after_max_poll(system: System) -> dict[str, Any]:
    topic = system.create_topic("max-poll")
    conf = system.conf(group_id=system.group("max-poll"), group_protocol="consumer", max_poll_interval_ms=1000)
    consumer = system.Consumer(conf)
    created = consumer.memberid()
    consumer.subscribe([topic])
    poll_until([consumer], lambda: bool(consumer.assignment()))
    joined = consumer.memberid()
    time.sleep(1.5)  # no poll for longer than max.poll.interval.ms
    message = consumer.poll(1)
    event = None if message is None or message.error() is None else message.error().code() == system.KafkaError._MAX_POLL_EXCEEDED
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (consumer.assignment() and time.monotonic() > deadline - 18):
        consumer.poll(0.2)
    observed = {
        "_MAX_POLL_EXCEEDED": event,
        "assigned again": len(consumer.assignment()),
        "the same member id throughout": created == joined == consumer.memberid(),
    }
    consumer.close()
    return observed


def test_a_member_rejoins_under_its_own_id_after_max_poll_interval(systems: tuple[System, System]) -> None:
    compare(rejoin_after_max_poll, *systems)
