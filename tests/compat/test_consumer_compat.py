"""The Consumer's confluent-kafka API that ported programs call (issue 14, gap 5 and the consumer's side of gap 4).

Each test drives one call through confluent-kafka's documented semantics: `list_topics`, `pause`/`resume`,
`offsets_for_times`, `memberid`, regex subscriptions (`^...`), `max.poll.interval.ms`, and a subscribed topic
that does not exist (UNKNOWN_TOPIC_OR_PART through poll, or created with allow.auto.create.topics). Group
timers run on a FakeClock, so nothing here waits for a timeout (S6.5).
"""

from __future__ import annotations

import pytest
from helpers import FakeClock, table_fingerprint

from lakelog import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, Consumer, KafkaError, Producer, TopicPartition
from lakelog.client.consumer.metadata import Subscription
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import UnknownTopicOrPartition
from lakelog.log import create_topic, list_topics

GROUP = "compat"


def consumer(root: str, clock=None, **conf) -> Consumer:
    settings = {"lakelog.root": root, "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf}
    return Consumer(settings) if clock is None else Consumer(settings, clock=clock)


def group_consumer(root: str, clock: FakeClock, **conf) -> Consumer:
    return consumer(root, clock, **{"group.id": GROUP, "heartbeat.interval.ms": 50, **conf})


def produce(root: str, topic: str, values: list[str], partition: int = 0, timestamps: list[int] | None = None) -> None:
    producer = Producer({"lakelog.root": root, "linger.ms": 600_000})
    for index, value in enumerate(values):
        producer.produce(topic, value, partition=partition, timestamp=timestamps[index] if timestamps else 0)
    producer.flush()


def owned(c: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def recorder(events: list, name: str):
    return lambda _consumer, partitions: events.append((name, sorted((p.topic, p.partition) for p in partitions)))


def poll_values(c: Consumer, count: int, timeout: float = 30.0) -> list[str]:
    """Poll until `count` records (errors fail the test)."""
    values = []
    while len(values) < count:
        message = c.poll(timeout)
        assert message is not None, f"timed out after {values}"
        assert message.error() is None, message.error()
        values.append(message.value().decode())
    return values


# -- list_topics ---------------------------------------------------------------------------


def test_list_topics_returns_cluster_metadata_of_every_topic_and_of_one(root, topic):
    orders, payments = topic(partitions=3, name="orders"), topic(name="payments")
    with consumer(root) as c:
        everything = c.list_topics(timeout=5)
        assert {orders, payments} <= set(everything.topics)
        one = c.list_topics(orders, timeout=5)
        assert list(one.topics) == [orders]
        assert sorted(one.topics[orders].partitions) == [0, 1, 2]
        assert one.topics[orders].error is None


def test_list_topics_of_a_missing_topic_carries_unknown_topic_or_part_and_creates_nothing(root, topic):
    """As librdkafka: metadata with the topic's error, not an exception; the root unchanged (S8.3)."""
    topic(name="orders")
    before = table_fingerprint(root)
    with consumer(root) as c:
        metadata = c.list_topics("nope", timeout=5)
    assert metadata.topics["nope"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert metadata.topics["nope"].partitions == {}
    assert table_fingerprint(root) == before


def test_list_topics_with_allow_auto_create_topics_creates_the_topic(root):
    with consumer(root, **{"allow.auto.create.topics": True}) as c:
        metadata = c.list_topics("fresh")
    assert metadata.topics["fresh"].error is None
    assert "fresh" in list_topics(root)


# -- pause / resume -----------------------------------------------------------------------------


def test_a_paused_partition_returns_nothing_until_resumed_and_keeps_its_position(root, topic):
    name = topic(partitions=2)
    produce(root, name, ["a0", "a1", "a2"], partition=0)
    produce(root, name, ["b0", "b1"], partition=1)
    with consumer(root) as c:
        c.assign([TopicPartition(name, 0, 0), TopicPartition(name, 1, 0)])
        first = c.poll(10)
        paused = TopicPartition(name, first.partition())
        c.pause([paused])
        other = 1 - first.partition()
        # Only the other partition's records come while paused, then nothing.
        rest = [m for m in c.consume(10, 1.0) if m.error() is None]
        assert rest and {m.partition() for m in rest} == {other}
        assert c.poll(0.2) is None
        assert c.position([paused])[0].offset == first.offset() + 1
        c.resume([paused])
        resumed = c.consume(10, 5.0)
        assert [m.offset() for m in resumed] == list(range(first.offset() + 1, 3 if first.partition() == 0 else 2))
        assert {m.partition() for m in resumed} == {first.partition()}


def test_pause_of_a_partition_that_is_not_assigned_is_passed_over(root, topic):
    name = topic()
    produce(root, name, ["x"])
    with consumer(root) as c:
        c.assign([TopicPartition(name, 0, 0)])
        c.pause([TopicPartition("other", 0)])
        assert poll_values(c, 1) == ["x"]


# -- offsets_for_times ----------------------------------------------------------------------------


def test_offsets_for_times_returns_the_earliest_offset_at_or_after_each_timestamp(root, topic):
    """Kafka's ListOffsets by time: the first offset whose timestamp >= the one asked; -1 (OFFSET_END) when
    none; timestamps need not rise with offsets, the earliest offset wins."""
    name = topic()
    produce(root, name, ["a", "b", "c", "d"], timestamps=[1_000, 3_000, 2_000, 4_000])
    with consumer(root) as c:
        asked = [1_000, 1_500, 2_500, 3_500, 4_001, 0]
        found = c.offsets_for_times([TopicPartition(name, 0, ts) for ts in asked], timeout=5)
        assert [tp.offset for tp in found] == [0, 1, 1, 3, OFFSET_END, 0]
        assert all((tp.topic, tp.partition) == (name, 0) for tp in found)
        # ListOffsets' special timestamps: -2 the log start, -1 the end.
        ends = c.offsets_for_times([TopicPartition(name, 0, -2), TopicPartition(name, 0, -1)])
        assert [tp.offset for tp in ends] == [0, 4]
        # Seeking there reads from it, as ported code does after offsets_for_times.
        c.assign(c.offsets_for_times([TopicPartition(name, 0, 2_500)]))
        assert poll_values(c, 3) == ["b", "c", "d"]


def test_offsets_for_times_in_read_committed_does_not_answer_past_the_last_stable_offset(root, topic):
    """S5.1: a record of an open transaction is past the LSO, so it is no answer there (Kafka's isolation check)."""
    name = topic()
    produce(root, name, ["old"], timestamps=[1_000])
    transactional = Producer({"lakelog.root": root, "transactional.id": "t-open"})
    transactional.init_transactions()
    transactional.begin_transaction()
    transactional.produce(name, "pending", partition=0, timestamp=5_000)
    transactional.flush()
    query = [TopicPartition(name, 0, 2_000)]
    with consumer(root) as committed, consumer(root, **{"isolation.level": "read_uncommitted"}) as uncommitted:
        assert committed.offsets_for_times(query)[0].offset == OFFSET_END
        assert uncommitted.offsets_for_times(query)[0].offset == 1
    transactional.abort_transaction()


def test_offsets_for_times_of_an_unknown_topic_raises_unknown_topic_or_part(root):
    with consumer(root) as c, pytest.raises(UnknownTopicOrPartition):
        c.offsets_for_times([TopicPartition("nope", 0, 1_000)])


# -- memberid ---------------------------------------------------------------------------------------


def test_memberid_is_the_clients_own_from_creation_and_the_coordinator_keeps_it(root, topic):
    """KIP-848 with KIP-1082 (as confluent-kafka 2.15 against Kafka 4, tests/kafka): the client makes its member id
    when it is created, so memberid() has it before the first poll, and the coordinator takes it at the join."""
    name = topic()
    clock = FakeClock()
    with group_consumer(root, clock) as c:
        member = c.memberid()
        assert isinstance(member, str) and member
        c.subscribe([name])
        assert c.memberid() == member
        c.poll(0.1)
        assert c.memberid() == member
        group = GroupCoordinator(root).describe(GROUP)
        assert set(group.members) == {member}


# -- regex subscriptions ------------------------------------------------------------------------


def test_subscription_patterns_match_with_librdkafkas_rule_and_never_internal_topics():
    subscription = Subscription.parse(["^orders-.*", "payments"])
    assert subscription.names == ("payments",)
    existing = ["orders-eu", "orders-us", "refunds", "__orders-internal", "payments"]
    assert subscription.resolve(existing) == ("orders-eu", "orders-us", "payments")
    # A named topic is subscribed whether or not it exists; only patterns look at the root.
    assert Subscription.parse(["^.*"]).resolve(["a", "__consumer_offsets"]) == ("a",)


def test_a_regex_subscription_takes_matching_topics_and_new_ones_at_the_metadata_refresh(root, topic):
    """librdkafka: `^orders-.*` is a regex over the root's topics, evaluated again every
    topic.metadata.refresh.interval.ms; a topic created later joins the assignment then, not before."""
    topic(name="orders-eu", partitions=2)
    topic(name="payments")
    clock = FakeClock()
    with group_consumer(root, clock, **{"topic.metadata.refresh.interval.ms": 10_000}) as c:
        c.subscribe(["^orders-.*"])
        c.poll(0.1)
        assert owned(c) == {("orders-eu", 0), ("orders-eu", 1)}
        create_topic(root, "orders-us", 1)
        clock.advance(5_000)
        c.poll(0.1)
        assert ("orders-us", 0) not in owned(c), "re-evaluated before the refresh interval"
        clock.advance(5_000)
        c.poll(0.1)
        assert owned(c) == {("orders-eu", 0), ("orders-eu", 1), ("orders-us", 0)}
        produce(root, "orders-us", ["new"])
        assert poll_values(c, 1) == ["new"]


def test_an_invalid_regex_is_refused_with_invalid_arg(root):
    with group_consumer(root, FakeClock()) as c:
        with pytest.raises(Exception) as refused:
            c.subscribe(["^orders-(["])
        assert refused.value.args[0].code() == KafkaError._INVALID_ARG


# -- max.poll.interval.ms -------------------------------------------------------------------------


def test_max_poll_interval_exceeded_leaves_the_group_reports_max_poll_exceeded_then_rejoins(root, topic):
    """librdkafka: past max.poll.interval.ms between polls the member leaves the group; the next poll returns
    _MAX_POLL_EXCEEDED, the one after loses the partitions (on_lost) and joins again as a new member."""
    name = topic(partitions=2)
    clock = FakeClock()
    events: list = []
    with group_consumer(root, clock, **{"max.poll.interval.ms": 10_000}) as c:
        c.subscribe([name], on_assign=recorder(events, "assign"), on_lost=recorder(events, "lost"))
        c.poll(0.1)
        first_member = c.memberid()
        assert owned(c) == {(name, 0), (name, 1)}
        clock.advance(10_000)  # exactly the limit: still in the group
        assert c.poll(0.1) is None
        clock.advance(10_001)
        message = c.poll(0.1)
        assert message is not None and message.error().code() == KafkaError._MAX_POLL_EXCEEDED
        assert str(message.error()).count("Application maximum poll interval (10000ms) exceeded by 1ms") == 1
        # It has left: the coordinator no longer holds it, so its partitions are free for others.
        assert first_member not in GroupCoordinator(root).describe(GROUP).members
        c.poll(0.1)
        assert events == [
            ("assign", [(name, 0), (name, 1)]),
            ("lost", [(name, 0), (name, 1)]),
            ("assign", [(name, 0), (name, 1)]),
        ]
        assert c.memberid() == first_member  # it joined again under its own id (KIP-1082), as librdkafka
        assert owned(c) == {(name, 0), (name, 1)}


def test_polls_within_max_poll_interval_keep_the_member(root, topic):
    name = topic()
    clock = FakeClock()
    with group_consumer(root, clock, **{"max.poll.interval.ms": 10_000}) as c:
        c.subscribe([name])
        c.poll(0.1)
        member = c.memberid()
        for _ in range(5):
            clock.advance(9_000)
            message = c.poll(0.05)
            assert message is None or message.error() is None
        assert c.memberid() == member


# -- a topic that does not exist ---------------------------------------------------------------------


def test_assigning_a_missing_topic_is_accepted_reported_once_and_read_once_it_exists(root):
    """librdkafka takes the assignment; poll reports UNKNOWN_TOPIC_OR_PART for the partition, once, and reads
    it when the topic appears. Nothing is created meanwhile (S8.3)."""
    before = table_fingerprint(root)
    with consumer(root) as c:
        wanted = [TopicPartition("later", 0, OFFSET_BEGINNING)]
        c.assign(wanted)
        assert c.assignment() == wanted
        assert c.position(wanted)[0].offset == OFFSET_INVALID
        assert c.get_watermark_offsets(wanted[0], cached=True) == (OFFSET_INVALID, OFFSET_INVALID)
        message = c.poll(0.1)
        assert message.error().code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert (message.topic(), message.partition()) == ("later", 0)
        assert c.poll(0.1) is None
        assert table_fingerprint(root) == before
        create_topic(root, "later", 1)
        produce(root, "later", ["first", "second"])
        assert poll_values(c, 2) == ["first", "second"]
        assert c.assignment() == wanted
        # A partition past an existing topic's count is refused at once, as before.
        with pytest.raises(UnknownTopicOrPartition):
            c.incremental_assign([TopicPartition("later", 5, 0)])


def test_a_missing_subscribed_topic_is_reported_by_poll_once_and_assigned_once_created(root, topic):
    """confluent: poll() returns a Message whose error is UNKNOWN_TOPIC_OR_PART (once); the root is unchanged
    (S8.3 for the topics: nothing is created); the topic's partitions are assigned once it exists."""
    present = topic(name="present")
    clock = FakeClock()
    topics_before = table_fingerprint(f"{root}/topics")
    with group_consumer(root, clock) as c:
        c.subscribe([present, "later"])
        message = c.poll(0.1)
        assert message is not None
        assert message.error().code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert message.topic() == "later"
        assert "later" in str(message.error())
        assert owned(c) == {(present, 0)}
        for _ in range(3):
            clock.advance(100)
            follow = c.poll(0.05)
            assert follow is None or follow.error() is None, "reported more than once"
        assert table_fingerprint(f"{root}/topics") == topics_before
        create_topic(root, "later", 2)
        produce(root, "later", ["hello"], partition=1)
        clock.advance(100)
        delivered = c.poll(10)
        assert owned(c) == {(present, 0), ("later", 0), ("later", 1)}
        assert delivered.error() is None and delivered.value() == b"hello"


def test_allow_auto_create_topics_creates_a_missing_subscribed_topic(root):
    clock = FakeClock()
    with group_consumer(root, clock, **{"allow.auto.create.topics": True}) as c:
        c.subscribe(["made"])
        message = c.poll(0.1)
        assert message is None or message.error() is None
        assert "made" in list_topics(root)
        assert owned(c) == {("made", 0)}


# -- argument errors and a closed consumer, as confluent raises them ----------------------------------


def test_bad_arguments_raise_confluents_type_and_value_errors_and_a_closed_consumer_runtime_error(root, topic):
    name = topic()
    c = consumer(root, FakeClock(), **{"group.id": GROUP})
    with pytest.raises(TypeError, match="on_assign expects a callable"):
        c.subscribe([name], on_assign="not callable")
    with pytest.raises(TypeError):
        c.subscribe(name)
    with pytest.raises(TypeError):
        c.pause([name])
    with pytest.raises(TypeError):
        c.seek(name)
    with pytest.raises(TypeError):
        c.offsets_for_times([TopicPartition(name, 0, "yesterday")])
    with pytest.raises(ValueError):
        c.consume(2_000_000, 0)
    c.close()
    for call in (
        lambda: c.list_topics(),
        c.memberid,
        lambda: c.pause([TopicPartition(name, 0)]),
        lambda: c.resume([TopicPartition(name, 0)]),
        lambda: c.offsets_for_times([TopicPartition(name, 0, 0)]),
    ):
        with pytest.raises(RuntimeError, match="Consumer closed"):
            call()
