"""The Producer's lifecycle and unknown topics as confluent-kafka has them (issue 14, gaps 2 and 4).

Each test drives one call through confluent-kafka's semantics (its Producer.c and tests/test_Producer.py):
`close()` and the context manager, truthiness, `poll(timeout)` that waits instead of spinning, `purge()`,
`produce_batch()`, and a message for a topic the root does not hold, reported through the delivery callback.
"""

from __future__ import annotations

import shutil
import time
from importlib import resources

import pytest
from helpers import FakeClock, folder_listing, table_fingerprint

from lakelog import KafkaError, Producer
from lakelog.client.producer import producer as producer_module
from lakelog.client.producer.producer import POLL_STEP_S
from lakelog.errors import KafkaException
from lakelog.log import READ_COMMITTED, open_partition

NEVER_LINGER_MS = 900_000
CLOSED = "Producer has been closed"


def producer(root: str, **conf) -> Producer:
    return Producer({"lakelog.root": root, "allow.auto.create.topics": False, **conf})


def leo(root: str, topic: str, partition: int = 0) -> int:
    return open_partition(root, topic, partition).log_end_offset()


def committed_values(root: str, topic: str, partition: int = 0) -> list[bytes]:
    log = open_partition(root, topic, partition)
    return log.fetch(log.log_start_offset(), isolation_level=READ_COMMITTED).rows.column("value").to_pylist()


class Reports(list):
    """A delivery callback that keeps (error, message) pairs."""

    def __call__(self, error, message) -> None:
        self.append((error, message))

    def __bool__(self) -> bool:  # a callback is truthy even before it has been called
        return True


# -- close() and the context manager ------------------------------------------------------


def test_a_with_block_flushes_on_exit_and_closes_the_producer(root, topic):
    name = topic()
    reports = Reports()
    with producer(root, **{"linger.ms": NEVER_LINGER_MS}) as p:
        for i in range(3):
            p.produce(name, f"v{i}", on_delivery=reports)
        assert leo(root, name) == 0  # lingering: nothing sent inside the block
    assert [(e, m.offset()) for e, m in reports] == [(None, 0), (None, 1), (None, 2)]
    assert committed_values(root, name) == [b"v0", b"v1", b"v2"]
    assert len(p) == 0
    with pytest.raises(RuntimeError, match=CLOSED):
        p.produce(name, "late")


def test_exit_lets_the_blocks_exception_through_and_still_closes(root, topic):
    name = topic()
    with pytest.raises(ValueError, match="from the block"):
        with producer(root, **{"linger.ms": NEVER_LINGER_MS}) as p:
            p.produce(name, "v")
            raise ValueError("from the block")
    assert committed_values(root, name) == [b"v"]
    assert p.__exit__(None, None, None) is None  # an already closed producer exits quietly
    with pytest.raises(RuntimeError, match=CLOSED):
        p.poll(0)


def test_close_delivers_returns_true_and_every_call_after_it_raises(root, topic):
    name = topic()
    reports = Reports()
    p = producer(root, **{"linger.ms": NEVER_LINGER_MS})
    p.produce(name, "v", key="k", callback=reports)
    assert p.close() is True
    assert [(e, m.value()) for e, m in reports] == [(None, b"v")]  # close() flushed and served the report
    assert p.close() is True  # again: a no-op, as confluent-kafka's
    assert len(p) == 0 and bool(p) is True
    for call in (
        lambda: p.produce(name, "v"),
        lambda: p.poll(0),
        lambda: p.flush(),
        lambda: p.purge(),
        lambda: p.produce_batch(name, [{"value": "v"}]),
        lambda: p.list_topics(),
        lambda: p.init_transactions(),
        lambda: p.begin_transaction(),
        lambda: p.commit_transaction(),
        lambda: p.abort_transaction(),
    ):
        with pytest.raises(RuntimeError, match=CLOSED):
            call()
    assert p.produce_batch(name, []) == 0  # an empty batch is checked before the closed producer, as confluent's


