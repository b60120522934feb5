"""The Consumer, one program on Kafka and on lakelog: incremental assign/unassign and their errors, committed offsets'
metadata, consume()'s batch sizes, memberid() before the first poll (KIP-848 with KIP-1082)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .harness import System, compare, raised

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("kafka-broker")]


def incremental_assignment(system: System) -> dict[str, Any]:
    topic = system.create_topic("incr", partitions=3)
    tp = system.TopicPartition
    consumer = system.Consumer(system.conf(group_id=system.group("incr")))
    observed: dict[str, Any] = {}
    consumer.incremental_assign([tp(topic, 0), tp(topic, 1)])
    observed["assign an assigned one"] = raised(lambda: consumer.incremental_assign([tp(topic, 2), tp(topic, 1)]))
    observed["after"] = sorted(p.partition for p in consumer.assignment())
    observed["assign one twice"] = raised(lambda: consumer.incremental_assign([tp(topic, 2), tp(topic, 2)]))
    observed["unassign an unassigned one"] = raised(lambda: consumer.incremental_unassign([tp(topic, 0), tp(topic, 2)]))
    observed["after unassign refused"] = sorted(p.partition for p in consumer.assignment())
    consumer.incremental_unassign([tp(topic, 0)])
    observed["after unassign"] = sorted(p.partition for p in consumer.assignment())
    consumer.close()
    return observed


def test_incremental_assign_and_unassign_errors(systems: tuple[System, System]) -> None:
    compare(incremental_assignment, *systems)


def committed_metadata(system: System) -> list[Any]:
    topic = system.create_topic("meta", partitions=3)
    tp = system.TopicPartition
    consumer = system.Consumer(system.conf(group_id=system.group("meta"), enable_auto_commit=False))
    consumer.commit(offsets=[tp(topic, 0, 1, metadata=""), tp(topic, 1, 2, metadata="m"), tp(topic, 2, 3)], asynchronous=False)
    committed = consumer.committed([tp(topic, 0), tp(topic, 1), tp(topic, 2)], 10)
    consumer.close()
    return [(c.partition, c.offset, c.metadata) for c in committed]


def test_committed_metadata_comes_back_as_committed(systems: tuple[System, System]) -> None:
    compare(committed_metadata, *systems)


def consume_sizes(system: System) -> dict[str, Any]:
    topic = system.create_topic("sizes")
    producer = system.Producer(system.conf())
    for n in range(3):
        producer.produce(topic, value=f"v{n}".encode())
    producer.flush(30)
    consumer = system.Consumer(system.conf(group_id=system.group("sizes"), auto_offset_reset="earliest"))
    consumer.assign([system.TopicPartition(topic, 0, system.OFFSET_BEGINNING)])
    started = time.monotonic()
    zero = consumer.consume(0, 5)
    observed: dict[str, Any] = {"zero": zero, "zero's type": type(zero).__name__, "at once": time.monotonic() - started < 1}
    for bad in (-1, 1_000_001):
        try:
            consumer.consume(bad, 1)
        except ValueError as error:
            observed[f"consume({bad})"] = str(error)
    got: list[bytes] = []
    while len(got) < 3:
        batch = consumer.consume(3, 10)
        observed.setdefault("batch type", type(batch).__name__)
        got += [m.value() for m in batch]
    observed["values"] = got
    observed["exports Messages"] = hasattr(system.package, "Messages")
    consumer.close()
    return observed


def test_consume_batch_sizes(systems: tuple[System, System]) -> None:
    compare(consume_sizes, *systems)


def member_id_before_first_poll(system: System) -> dict[str, Any]:
    topic = system.create_topic("member")
    consumer = system.Consumer(system.conf(group_id=system.group("member"), group_protocol="consumer"))
    before_subscribe = consumer.memberid()
    consumer.subscribe([topic])
    before_poll = consumer.memberid()
    while not consumer.assignment():
        consumer.poll(0.2)
    after_join = consumer.memberid()
    consumer.close()
    return {
        "before subscribe is a member id": isinstance(before_subscribe, str) and len(before_subscribe) > 0,
        "kept through subscribe and join": before_subscribe == before_poll == after_join,
    }


def test_member_id_is_made_by_the_client(systems: tuple[System, System]) -> None:
    compare(member_id_before_first_poll, *systems)


def group_offsets_by_admin(system: System) -> dict[str, Any]:
    topic = system.create_topic("admin-offsets", partitions=3)
    tp = system.TopicPartition
    group = system.group("admin-offsets")
    consumer = system.Consumer(system.conf(group_id=group, enable_auto_commit=False))
    consumer.commit(offsets=[tp(topic, 0, 1, metadata=""), tp(topic, 1, 2, metadata="m"), tp(topic, 2, 3)], asynchronous=False)
    consumer.close()
    admin = system.admin()
    request = system.ConsumerGroupTopicPartitions(group, [tp(topic, p) for p in range(3)])
    listed = next(iter(admin.list_consumer_group_offsets([request]).values())).result(30)
    observed = {"listed": sorted((p.partition, p.offset, p.metadata) for p in listed.topic_partitions)}
    altered = system.ConsumerGroupTopicPartitions(group, [tp(topic, 0, 5, metadata="x"), tp(topic, 1, 6)])
    next(iter(admin.alter_consumer_group_offsets([altered]).values())).result(30)
    listed = next(iter(admin.list_consumer_group_offsets([request]).values())).result(30)
    observed["after alter"] = sorted((p.partition, p.offset, p.metadata) for p in listed.topic_partitions)
    return observed


def test_group_offsets_through_the_admin_client(systems: tuple[System, System]) -> None:
    compare(group_offsets_by_admin, *systems)


def offsets_by_time(system: System) -> list[Any]:
    topic = system.create_topic("times", partitions=2)
    producer = system.Producer(system.conf())
    base = 1_700_000_000_000
    for n in range(6):
        producer.produce(topic, value=f"v{n}".encode(), partition=n % 2, timestamp=base + n * 1000)
    producer.flush(30)
    consumer = system.Consumer(system.conf(group_id=system.group("times")))
    tp = system.TopicPartition
    asked = [tp(topic, 0, base - 1), tp(topic, 0, base + 2000), tp(topic, 1, base + 2500), tp(topic, 1, base + 99_000)]
    found = [consumer.offsets_for_times([one], 10)[0] for one in asked]
    consumer.assign(consumer.offsets_for_times([tp(topic, 1, base + 2500)], 10))
    message = consumer.poll(10)
    consumer.close()
    return [(f.partition, f.offset) for f in found] + [(message.offset(), message.value(), message.timestamp())]


def test_offsets_for_times(systems: tuple[System, System]) -> None:
    compare(offsets_by_time, *systems)
