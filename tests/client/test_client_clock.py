"""Clients take a clock (issue 12.6): a Producer's, a Consumer's and an AdminClient's timers and the timeout
decisions of the coordinators they call read the one `clock=` they are given, so nothing here sleeps
(S4.7 transaction timeout, S6.5 session timeout, S8.1 hanging transactions).
"""

from __future__ import annotations

import pytest
from helpers import FakeClock

from lakelog import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import KafkaException
from lakelog.log import open_partition

TIMEOUT_MS = 60_000


@pytest.fixture
def orders(lake) -> str:
    AdminClient({"lakelog.root": lake}).create_topics([NewTopic("orders", num_partitions=1)])
    return "orders"


def test_producer_lingers_and_stamps_messages_on_its_clock(lake, orders):
    clock = FakeClock()
    producer = Producer({"lakelog.root": lake, "linger.ms": 1_000}, clock=clock)
    producer.produce(orders, "a")
    clock.advance(999)
    producer.poll(0)
    assert open_partition(lake, orders, 0).log_end_offset() == 0  # lingering: 1 ms to go on its clock
    clock.advance(1)
    producer.poll(0)
    assert open_partition(lake, orders, 0).log_end_offset() == 1
    with Consumer({"lakelog.root": lake}) as consumer:
        consumer.assign([TopicPartition(orders, 0, 0)])
        [message] = consumer.consume(1, 10.0)
    assert message.timestamp()[1] == clock() - 1_000


def test_S4_7_S8_1_a_transaction_times_out_on_its_producers_clock(lake, orders):
    """The producer's coordinator stamps the transaction's start on the producer's clock: an admin on that
    clock reports it hanging, and a sweep on it aborts it, once past transaction.timeout.ms; the zombie
    producer is fenced (S4.1)."""
    clock = FakeClock()
    producer = Producer({"lakelog.root": lake, "transactional.id": "t", "transaction.timeout.ms": TIMEOUT_MS}, clock=clock)
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(orders, "open")
    producer.flush()
    admin = AdminClient({"lakelog.root": lake}, clock=clock)
    sweeper = TransactionCoordinator(lake, clock=clock)
    clock.advance(TIMEOUT_MS - 1)
    assert admin.find_hanging_transactions().result() == []
    clock.advance(1)
    # At its timeout, not past it: neither reported nor aborted (the admin and the sweep agree to the ms).
    assert admin.find_hanging_transactions().result() == []
    assert sweeper.sweep().aborted_timed_out == []
    clock.advance(1)
    [hanging] = admin.find_hanging_transactions().result()
    assert (hanging.topic, hanging.partition, hanging.needs_admin_abort) == (orders, 0, False)
    assert sweeper.sweep().aborted_timed_out == ["t"]
    with pytest.raises(KafkaException) as fenced:
        producer.commit_transaction()
    assert fenced.value.args[0].fatal()
    log = open_partition(lake, orders, 0)
    assert log.last_stable_offset() == log.high_watermark() == 2
