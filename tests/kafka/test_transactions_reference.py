"""Transactions, one program on Kafka and on lakelog (S4, S5): committed, aborted and open transactions as
read_committed and read_uncommitted readers see them (the LSO is where read_committed's end is reported); zombie
fencing by a second init_transactions; send_offsets_to_transaction, then committed()."""

from __future__ import annotations

from typing import Any

import pytest

from .harness import System, compare, error_of, raised, read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("kafka-broker")]


FATAL = {"retriable": False, "fatal": True, "txn_requires_abort": False}


def transactional(system: System, name: str, **extra: Any) -> Any:
    producer = system.Producer(system.conf(transactional_id=system.txn_id(name), **extra))
    producer.init_transactions(30)
    return producer


def committed_aborted_open(system: System) -> dict[str, Any]:
    topic = system.create_topic("txn", partitions=2)
    producer = transactional(system, "writer")
    producer.begin_transaction()
    producer.produce(topic, key=b"k1", value=b"committed-1", partition=0, headers=[("h", b"1")])
    producer.produce(topic, key=b"k2", value=b"committed-2", partition=1)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k3", value=b"aborted", partition=0)
    producer.flush(30)  # written before the abort (librdkafka sends within linger.ms; lakelog when flushed)
    producer.abort_transaction(30)
    observed: dict[str, Any] = {"produce outside a transaction": raised(lambda: producer.produce(topic, value=b"outside"))}
    producer.begin_transaction()
    producer.produce(topic, key=b"k4", value=b"open", partition=0)
    producer.flush(30)
    observed["open: read_committed"] = read_topic(system, topic, 2, "read_committed")
    observed["open: read_uncommitted"] = read_topic(system, topic, 2, "read_uncommitted")
    producer.commit_transaction(30)
    observed["after commit: read_committed"] = read_topic(system, topic, 2, "read_committed")
    consumer = system.Consumer(system.conf(group_id=system.group("wm")))
    observed["watermarks"] = [consumer.get_watermark_offsets(system.TopicPartition(topic, p), 10) for p in range(2)]
    consumer.close()
    return observed


def test_committed_aborted_and_open_transactions(systems: tuple[System, System]) -> None:
    compare(committed_aborted_open, *systems)


def produce_outside_transaction(system: System) -> dict[str, Any]:
    topic = system.create_topic("outside")
    producer = transactional(system, "outside")
    return {"produce": raised(lambda: producer.produce(topic, value=b"x"))}


def test_produce_outside_a_transaction(systems: tuple[System, System]) -> None:
    compare(produce_outside_transaction, *systems)


def zombie_fencing(system: System) -> dict[str, Any]:
    topic = system.create_topic("zombie")
    txn_id = system.txn_id("zombie")
    zombie = system.Producer(system.conf(transactional_id=txn_id))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(30)
    successor = system.Producer(system.conf(transactional_id=txn_id))
    successor.init_transactions(30)  # aborts the zombie's open transaction and fences it
    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=0)
    successor.commit_transaction(30)
    reports: list[Any] = []
    observed = {
        "zombie produce": raised(
            lambda: zombie.produce(topic, value=b"late", partition=0, on_delivery=lambda e, m: reports.append(error_of(e)))
        ),
    }
    fenced = raised(lambda: zombie.commit_transaction(30))
    zombie.flush(10)  # the late message's report
    fenced_report = {"code": "INVALID_PRODUCER_EPOCH", "retriable": False, "fatal": False, "txn_requires_abort": False}
    observed["zombie commit, its late message's report"] = system.accepted(
        "fenced-code",
        (fenced, reports),
        kafka=({**FATAL, "code": "_FENCED"}, [fenced_report]),
        lakelog=({**FATAL, "code": "PRODUCER_FENCED"}, [{**FATAL, "code": "PRODUCER_FENCED"}]),
    )
    observed["read_committed"] = read_topic(system, topic, 1)
    return observed


def test_zombie_fencing(systems: tuple[System, System]) -> None:
    compare(zombie_fencing, *systems)


def offsets_in_transaction(system: System) -> dict[str, Any]:
    source = system.create_topic("eos-in")
    sink = system.create_topic("eos-out")
    loader = system.Producer(system.conf())
    for n in range(4):
        loader.produce(source, value=f"v{n}".encode(), partition=0)
    loader.flush(30)
    group = system.group("eos")
    consumer = system.Consumer(system.conf(group_id=group, enable_auto_commit=False, isolation_level="read_committed"))
    consumer.assign([system.TopicPartition(source, 0, system.OFFSET_BEGINNING)])
    producer = transactional(system, "eos")
    observed: dict[str, Any] = {}
    for outcome in ("commit", "abort"):
        taken = [consumer.poll(10) for _ in range(2)]
        producer.begin_transaction()
        for message in taken:
            producer.produce(sink, value=message.value(), partition=0)
        producer.flush(30)  # written before the commit or abort, on both (see committed_aborted_open)
        position = consumer.position([system.TopicPartition(source, 0)])
        producer.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), 30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        committed = consumer.committed([system.TopicPartition(source, 0)], 10)
        observed[outcome] = [(tp.topic == source, tp.partition, tp.offset, tp.metadata) for tp in committed]
    observed["sink"] = read_topic(system, sink, 1)
    consumer.close()
    return observed


def test_send_offsets_to_transaction_then_committed(systems: tuple[System, System]) -> None:
    compare(offsets_in_transaction, *systems)


def consume_transform_produce(system: System) -> dict[str, Any]:
    """The exactly-once loop of confluent-kafka's eos_transactions.py over two partitions in and two out, with the
    consumer in a group: a committed round, an aborted one (its input read again), a committed one."""
    source = system.create_topic("loop-in", partitions=2)
    sink = system.create_topic("loop-out", partitions=2)
    loader = system.Producer(system.conf())

    def load(first: int) -> None:
        # Two records per partition: a round takes all four, so which partition a consumer serves first (no
        # contract: order is per partition) decides nothing.
        for n in range(first, first + 4):
            loader.produce(source, key=f"k{n}".encode(), value=f"v{n}".encode(), partition=n % 2)
        loader.flush(30)

    group = system.group("loop")
    consumer = system.Consumer(
        system.conf(group_id=group, group_protocol="consumer", enable_auto_commit=False, auto_offset_reset="earliest")
    )
    consumer.subscribe([source])
    producer = transactional(system, "loop")
    observed: dict[str, Any] = {}
    for round_, outcome in enumerate(("commit", "abort", "commit")):
        if round_ < 2:
            load(4 * round_)
        taken: list[Any] = []
        while len(taken) < 4:
            taken += [m for m in consumer.consume(4 - len(taken), 1) if m.error() is None]
        producer.begin_transaction()
        for message in taken:
            producer.produce(sink, key=message.key(), value=message.value().upper(), partition=message.partition())
        producer.flush(30)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
            # Back to what the group committed: the aborted round's input is read again.
            for committed in consumer.committed(consumer.assignment(), 10):
                consumer.seek(committed)
        observed[f"round {round_} ({outcome}) read"] = sorted((m.partition(), m.offset(), m.value()) for m in taken)
    observed["committed"] = sorted((c.partition, c.offset) for c in consumer.committed(consumer.assignment(), 10))
    consumer.close()
    observed["sink"] = read_topic(system, sink, 2)
    return observed


def test_consume_transform_produce_in_a_group(systems: tuple[System, System]) -> None:
    compare(consume_transform_produce, *systems)