def test_close_aborts_an_open_transaction_so_readers_are_not_held(root, topic):
    """S4.5, S5.1: close() aborts the open transaction (as confluent-kafka and Kafka's Java client do): its
    written rows never reach read_committed readers, and the LSO is not held at its first offset until the sweep."""
    name = topic()
    reports = Reports()
    p = producer(root, **{"transactional.id": "closing", "linger.ms": NEVER_LINGER_MS}, on_delivery=reports)
    p.init_transactions()
    p.begin_transaction()
    p.produce(name, "written", partition=0)
    p.flush()
    p.produce(name, "queued", partition=0)
    assert p.close() is True
    assert [(m.value(), e and e.code()) for e, m in reports] == [(b"written", None), (b"queued", KafkaError._PURGE_QUEUE)]
    log = open_partition(root, name, 0)
    assert log.last_stable_offset() == log.high_watermark() == 2  # the row and the abort marker
    assert committed_values(root, name) == []


def test_bool_is_true_with_nothing_queued(root, topic):
    """confluent-kafka's issue 1427: `if producer:` must not read as False because len() is 0."""
    p = producer(root)
    assert len(p) == 0
    assert bool(p) is True
    p.close()


# -- poll(timeout) waits ------------------------------------------------------------------


class WaitingTime:
    """The monotonic clock and the sleep a poll waits with, standing still unless slept on: a test sees each
    sleep poll asks for and how often it looks at the clock, and takes no real time."""

    LOOKS = 1_000  # far more looks than a poll of a few seconds in steps of POLL_STEP_S needs

    def __init__(self) -> None:
        self.now, self.looks, self.sleeps = 100.0, 0, []

    def monotonic(self) -> float:
        self.looks += 1
        assert self.looks <= self.LOOKS, f"poll looked at the clock over {self.LOOKS} times: it spins"
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_poll_blocks_up_to_its_timeout_when_idle_without_spinning(root, monkeypatch):
    """An idle poll(1.0) waits the whole second in sleeps of POLL_STEP_S, not in a loop that looks at the clock
    (as confluent's poll blocks in librdkafka); with nothing queued, poll(0) and poll() return at once."""
    p = producer(root)
    waiting = WaitingTime()
    monkeypatch.setattr(producer_module, "time", waiting)
    assert p.poll(1.0) == 0
    assert sum(waiting.sleeps) == pytest.approx(1.0)
    assert len(waiting.sleeps) == pytest.approx(1.0 / POLL_STEP_S, abs=1)
    assert min(waiting.sleeps[:-1]) == pytest.approx(POLL_STEP_S)
    waiting.sleeps.clear()
    assert p.poll(0) == 0 and p.poll() == 0  # no timeout and nothing queued: nothing can arrive
    assert waiting.sleeps == []


def test_poll_returns_as_soon_as_a_lingering_batch_is_sent(root, topic):
    name = topic()
    reports = Reports()
    p = producer(root, **{"linger.ms": 200}, on_delivery=reports)
    p.produce(name, "v")
    started = time.monotonic()
    assert p.poll(30.0) == 1
    assert time.monotonic() - started < 15  # returned on the report, not at the timeout
    assert [m.offset() for _, m in reports] == [0]


def test_poll_without_timeout_waits_for_the_queued_batch(root, topic):
    name = topic()
    p = producer(root, **{"linger.ms": 100})
    p.produce(name, "v")
    assert p.poll() == 1  # confluent's poll() blocks until an event: here the batch's report after linger.ms


def test_poll_sends_on_the_producers_clock_and_waits_in_real_time(root, topic):
    """linger.ms is timed on the clock passed in (a standing clock holds the batch), while poll's timeout is the
    caller's own wait: a poll on a standing clock returns at its timeout with nothing served."""
    name = topic()
    clock = FakeClock()
    p = Producer({"lakelog.root": root, "linger.ms": 1_000}, clock=clock)
    p.produce(name, "v")
    started = time.monotonic()
    assert p.poll(0.3) == 0
    assert time.monotonic() - started >= 0.25
    assert leo(root, name) == 0
    clock.advance(1_000)
    assert p.poll(0) == 1


# -- unknown topics (gap 4) ----------------------------------------------------------------


