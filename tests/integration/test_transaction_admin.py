"""Admin of transactions on real tables, like kafka-transactions.sh (S8.1), and the hanging transaction story."""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog import AdminClient, NewTopic, Producer
from lakelog.client.admin import transactions as admin
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import InvalidTxnState
from lakelog.log import BatchHeader, open_partition, payload_table
from lakelog.log.partition import wall_clock_ms
from lakelog.log.verification import _UNVERIFIED

pytestmark = pytest.mark.roots("local", "s3")

TOPIC = "events"


@pytest.fixture
def lake(root):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(TOPIC, num_partitions=2)])
    return root


def start_transaction(root, transactional_id="app", timeout_ms=60_000):
    p = Producer({"lakelog.root": root, "transactional.id": transactional_id, "transaction.timeout.ms": timeout_ms})
    p.init_transactions()
    p.begin_transaction()
    for partition in range(2):
        p.produce(TOPIC, value=f"{transactional_id}-{partition}", partition=partition)
    p.flush()
    return p


def test_S8_1_list_and_describe_transactions(lake):
    p = start_transaction(lake)
    listing = admin.list_transactions(lake)
    assert [(t.transactional_id, t.state) for t in listing] == [("app", "Ongoing")]
    described = admin.describe_transaction(lake, "app")
    assert described.state == "Ongoing" and described.topic_partitions == [(TOPIC, 0), (TOPIC, 1)]
    assert described.producer_id == p._producer_id and described.transaction_start_time_ms > 0
    p.commit_transaction()
    # Its markers are written; Complete* rides on the producer's next transaction (S4.5).
    assert admin.describe_transaction(lake, "app").state == "PrepareCommit"
    assert admin.describe_transaction(lake, "nobody") is None


def test_S8_1_describe_producers_shows_the_open_transaction_start(lake):
    p = start_transaction(lake)
    [state] = admin.describe_producers(lake, TOPIC, 0)
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (p._producer_id, p._producer_epoch, 0)
    assert state.current_transaction_start_offset == 0
    p.commit_transaction()
    [state] = admin.describe_producers(lake, TOPIC, 0)
    assert state.current_transaction_start_offset == -1
    assert state.producer_epoch == p._producer_epoch  # the marker's bumped epoch


def test_S8_1_hanging_transaction_held_the_lso_until_the_sweep(lake):
    """A producer dies mid-transaction: the LSO holds, find-hanging reports it once past its timeout,
    the sweep aborts it, the LSO moves on."""
    # A 60 s timeout, far longer than the test takes on any root; "past it" is a clock moved on.
    dead = start_transaction(lake)
    del dead
    log = open_partition(lake, TOPIC, 0)
    assert (log.last_stable_offset(), log.high_watermark()) == (0, 1)
    assert admin.find_hanging_transactions(lake) == []  # within its timeout: a live transaction
    later = wall_clock_ms() + 120_000
    found = admin.find_hanging_transactions(lake, now_ms=later)
    assert [(h.partition, h.start_offset, h.needs_admin_abort) for h in found] == [(0, 0, False), (1, 0, False)]
    assert "sweep" in found[0].reason
    with pytest.raises(InvalidTxnState):  # the coordinator still owns it: the admin may not abort it
        admin.abort_hanging_transaction(lake, TOPIC, 0, found[0].producer_id)
    assert TransactionCoordinator(lake, clock=lambda: later).sweep().aborted_timed_out == ["app"]
    log.refresh()
    assert log.last_stable_offset() == log.high_watermark() == 2
    assert admin.find_hanging_transactions(lake, now_ms=later) == []


def test_S8_1_uncovered_transaction_is_hanging_and_the_admin_aborts_it(lake):
    """Data of a transaction no coordinator knows is hanging; abort closes it. The partition refuses such a write
    (S4.4, tests/integration/test_transaction_verification.py): this one is written with verification bypassed,
    as data from before verification, or from a writer that went around it, would be."""
    log = open_partition(lake, TOPIC, 1)
    log.append(payload_table([b"stray"]), BatchHeader(4242, 3, 0, is_transactional=True), transaction=_UNVERIFIED)
    [found] = admin.find_hanging_transactions(lake)
    assert (found.partition, found.producer_id, found.producer_epoch, found.needs_admin_abort) == (1, 4242, 3, True)
    before = table_fingerprint(lake)
    with pytest.raises(InvalidTxnState):  # wrong producer id: nothing written (S8.3)
        admin.abort_hanging_transaction(lake, TOPIC, 1, 4243)
    assert table_fingerprint(lake) == before
    assert admin.abort_hanging_transaction(lake, TOPIC, 1, 4242) == 1
    log.refresh()
    assert log.last_stable_offset() == 2
    assert admin.find_hanging_transactions(lake) == []
    assert log.fetch(0, isolation_level="read_committed").rows.num_rows == 0


def test_S8_1_admin_client_transaction_methods(lake):
    from lakelog import TopicPartition
    from lakelog.errors import InvalidProducerIdMapping

    client = AdminClient({"lakelog.root": lake})
    p = start_transaction(lake)
    assert [t.state for t in client.list_transactions().result()] == ["Ongoing"]
    futures = client.describe_transactions(["app", "ghost"])
    assert futures["app"].result().topic_partitions == [(TOPIC, 0), (TOPIC, 1)]
    with pytest.raises(InvalidProducerIdMapping):
        futures["ghost"].result()
    tp = TopicPartition(TOPIC, 0)
    [state] = client.describe_producers([tp])[tp].result()
    assert state.producer_id == p._producer_id and state.current_transaction_start_offset == 0
    assert client.find_hanging_transactions().result() == []
    with pytest.raises(InvalidTxnState):
        client.abort_transaction(tp, p._producer_id).result()
