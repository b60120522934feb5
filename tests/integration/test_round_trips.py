"""The round trips an operation waits for on object storage, counted (never timed) at a delaying proxy in front of
the S3 emulator (tests/round_trips.py): how many requests it makes, and how many of them were sent one after
another (its depth). The bounds are what the commit path does today (docs/decisions/commit-path.md); the goals
are in bench/round_trips.py, which measures them in time.
"""

from __future__ import annotations

import pytest
from round_trips import DelayedStore, Trace

from lakelog import Producer
from lakelog.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.slow]

# Long enough that requests sent side by side overlap by more than the client takes to send them all, on a loaded
# machine too (the depth counts a request started after another ended, less half a delay).
DELAY_S = 0.1


@pytest.fixture
def delayed(s3):
    with DelayedStore(s3, DELAY_S) as store:
        yield store


def settings(store: DelayedStore, root: str) -> dict[str, str]:
    return {
        "lakelog.root": root,
        "lakelog.storage.endpoint_url": store.proxy.endpoint_url,
        "lakelog.storage.allow_http": "true",
        "lakelog.storage.region": "us-east-1",
    }


def traced(store: DelayedStore, call) -> Trace:
    with store.traced() as traces:
        call()
    return traces[0]


def test_a_transaction_waits_for_its_partitions_side_by_side(delayed, s3_root):
    """A transaction over 4 partitions adds them in one commit and appends to them side by side: it waits for no
    more round trips than one over a single partition, plus one (S4.4: verified by its own add, not read again)."""
    config = settings(delayed, s3_root)
    admin = AdminClient(config)
    for future in admin.create_topics([NewTopic("one", 1), NewTopic("four", 4)]).values():
        future.result()
    producer = Producer({**config, "transactional.id": "round-trips"})
    producer.init_transactions()

    def transaction(topic: str, partitions: int):
        def call() -> None:
            producer.begin_transaction()
            for partition in range(partitions):
                producer.produce(topic, value=b"v", partition=partition)
            producer.commit_transaction()

        return call

    for _ in range(2):  # handles opened, the first transaction's completion folded into the next add
        transaction("one", 1)()
        transaction("four", 4)()
    one = traced(delayed, transaction("one", 1))
    four = traced(delayed, transaction("four", 4))
    # The add, the append, the decision and the marker: each commit is its data file's PUT, the commit's PUT and
    # the S9.5 read of the version before it; the topic's suite is read and the append's file written while the
    # add is made, and the append's commit waits for the add (S4.4): 3 + 2 + 3 + 3.
    assert one.depth <= 11, one.show()
    assert one.count <= 13, one.show()
    assert four.depth <= one.depth + 2, four.show()
    # Per added partition: its data file, its commit and its S9.5 read, for the batch and for the marker.
    assert four.count <= one.count + 3 * 2 * 3, four.show()
    producer.close()


def test_an_idempotent_produce_and_flush_is_one_commit(delayed, s3_root):
    """An idempotent produce + flush is the read of the topic's quality suite (each batch is judged on the suite
    attached when it is sent, S11.1), the data file's PUT, the commit's PUT and the S9.5 read after it."""
    config = settings(delayed, s3_root)
    AdminClient(config).create_topics([NewTopic("t", 1)])["t"].result()
    producer = Producer(config)

    def produce() -> None:
        producer.produce("t", value=b"v", partition=0)
        producer.flush()

    for _ in range(2):
        produce()
    trace = traced(delayed, produce)
    assert trace.depth <= 4 and trace.count <= 4, trace.show()
    assert trace.mix == {"PUT": 2, "GET": 2}, trace.show()
    producer.close()