def test_a_missing_topics_error_reaches_the_delivery_callback_and_nothing_is_written(root, topic):
    topic(name="known")
    reports = Reports()
    p = producer(root, on_delivery=reports)
    before = table_fingerprint(root), folder_listing(root)
    p.produce("missing", "v", key="k")  # no raise: confluent reports it through the callback
    p.produce("missing", "w", partition=3)
    assert reports == []
    assert p.flush() == 0
    assert [(e.code(), m.topic(), m.partition(), m.value(), m.error() is e) for e, m in reports] == [
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "missing", None, b"v", True),  # unassigned: None, as confluent's
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "missing", 3, b"w", True),
    ]
    assert (table_fingerprint(root), folder_listing(root)) == before  # S8.3


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state", "bad name!", "x" * 250])
def test_an_internal_or_illegal_topic_is_reported_with_topic_exception_and_never_created(root, name):
    """Kafka refuses a client's produce to an internal topic and never auto-creates one; an illegal name
    fails the same way, through the delivery callback (librdkafka's TOPIC_EXCEPTION), even with auto-create on."""
    reports = Reports()
    p = Producer({"lakelog.root": root, "allow.auto.create.topics": True}, on_delivery=reports)
    before = folder_listing(root)
    p.produce(name, "v")
    p.flush()
    assert [e.code() for e, _ in reports] == [KafkaError.TOPIC_EXCEPTION]
    assert folder_listing(root) == before


def test_a_missing_topic_makes_the_transaction_abort_only(root, topic):
    """A failed delivery in a transaction makes it abortable (S4.5): commit refuses, abort goes on."""
    name = topic()
    reports = Reports()
    p = producer(root, **{"transactional.id": "t"}, on_delivery=reports)
    p.init_transactions()
    p.begin_transaction()
    p.produce(name, "good")
    p.produce("missing", "bad")
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction()
    assert raised.value.args[0].txn_requires_abort()
    p.abort_transaction()
    assert committed_values(root, name) == []
    assert {(m.topic(), e and e.code()) for e, m in reports} == {("missing", KafkaError.UNKNOWN_TOPIC_OR_PART), (name, None)}


def test_a_missing_topic_is_created_when_the_producer_and_the_root_allow_it(root):
    """allow.auto.create.topics (librdkafka's producer default true) with the root's auto.create.topics.enable
    (Kafka's default true): the first produce creates the topic with the root's defaults, as a broker would."""
    reports = Reports()
    p = Producer({"lakelog.root": root}, on_delivery=reports)
    p.produce("fresh", "v", partition=0)
    p.flush()
    assert [(e, m.topic(), m.offset()) for e, m in reports] == [(None, "fresh", 0)]
    assert committed_values(root, "fresh") == [b"v"]
    assert p.list_topics("fresh").topics["fresh"].error is None


