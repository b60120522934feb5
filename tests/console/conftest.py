"""A root with every state the console shows: committed, aborted, open and hanging transactions, and a lagging
read_committed group with no members."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from lakelog import Consumer, Producer, TopicPartition
from lakelog.log import BatchHeader, create_topic, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED

STRAY_PRODUCER = 77


@dataclass
class Scene:
    root: str
    open_producer: Producer

    def close(self) -> None:
        self.open_producer.close()


def transaction(root: str, transactional_id: str, records: list[tuple[int, str]], commit: bool) -> None:
    producer = Producer({"lakelog.root": root, "transactional.id": transactional_id})
    producer.init_transactions()
    producer.begin_transaction()
    for partition, value in records:
        producer.produce("orders", value=value, key=f"k-{value}", partition=partition, headers=[("source", b"test")])
    producer.flush()
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    producer.close()


def make_scene(root: str) -> Scene:
    create_topic(root, "orders", 2)
    create_topic(root, "pay", 1)
    transaction(root, "loader", [(0, '{"n": 1}'), (0, '{"n": 2}'), (0, '{"n": 3}')], commit=True)
    transaction(root, "loader", [(0, "dropped-1"), (0, "dropped-2")], commit=False)
    # A read_committed group that read the three committed records, then left: no members, its offset at 3.
    consumer = Consumer(
        {"lakelog.root": root, "group.id": "readers", "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["orders"])
    seen = 0
    for _ in range(50):
        seen += len([m for m in consumer.consume(10, timeout=0.2) if m.error() is None])
        if seen >= 3:
            break
    assert seen == 3
    # Both partitions committed (orders-1 is still empty): the group's offsets are 3 and 0.
    consumer.commit(offsets=[TopicPartition("orders", 0, 3), TopicPartition("orders", 1, 0)], asynchronous=False)
    consumer.close()
    # Two more committed records behind the group: its read_committed lag is 2, while LSO - committed is 7 (the
    # markers and the aborted records are offsets too, and no read_committed consumer is ever handed them).
    transaction(root, "loader", [(0, '{"n": 4}'), (0, '{"n": 5}')], commit=True)
    # A live transaction, open in orders-1.
    live = Producer({"lakelog.root": root, "transactional.id": "live", "transaction.timeout.ms": 600_000})
    live.init_transactions()
    live.begin_transaction()
    live.produce("orders", value="pending", partition=1)
    live.flush()
    # A hanging one: transactional data in pay-0 that no transactional id covers (only an admin abort closes it).
    log = open_partition(root, "pay", 0)
    log.append(payload_table([b"plain"]))
    log.append(payload_table([b"stray"]), BatchHeader(STRAY_PRODUCER, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    return Scene(root, live)


AMOUNT_SUITE = {
    "name": "amounts",
    "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "value.amount", "min_value": 0, "max_value": 100}}
    ],
    "meta": {},
}


def add_gated_topic(root: str) -> None:
    """A topic gated by a suite in enforce mode (S11.1): one batch passes, one is refused (Great Expectations runs)."""
    from lakelog.quality.suites import write_suite

    create_topic(root, "payments", 1)
    write_suite(root, "payments", json.dumps(AMOUNT_SUITE), mode="enforce")
    errors = []
    producer = Producer({"lakelog.root": root, "enable.idempotence": True})
    for amount in (5, -3):
        producer.produce("payments", value=json.dumps({"amount": amount}), on_delivery=lambda error, _: errors.append(error))
        producer.flush()
    producer.close()
    assert errors[0] is None and errors[1] is not None, errors


@pytest.fixture
def scene(tmp_path):
    found = make_scene(str(tmp_path / "root"))
    yield found
    found.close()


@pytest.fixture
def gated_scene(tmp_path):
    found = make_scene(str(tmp_path / "root"))
    add_gated_topic(found.root)
    yield found
    found.close()
