"""The round trips an operation waits for on object storage, counted (never timed) at a delaying proxy in front of
the S3 emulator (tests/round_trips.py), and for an idempotent produce in front of Azurite and fake-gcs-server too:
how many requests it makes, and how many of them were sent one after another (its depth). The bounds are what the
commit path does today (docs/decisions/commit-path.md); the goals are in bench/round_trips.py, which measures them
in time."""

from __future__ import annotations

import time

import pytest
from round_trips import DelayedStore, Trace

from lakelog import Consumer, Producer, TopicPartition
from lakelog.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.slow]

# Long enough that requests sent side by side overlap by more than the client takes to send them all, on a loaded
# machine too (the depth counts a request started after another ended, less half a delay).
DELAY_S = 0.1


@pytest.fixture
def delayed(s3):
    with DelayedStore(s3, DELAY_S) as store:
        yield store


# The emulator and root fixtures of each kind of object store (tests/conftest.py).
STORES = {"s3": ("s3", "s3_root"), "azure": ("azurite", "azure_root"), "gcs": ("fake_gcs", "gcs_root")}


@pytest.fixture
def delayed_root(request, root_kind: str):
    """The delaying proxy in front of the emulator of `root_kind`, and a fresh root on it."""
    emulator_fixture, root_fixture = STORES[root_kind]
    emulator = request.getfixturevalue(emulator_fixture)
    root = request.getfixturevalue(root_fixture)
    with DelayedStore(emulator, DELAY_S) as store:
        yield store, root


def settings(store: DelayedStore, root: str) -> dict[str, str]:
    """The root's settings with every request through the proxy."""
    if root.startswith("az://"):
        return {"lakelog.root": root, "lakelog.storage.blob_endpoint": store.emulator.blob_endpoint(store.proxy.endpoint_url)}
    if root.startswith("gs://"):
        return {"lakelog.root": root, "lakelog.storage.emulator_host": store.proxy.endpoint_url}
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
    # add is made, and the marker's file while the decision is; each commit's put waits for the one before it
    # (S4.4, S4.5): 3 + 2 + 3 + 2.
    assert one.depth <= 10, one.show()
    assert one.count <= 13, one.show()
    assert four.depth <= one.depth + 2, four.show()
    # Per added partition: its data file, its commit and its S9.5 read, for the batch and for the marker.
    assert four.count <= one.count + 3 * 2 * 3, four.show()
    producer.close()


@pytest.mark.roots("s3", "azure", "gcs")
def test_an_idempotent_produce_and_flush_is_one_commit(delayed_root):
    """An idempotent produce + flush is the read of the topic's quality suite (each batch is judged on the suite
    attached when it is sent, S11.1) beside the data file's PUT, then the commit's PUT and the S9.5 read after it:
    the same four requests on each store (tests/round_trips.py names Azure's and GCS's requests in S3's words)."""
    delayed, root = delayed_root
    config = settings(delayed, root)
    AdminClient(config).create_topics([NewTopic("t", 1)])["t"].result()
    producer = Producer(config)

    def produce() -> None:
        producer.produce("t", value=b"v", partition=0)
        producer.flush()

    for _ in range(2):
        produce()
    trace = traced(delayed, produce)
    assert trace.depth <= 3 and trace.count <= 4, trace.show()
    assert trace.mix == {"PUT": 2, "GET": 2}, trace.show()
    producer.close()


def test_an_idle_read_committed_consumer_looks_at_each_partition_once_per_long_poll(delayed, s3_root):
    """A consumer with nothing new looks at each partition's log (a GET of the next version and a GET of its own) at
    most once per fetch.wait.max.ms, Kafka's long poll, once its first shorter waits have passed; a commit made
    while it idles still reaches it. Without the long poll it looked at every partition twice per 50 ms."""
    config = settings(delayed, s3_root)
    AdminClient(config).create_topics([NewTopic("idle", 4)])["idle"].result()
    delayed.set_delay(0.0)
    wait_s = 0.4
    consumer = Consumer(
        {**config, "group.id": "idle", "isolation.level": "read_committed", "fetch.wait.max.ms": int(wait_s * 1000)}
    )
    consumer.assign([TopicPartition("idle", partition, -1) for partition in range(4)])
    settled = time.monotonic() + 2 * wait_s + 0.5
    while time.monotonic() < settled:
        assert consumer.poll(0.05) is None
    with delayed.traced() as traces:
        started = time.monotonic()
        while time.monotonic() - started < 5 * wait_s:
            assert consumer.poll(0.1) is None
        elapsed = time.monotonic() - started
    looks = 4 * (elapsed / wait_s + 1)
    assert traces[0].count <= 2 * looks, traces[0].show()
    producer = Producer(config)
    producer.produce("idle", value=b"late", partition=2)
    producer.flush()
    message = consumer.poll(30)
    assert message is not None and message.value() == b"late"
    consumer.close()
    producer.close()


@pytest.mark.roots("s3", "azure", "gcs")
def test_S5_2_a_plan_made_again_costs_two_gets_per_partition(delayed_root):
    """A scan plan opens each partition cold once per process (its log, the listing that proves its end, its
    transaction index); made again, it refreshes the kept handles: one GET of the next commit, one GET of the one
    in hand (still there, and still this table's: S12.3), per partition, and nothing of what it read before."""
    from lakelog.log import plan_handles
    from lakelog.log.scan import plan_scan

    delayed, root = delayed_root
    config = settings(delayed, root)
    AdminClient(config).create_topics([NewTopic("planned", 3)])["planned"].result()
    producer = Producer(config)
    for partition in range(3):
        producer.produce("planned", value=b"v", partition=partition)
    producer.flush()
    delayed.set_delay(0.0)  # counts only: no need to wait
    plan_handles.forget()
    with delayed.exported():  # the root's settings from the environment: the proxy's
        cold = traced(delayed, lambda: plan_scan(root, "planned"))
        again = traced(delayed, lambda: plan_scan(root, "planned"))
    assert cold.count >= 3 * 5, cold.show()
    assert again.count == 3 * 2 and again.mix == {"GET": 6}, again.show()