def test_a_root_without_auto_create_refuses_the_producers_request(root, tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    shutil.copytree(resources.files("lakelog") / "conf", conf)
    broker = conf / "broker.properties"
    broker.write_text(broker.read_text() + "\nauto.create.topics.enable=false\n")
    monkeypatch.setenv("LAKELOG_CONF_DIR", str(conf))
    reports = Reports()
    p = Producer({"lakelog.root": root, "allow.auto.create.topics": True}, on_delivery=reports)
    before = folder_listing(root)
    p.produce("fresh", "v")
    p.flush()
    assert [e.code() for e, _ in reports] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    assert folder_listing(root) == before


def test_a_partition_the_topic_lacks_raises_unknown_partition_at_produce(root, topic):
    """librdkafka refuses an explicit partition past a known topic's count at once, with _UNKNOWN_PARTITION."""
    name = topic(partitions=2)
    p = producer(root)
    with pytest.raises(KafkaException) as raised:
        p.produce(name, "v", partition=2)
    assert raised.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    assert len(p) == 0


def test_list_topics_of_a_missing_topic_carries_the_error(root, topic):
    name = topic(partitions=2)
    p = producer(root)
    before = folder_listing(root)
    metadata = p.list_topics("missing", timeout=10)
    assert metadata.topics["missing"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert metadata.topics["missing"].partitions == {}
    assert folder_listing(root) == before
    known = p.list_topics(name).topics[name]
    assert known.error is None and sorted(known.partitions) == [0, 1]


# -- purge() ----------------------------------------------------------------------------------


def test_purge_reports_queued_messages_with_purge_queue_and_writes_nothing(root, topic):
    name = topic()
    reports = Reports()
    p = producer(root, **{"linger.ms": NEVER_LINGER_MS}, on_delivery=reports)
    p.produce(name, "a")
    p.produce(name, "b")
    before = table_fingerprint(root)
    p.purge(in_queue=False)  # only the queue holds messages: nothing to drop
    assert len(p) == 2 and reports == []
    p.purge()
    assert reports == []  # reports wait for poll()/flush(), as confluent's
    assert p.poll(0) == 2
    assert [(e.code(), m.value(), m.offset()) for e, m in reports] == [
        (KafkaError._PURGE_QUEUE, b"a", None),
        (KafkaError._PURGE_QUEUE, b"b", None),
    ]
    assert p.flush() == 0
    assert table_fingerprint(root) == before  # S8.3


def test_purge_in_a_transaction_makes_it_abort_only(root, topic):
    name = topic()
    p = producer(root, **{"transactional.id": "t", "linger.ms": NEVER_LINGER_MS})
    p.init_transactions()
    p.begin_transaction()
    p.produce(name, "a")
    p.purge()
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction()
    assert raised.value.args[0].txn_requires_abort()
    p.abort_transaction()
    p.begin_transaction()  # usable again after the abort
    p.produce(name, "b")
    p.commit_transaction()
    assert committed_values(root, name) == [b"b"]


# -- produce_batch() ---------------------------------------------------------------------------


def test_produce_batch_queues_each_message_and_returns_the_count(root, topic):
    name = topic(partitions=2)
    default, own = Reports(), Reports()
    p = producer(root, **{"linger.ms": NEVER_LINGER_MS})
    messages = [
        {"value": b"bytes", "key": b"k"},
        {"value": "str", "key": "k", "partition": 1},
        {"value": "bad", "partition": 5},
        {"value": None, "callback": own},
        {},
    ]
    assert p.produce_batch(name, messages, partition=0, on_delivery=default) == 4
    assert messages[2]["_error"].code() == KafkaError._UNKNOWN_PARTITION  # the one not queued says why
    assert all("_error" not in m for i, m in enumerate(messages) if i != 2)
    assert len(p) == 4
    p.flush()
    assert sorted((m.partition(), m.value() or b"") for _, m in default) == [(0, b""), (0, b"bytes"), (1, b"str")]
    assert [(e, m.value()) for e, m in own] == [(None, None)]


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ("not a list", TypeError),
        ([{"value": "ok"}, "not a dict"], TypeError),
        ([{"value": "ok"}, {"value": 5}], TypeError),
        ([{"value": "ok"}, {"key": 5.0}], TypeError),
        ([{"value": "ok"}, {"partition": "0"}], TypeError),
    ],
)
def test_produce_batch_refuses_malformed_input_before_queueing_any(root, topic, messages, error):
    name = topic()
    p = producer(root, **{"linger.ms": NEVER_LINGER_MS})
    with pytest.raises(error):
        p.produce_batch(name, messages)
    assert len(p) == 0


def test_a_delivery_callback_that_raises_leaves_the_reports_after_its_own_for_the_next_poll(root, topic):
    """As confluent-kafka: the callback's exception comes out of flush()/poll(); the reports not yet served stay
    queued, in order, and the next poll() serves them with their own offsets."""
    name = topic()
    seen: list[int] = []

    def on_delivery(error, message):
        seen.append(message.offset())
        if len(seen) == 1:
            raise ValueError("the application's callback failed")

    p = producer(root, **{"linger.ms": NEVER_LINGER_MS}, on_delivery=on_delivery)
    for value in (b"a", b"b", b"c"):
        p.produce(name, value, partition=0)
    with pytest.raises(ValueError):
        p.flush()  # sends the batch (one report entry for its three messages); the first callback raises
    assert seen == [0]
    assert len(p) == 2  # the other two reports wait
    assert p.poll(0) == 2
    assert seen == [0, 1, 2]
    assert len(p) == 0
