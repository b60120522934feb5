"""The confluent-kafka-shaped client API on real Delta tables: Producer, Consumer, AdminClient, errors.

Every test writes and reads real partition tables under a fresh root; nothing of
Delta is mocked. Rules of ../shared/design/SEMANTICS.md are named where they apply.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from deltalake import DeltaTable
from helpers import table_fingerprint

from lakelog import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    AdminClient,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    NewTopic,
    Producer,
    TopicPartition,
)
from lakelog.errors import (
    AbortableError,
    CommitConflict,
    ConcurrentTransactions,
    CorruptRecord,
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    KafkaStorageError,
    OffsetMismatch,
    OffsetOutOfRange,
    OutOfOrderSequence,
    ProducerFenced,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from lakelog.log import BatchHeader, open_partition, payload_table
from lakelog.store import Table

# A linger long enough that only batch.num.messages, batch.size or flush() send a batch.
NEVER_LINGER_MS = 600_000


def producer(lake: str, **conf) -> Producer:
    return Producer({"lakelog.root": lake, **conf})


def consumer(lake: str, **conf) -> Consumer:
    return Consumer({"lakelog.root": lake, **conf})


def read_all(lake: str, topic: str, partition: int = 0, timeout: float = 5.0) -> list[Message]:
    """Every data message of a partition from the beginning, stopping at the partition EOF event."""
    with consumer(lake, **{"enable.partition.eof": True}) as c:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = c.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                return out
            out.append(message)
    raise AssertionError(f"no partition EOF for {topic}-{partition} within {timeout} s")


def leo(lake: str, topic: str, partition: int = 0) -> int:
    return open_partition(lake, topic, partition).log_end_offset()


def version(lake: str, topic: str, partition: int = 0) -> int:
    return open_partition(lake, topic, partition).version


# -- config ------------------------------------------------------------------------


@pytest.mark.parametrize("client", [Producer, Consumer, AdminClient])
def test_client_refuses_unknown_config_key_naming_it(lake, client):
    with pytest.raises(InvalidConfig) as raised:
        client({"lakelog.root": lake, "no.such.key": "1"})
    assert raised.value.key == "no.such.key"
    assert "no.such.key" in str(raised.value)
    # librdkafka refuses a client config with _INVALID_ARG (issue 14): confluent's handlers test that code.
    assert raised.value.error.code() == KafkaError._INVALID_ARG
    assert raised.value.error.name() == "_INVALID_ARG"


@pytest.mark.parametrize("client", [Producer, Consumer, AdminClient])
def test_client_refuses_a_missing_root(client):
    with pytest.raises(InvalidConfig) as raised:
        client({"client.id": "x"})
    assert raised.value.key == "lakelog.root"
    assert "lakelog.root" in str(raised.value)


@pytest.mark.parametrize("client", [Producer, Consumer, AdminClient])
def test_client_refuses_a_root_that_is_a_file(tmp_path, client):
    file = tmp_path / "not-a-folder"
    file.write_text("x")
    with pytest.raises(InvalidConfig) as raised:
        client({"lakelog.root": str(file)})
    assert raised.value.key == "lakelog.root"
    assert file.read_text() == "x"


def test_producer_refuses_a_badly_typed_value_naming_the_key(lake):
    with pytest.raises(InvalidConfig) as raised:
        producer(lake, **{"linger.ms": "soon"})
    assert raised.value.key == "linger.ms"
    with pytest.raises(InvalidConfig) as raised:
        producer(lake, on_delivery="not callable")
    assert raised.value.key == "on_delivery"


# -- produce, poll, flush, len -----------------------------------------------------


def test_len_counts_queued_messages_and_unserved_reports(lake, make_topic):
    topic = make_topic()
    served = []
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS}, on_delivery=lambda e, m: served.append(m.offset()))
    for i in range(3):
        p.produce(topic, f"v{i}")
    assert len(p) == 3
    assert p.poll(0) == 0  # nothing lingered long enough, nothing sent
    assert version(lake, topic) == 0
    assert len(p) == 3
    assert p.flush() == 0
    assert len(p) == 0
    assert served == [0, 1, 2]


def test_reports_wait_for_poll_and_carry_offsets(lake, make_topic):
    """A sent batch's reports are served by poll(), as in confluent-kafka; offsets are dense (S1.1)."""
    topic = make_topic()
    reports: list[tuple[KafkaError | None, Message]] = []
    p = producer(lake, **{"linger.ms": 0})
    for i in range(4):
        p.produce(topic, value=f"v{i}".encode(), key=f"k{i}", on_delivery=lambda e, m: reports.append((e, m)))
    assert leo(lake, topic) == 4  # linger.ms=0: every produce() sent its own batch
    assert reports == []
    assert len(p) == 4
    assert p.poll(0) == 4
    assert len(p) == 0
    assert [(e, m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.error()) for e, m in reports] == [
        (None, topic, 0, i, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(4)
    ]


def test_per_message_callback_overrides_the_configured_one(lake, make_topic):
    topic = make_topic()
    default, specific, alias = [], [], []
    p = producer(lake, on_delivery=lambda e, m: default.append(m.value()))
    p.produce(topic, b"a")
    p.produce(topic, b"b", on_delivery=lambda e, m: specific.append(m.value()))
    p.produce(topic, b"c", callback=lambda e, m: alias.append(m.value()))
    p.flush()
    assert (default, specific, alias) == ([b"a"], [b"b"], [b"c"])


def test_S2_1_wrong_expected_offset_reports_offset_mismatch_and_writes_nothing(lake, make_topic):
    """S2.1, S8.3: a batch whose expected offset is not the LEO is refused whole; the table is unchanged."""
    topic = make_topic()
    reports = []
    p = producer(lake, on_delivery=lambda e, m: reports.append((e, m)))
    p.produce(topic, b"a")
    p.produce(topic, b"b")
    p.flush()
    reports.clear()
    before = table_fingerprint(f"{lake}/topics/{topic}")

    p.produce(topic, b"late-1", expected_offset=1)
    p.produce(topic, b"late-2", expected_offset=2)
    p.flush()

    assert len(reports) == 2
    for error, message in reports:
        assert isinstance(error, KafkaError)
        assert error.code() == KafkaError.OFFSET_MISMATCH
        assert error.name() == "OFFSET_MISMATCH"
        assert "2" in error.str()  # names the real log end offset
        assert not error.retriable() and not error.fatal()
        assert message.error() is error
        assert message.offset() is None
    assert [m.value() for _, m in reports] == [b"late-1", b"late-2"]
    assert leo(lake, topic) == 2
    assert table_fingerprint(f"{lake}/topics/{topic}") == before

    # The refusal burned no sequence: the same producer lands the next batch at the LEO.
    reports.clear()
    p.produce(topic, b"c", expected_offset=2)
    p.flush()
    assert [(e, m.offset()) for e, m in reports] == [(None, 2)]
    assert [m.value() for m in read_all(lake, topic)] == [b"a", b"b", b"c"]


def test_S2_1_consecutive_expected_offsets_join_one_batch(lake, make_topic):
    topic = make_topic()
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS})
    for offset in range(5):
        p.produce(topic, f"v{offset}", expected_offset=offset)
    p.flush()
    assert version(lake, topic) == 1
    assert [(m.offset(), m.value()) for m in read_all(lake, topic)] == [(i, f"v{i}".encode()) for i in range(5)]


@pytest.mark.parametrize(("count", "per_batch"), [(10, 3), (9, 3), (1, 5), (7, 1), (12, 12)])
def test_batch_num_messages_bounds_a_batch_one_commit_each(lake, make_topic, count, per_batch):
    """N messages with batch.num.messages=k make ceil(N/k) commits (S1.2: one batch, one commit)."""
    topic = make_topic()
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": per_batch})
    for i in range(count):
        p.produce(topic, f"v{i}")
    assert version(lake, topic) == count // per_batch  # full batches went out during produce()
    p.flush()
    log = open_partition(lake, topic, 0)
    assert log.version == math.ceil(count / per_batch)
    assert len(log.table.files()) == math.ceil(count / per_batch)
    assert [m.offset() for m in read_all(lake, topic)] == list(range(count))


def test_batch_size_bytes_bounds_a_batch(lake, make_topic):
    topic = make_topic()
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.size": 10})
    for i in range(9):
        p.produce(topic, f"v{i:03d}")  # 4 bytes: the third message reaches 12 >= 10
    p.flush()
    assert version(lake, topic) == 3


def test_linger_ms_holds_a_batch_until_it_has_waited(lake, make_topic):
    topic = make_topic()
    served = []
    p = producer(lake, **{"linger.ms": 400}, on_delivery=lambda e, m: served.append(m.offset()))
    started = time.monotonic()
    for i in range(3):
        p.produce(topic, f"v{i}")
    assert p.poll(0) == 0
    if time.monotonic() - started < 0.35:  # too slow a machine proves nothing about linger
        assert version(lake, topic) == 0
    assert p.poll(5.0) == 3  # poll waits at most linger.ms, then sends
    assert version(lake, topic) == 1
    assert served == [0, 1, 2]


def test_keyed_messages_go_to_one_stable_partition(lake, make_topic):
    """The default partitioner (consistent_random) maps a key to CRC32(key) % partitions, as librdkafka."""
    topic = make_topic(partitions=4)
    keys = [f"customer-{i}".encode() for i in range(16)]
    first = producer(lake, **{"linger.ms": NEVER_LINGER_MS})
    second = producer(lake, **{"linger.ms": NEVER_LINGER_MS})
    for round_ in range(3):
        for key in keys:
            (first if round_ % 2 else second).produce(topic, f"{key.decode()}#{round_}", key=key)
    first.flush()
    second.flush()
    partitions_of: dict[bytes, set[int]] = {}
    for partition in range(4):
        for message in read_all(lake, topic, partition):
            partitions_of.setdefault(message.key(), set()).add(message.partition())
    assert partitions_of == {key: {zlib.crc32(key) % 4} for key in keys}
    assert len({zlib.crc32(key) % 4 for key in keys}) > 1


def _kafka_murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (what the Java producer's default partitioner hashes), as a signed int32."""
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ len(data)) & 0xFFFFFFFF
    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[whole:]
    if tail:
        for index in range(len(tail) - 1, -1, -1):
            h ^= tail[index] << (8 * index)
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def test_reference_murmur2_matches_kafkas_own_test_vectors():
    """Checks the reference hash used below against Kafka's UtilsTest.testMurmur2."""
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {data: _kafka_murmur2(data) for data in vectors} == vectors


def test_murmur2_random_partitioner_is_java_compatible(lake, make_topic):
    """partitioner=murmur2_random puts a key where the Java producer would: toPositive(murmur2(key)) % n."""
    topic = make_topic(partitions=7)
    keys = [f"order-{i}".encode() for i in range(20)]
    p = producer(lake, partitioner="murmur2_random")
    for key in keys:
        p.produce(topic, b"x", key=key)
    p.flush()
    landed = {m.key(): m.partition() for partition in range(7) for m in read_all(lake, topic, partition)}
    assert landed == {key: (_kafka_murmur2(key) & 0x7FFFFFFF) % 7 for key in keys}


def test_explicit_partition_out_of_range_is_refused_at_produce(lake, make_topic):
    """librdkafka refuses it at once with _UNKNOWN_PARTITION (a missing topic is reported through the
    delivery callback instead, issue 14: tests/compat/test_producer_compat.py)."""
    topic = make_topic(partitions=2)
    p = producer(lake)
    with pytest.raises(KafkaException) as raised:
        p.produce(topic, b"x", partition=2)
    assert raised.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    assert len(p) == 0
    assert (leo(lake, topic, 0), leo(lake, topic, 1)) == (0, 0)


def test_headers_keys_values_and_timestamps_round_trip(lake, make_topic):
    topic = make_topic()
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS})
    before_ms = time.time_ns() // 1_000_000
    p.produce(topic, b"v0", key=b"k0", headers={"trace": b"abc", "user": "bob"}, timestamp=1_600_000_000_123)
    p.produce(topic, None, key=None, headers=[("dup", b"1"), ("dup", b"2"), ("nothing", None)], timestamp=1)
    p.produce(topic, b"\x00\xffbinary", key="unicode-\u00e9")
    p.flush()
    after_ms = time.time_ns() // 1_000_000

    messages = read_all(lake, topic)
    assert [(m.key(), m.value(), m.headers()) for m in messages] == [
        (b"k0", b"v0", [("trace", b"abc"), ("user", b"bob")]),
        (None, None, [("dup", b"1"), ("dup", b"2"), ("nothing", None)]),
        ("unicode-\u00e9".encode(), b"\x00\xffbinary", None),
    ]
    assert messages[0].timestamp() == (TIMESTAMP_CREATE_TIME, 1_600_000_000_123)
    assert messages[1].timestamp() == (TIMESTAMP_CREATE_TIME, 1)
    kind, stamped = messages[2].timestamp()
    assert kind == TIMESTAMP_CREATE_TIME and before_ms <= stamped <= after_ms


# -- consumer ------------------------------------------------------------------------


@pytest.fixture
def five(lake, make_topic) -> str:
    """A topic whose partition 0 holds v0..v4 at offsets 0..4, in two commits."""
    topic = make_topic()
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": 3})
    for i in range(5):
        p.produce(topic, f"v{i}", key=f"k{i}")
    p.flush()
    return topic


def test_assign_and_poll_read_in_offset_order_then_nothing(lake, five):
    """S1.4: rows come back in offset order from the start offset."""
    c = consumer(lake)
    c.assign([TopicPartition(five, 0, OFFSET_BEGINNING)])
    assert c.assignment() == [TopicPartition(five, 0)]
    messages = [c.poll(2.0) for _ in range(5)]
    assert [(m.offset(), m.value()) for m in messages] == [(i, f"v{i}".encode()) for i in range(5)]
    started = time.monotonic()
    assert c.poll(0.2) is None
    assert time.monotonic() - started >= 0.15
    c.close()


def test_consume_returns_at_most_num_messages(lake, five):
    c = consumer(lake)
    c.assign([TopicPartition(five, 0, 1)])
    assert [m.offset() for m in c.consume(3, timeout=2.0)] == [1, 2, 3]
    assert [m.offset() for m in c.consume(10, timeout=2.0)] == [4]
    assert c.consume(10, timeout=0.1) == []
    c.close()


def test_S1_4_tiny_fetch_budgets_still_make_progress(lake, five):
    """S1.4: a fetch returns at least one record even past its byte budget, so a reader never stalls."""
    c = consumer(lake, **{"max.poll.records": 2, "max.partition.fetch.bytes": 1})
    c.assign([TopicPartition(five, 0, OFFSET_BEGINNING)])
    offsets = []
    while len(offsets) < 5:
        message = c.poll(2.0)
        assert message is not None, f"stalled after offsets {offsets}"
        offsets.append(message.offset())
    assert offsets == [0, 1, 2, 3, 4]
    c.close()


def test_seek_and_position(lake, five):
    c = consumer(lake)
    c.assign([TopicPartition(five, 0, OFFSET_BEGINNING)])
    assert [m.offset() for m in c.consume(2, timeout=2.0)] == [0, 1]
    assert [tp.offset for tp in c.position([TopicPartition(five, 0)])] == [2]
    c.seek(TopicPartition(five, 0, 4))
    assert [tp.offset for tp in c.position([TopicPartition(five, 0)])] == [4]
    assert c.poll(2.0).offset() == 4
    c.seek(TopicPartition(five, 0, OFFSET_BEGINNING))
    assert c.poll(2.0).value() == b"v0"
    c.seek(TopicPartition(five, 0, OFFSET_END))
    assert [tp.offset for tp in c.position([TopicPartition(five, 0)])] == [5]
    with pytest.raises(KafkaException) as raised:
        c.seek(TopicPartition(five, 1, 0))
    assert raised.value.args[0].code() == KafkaError._STATE
    c.close()


def test_get_watermark_offsets_follow_new_writes(lake, five):
    """S1.3: the high watermark is the LEO; an unassigned partition can be asked too."""
    c = consumer(lake)
    assert c.get_watermark_offsets(TopicPartition(five, 0)) == (0, 5)
    c.assign([TopicPartition(five, 0, OFFSET_END)])
    other = producer(lake)
    other.produce(five, b"v5")
    other.produce(five, b"v6")
    other.flush()
    assert c.get_watermark_offsets(TopicPartition(five, 0)) == (0, 7)
    assert c.poll(2.0).value() == b"v5"
    c.close()


def test_closed_consumer_raises_runtime_error(lake, five):
    c = consumer(lake)
    c.assign([TopicPartition(five, 0, OFFSET_BEGINNING)])
    c.close()
    c.close()  # closing twice is harmless
    calls = [
        lambda: c.poll(0),
        lambda: c.consume(1, 0),
        lambda: c.assign([TopicPartition(five, 0)]),
        lambda: c.assignment(),
        lambda: c.seek(TopicPartition(five, 0, 0)),
        lambda: c.position([TopicPartition(five, 0)]),
        lambda: c.get_watermark_offsets(TopicPartition(five, 0)),
    ]
    for call in calls:
        with pytest.raises(RuntimeError):
            call()


def test_consumer_context_manager_closes(lake, five):
    with consumer(lake) as c:
        c.assign([TopicPartition(five, 0, 3)])
        assert c.poll(2.0).value() == b"v3"
    with pytest.raises(RuntimeError):
        c.poll(0)


def test_partition_eof_event_once_per_reaching_the_end(lake, five):
    c = consumer(lake, **{"enable.partition.eof": True})
    c.assign([TopicPartition(five, 0, 3)])
    assert [m.offset() for m in c.consume(2, timeout=2.0)] == [3, 4]
    eof = c.poll(2.0)
    assert eof is not None and eof.error() is not None
    assert eof.error().code() == KafkaError._PARTITION_EOF
    assert eof.error().name() == "_PARTITION_EOF"
    assert (eof.topic(), eof.partition(), eof.offset()) == (five, 0, 5)
    assert c.poll(0.2) is None  # reported once until there is more to read

    p = producer(lake)
    p.produce(five, b"v5")
    p.flush()
    message = c.poll(2.0)
    assert (message.offset(), message.value(), message.error()) == (5, b"v5", None)
    again = c.poll(2.0)
    assert again.error().code() == KafkaError._PARTITION_EOF and again.offset() == 6
    c.close()


def test_without_partition_eof_the_end_is_silent(lake, five):
    c = consumer(lake)
    c.assign([TopicPartition(five, 0, 5)])
    assert c.poll(0.2) is None
    c.close()


@pytest.mark.parametrize(
    ("policy", "offset", "first_read"),
    [
        ("earliest", None, 0),
        ("latest", None, 5),
        ("earliest", 99, 0),
        ("latest", 99, 5),
        ("smallest", None, 0),
        ("largest", None, 5),
    ],
)
def test_auto_offset_reset_picks_the_start(lake, five, policy, offset, first_read):
    """No valid position (none given, or beyond the LEO: S1.4) starts at the policy's end."""
    c = consumer(lake, **{"auto.offset.reset": policy})
    c.assign([TopicPartition(five, 0) if offset is None else TopicPartition(five, 0, offset)])
    assert [tp.offset for tp in c.position([TopicPartition(five, 0)])] == [first_read]
    p = producer(lake)
    p.produce(five, b"v5")
    p.flush()
    assert c.poll(2.0).offset() == first_read
    c.close()


def test_auto_offset_reset_error_raises_offset_out_of_range(lake, five):
    """S1.4: a start beyond the LEO with auto.offset.reset=error is OffsetOutOfRange with the real bounds."""
    c = consumer(lake, **{"auto.offset.reset": "error"})
    with pytest.raises(OffsetOutOfRange) as raised:
        c.assign([TopicPartition(five, 0, 99)])
        c.poll(1.0)
    assert (raised.value.log_start_offset, raised.value.log_end_offset) == (0, 5)
    assert raised.value.error.code() == KafkaError.OFFSET_OUT_OF_RANGE
    # A valid position reads normally under the same policy.
    c.assign([TopicPartition(five, 0, 2)])
    assert c.poll(2.0).offset() == 2
    c.close()


def test_message_accessors(lake, make_topic):
    topic = make_topic()
    p = producer(lake)
    p.produce(topic, b"hello", key=b"k", headers=[("h", b"1")], timestamp=1234)
    p.produce(topic, None)
    p.flush()
    first, second = read_all(lake, topic)
    assert first.topic() == topic and first.partition() == 0 and first.offset() == 0
    assert (first.key(), first.value(), first.headers(), first.timestamp()) == (
        b"k",
        b"hello",
        [("h", b"1")],
        (TIMESTAMP_CREATE_TIME, 1234),
    )
    assert first.error() is None
    assert len(first) == 5
    assert (second.value(), len(second)) == (None, 0)
    first.set_key(b"k2")
    first.set_value(b"bye")
    first.set_headers([("h", b"2")])
    assert (first.key(), first.value(), first.headers(), len(first)) == (b"k2", b"bye", [("h", b"2")], 3)


def test_two_partitions_are_read_in_turn_and_each_in_order(lake, make_topic):
    topic = make_topic(partitions=2)
    p = producer(lake)
    for i in range(6):
        p.produce(topic, f"p{i % 2}-{i}", partition=i % 2)
    p.flush()
    c = consumer(lake)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING), TopicPartition(topic, 1, OFFSET_BEGINNING)])
    got = c.consume(6, timeout=2.0)
    while len(got) < 6:
        more = c.consume(6, timeout=2.0)
        assert more, f"only {len(got)} of 6 messages"
        got += more
    by_partition = {0: [], 1: []}
    for m in got:
        by_partition[m.partition()].append((m.offset(), m.value()))
    assert by_partition == {
        0: [(0, b"p0-0"), (1, b"p0-2"), (2, b"p0-4")],
        1: [(0, b"p1-1"), (1, b"p1-3"), (2, b"p1-5")],
    }
    c.close()


# -- errors ----------------------------------------------------------------------------


def test_kafka_error_value_object():
    error = KafkaError(KafkaError.OFFSET_MISMATCH, "expected 3, log end offset 7")
    assert error.code() == 1000
    assert error.name() == "OFFSET_MISMATCH"
    assert error.str() == "expected 3, log end offset 7"
    assert (error.retriable(), error.fatal(), error.txn_requires_abort()) == (False, False, False)
    assert error == KafkaError.OFFSET_MISMATCH
    assert error == KafkaError(KafkaError.OFFSET_MISMATCH)
    assert error != KafkaError(KafkaError.OFFSET_OUT_OF_RANGE)
    assert "OFFSET_MISMATCH" in str(error)
    assert KafkaError(KafkaError._PARTITION_EOF).name() == "_PARTITION_EOF"
    assert KafkaError(KafkaError._PARTITION_EOF).str() == "Broker: No more messages"  # librdkafka's rd_kafka_err2str
    assert KafkaError(KafkaError.TOPIC_ALREADY_EXISTS).name() == "TOPIC_ALREADY_EXISTS"
    assert KafkaError(12345).name() == "ERR_12345?"  # librdkafka's rd_kafka_err2name
    flagged = KafkaError(KafkaError.UNKNOWN, "x", fatal=True, retriable=True, txn_requires_abort=True)
    assert (flagged.retriable(), flagged.fatal(), flagged.txn_requires_abort()) == (True, True, True)


@pytest.mark.parametrize(
    ("exception", "code", "retriable", "fatal", "abortable"),
    [
        (OffsetMismatch, KafkaError.OFFSET_MISMATCH, False, False, False),
        (ConcurrentTransactions, KafkaError.CONCURRENT_TRANSACTIONS, True, False, False),
        (KafkaStorageError, KafkaError.KAFKA_STORAGE_ERROR, True, False, False),
        (ProducerFenced, KafkaError.PRODUCER_FENCED, False, True, False),
        (AbortableError, KafkaError.UNKNOWN, False, False, True),
        (TopicAlreadyExists, KafkaError.TOPIC_ALREADY_EXISTS, False, False, False),
    ],
)
def test_exceptions_carry_a_kafka_error_with_their_class(exception, code, retriable, fatal, abortable):
    """KIP-1050 taxonomy: each class says whether it is retriable, abortable or fatal."""
    raised = exception("what happened", log_end_offset=7)
    assert isinstance(raised, KafkaException)
    error = raised.args[0]
    assert isinstance(error, KafkaError) and raised.error is error
    assert error.code() == code
    assert (error.retriable(), error.fatal(), error.txn_requires_abort()) == (retriable, fatal, abortable)
    assert str(raised) == "what happened" == error.str()
    assert raised.log_end_offset == 7


# -- admin -------------------------------------------------------------------------------


def test_create_topics_resolves_futures_and_second_create_is_topic_already_exists(lake):
    """S8.3: the refused second create leaves the existing topic's tables byte for byte as they were."""
    admin = AdminClient({"lakelog.root": lake})
    futures = admin.create_topics([NewTopic("orders", num_partitions=3), NewTopic("audit")])
    assert set(futures) == {"orders", "audit"}
    assert futures["orders"].result() is None and futures["audit"].result() is None
    metadata = admin.list_topics()
    assert sorted(metadata.topics) == ["audit", "orders"]
    assert sorted(metadata.topics["orders"].partitions) == [0, 1, 2]
    assert sorted(metadata.topics["audit"].partitions) == [0]

    before = table_fingerprint(f"{lake}/topics/orders")
    again = admin.create_topics([NewTopic("orders", num_partitions=5)])["orders"]
    error = again.exception()
    assert isinstance(error, TopicAlreadyExists)
    assert error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(TopicAlreadyExists):
        again.result()
    assert table_fingerprint(f"{lake}/topics/orders") == before
    assert sorted(admin.list_topics().topics["orders"].partitions) == [0, 1, 2]


@pytest.mark.parametrize(
    ("new_topic", "error_class"),
    [
        (NewTopic("bad name!"), InvalidTopic),
        (NewTopic(".."), InvalidTopic),
        (NewTopic("fine", config={"no.such.key": "1"}), InvalidConfig),
        (NewTopic("fine", config={"check.expected.offsets": "maybe"}), InvalidConfig),
        (NewTopic("fine", num_partitions=0), InvalidPartitions),
    ],
)
def test_create_topics_refusal_is_in_the_future_and_creates_nothing(lake, new_topic, error_class):
    admin = AdminClient({"lakelog.root": lake})
    future = admin.create_topics([new_topic])[new_topic.topic]
    assert isinstance(future.exception(), error_class)
    assert admin.list_topics().topics == {}
    assert table_fingerprint(lake) == []


def test_create_topics_validate_only_creates_nothing(lake):
    admin = AdminClient({"lakelog.root": lake})
    futures = admin.create_topics([NewTopic("ok", num_partitions=2), NewTopic("bad name")], validate_only=True)
    assert futures["ok"].result() is None
    assert isinstance(futures["bad name"].exception(), InvalidTopic)
    assert admin.list_topics().topics == {}
    assert table_fingerprint(lake) == []


@pytest.mark.parametrize("partitions", [0, -5])
def test_create_topics_validate_only_answers_as_create_does(lake, partitions):
    """validate_only gives the error that the real create would give, as Kafka's CreateTopics does."""
    admin = AdminClient({"lakelog.root": lake})
    validated = admin.create_topics([NewTopic("t", num_partitions=partitions)], validate_only=True)["t"].exception()
    created = admin.create_topics([NewTopic("t", num_partitions=partitions)])["t"].exception()
    assert isinstance(created, InvalidPartitions)
    assert table_fingerprint(lake) == []
    assert validated is not None
    assert validated.error.code() == created.error.code() == KafkaError.INVALID_PARTITIONS


def test_list_topics_of_one_topic(lake, make_topic):
    make_topic(name="a", partitions=2)
    make_topic(name="b")
    admin = AdminClient({"lakelog.root": lake})
    assert list(admin.list_topics("a").topics) == ["a"]
    assert sorted(admin.list_topics("a").topics["a"].partitions) == [0, 1]
    assert sorted(producer(lake).list_topics().topics) == ["a", "b"]


def test_describe_topics_gives_offsets_files_versions_and_config(lake, make_topic):
    topic = make_topic(partitions=2, config={"check.expected.offsets": True, "segment.files": 50})
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": 4})
    for i in range(10):
        p.produce(topic, f"v{i}", partition=0, expected_offset=i)
    p.flush()
    futures = AdminClient({"lakelog.root": lake}).describe_topics([topic, "missing"])
    description = futures[topic].result()
    assert description.name == topic
    assert [
        (d.id, d.log_start_offset, d.high_watermark, d.log_end_offset, d.files, d.table_version)
        for d in description.partitions
    ] == [(0, 0, 10, 10, 3, 3), (1, 0, 0, 0, 0, 0)]
    assert description.config["num.partitions"] == 2
    assert description.config["check.expected.offsets"] is True
    assert description.config["segment.files"] == 50
    assert description.config["compression.type"] == "snappy"
    assert isinstance(futures["missing"].exception(), UnknownTopicOrPartition)


# -- idempotent producer end to end (S3) ------------------------------------------------------


def test_S3_2_resending_a_produced_batch_at_the_log_appends_nothing(lake, make_topic):
    """S3.2: the same (PID, epoch, sequence range) sent again returns the original offsets; each message once."""
    topic = make_topic()
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": 4})
    values = [f"m{i}".encode() for i in range(10)]
    for value in values:
        p.produce(topic, value)
    p.flush()

    log = open_partition(lake, topic, 0)
    rows = log.fetch(0, max_records=100).rows.to_pylist()
    # What the producer's batch headers said, as recorded in the log itself.
    producer_id = rows[0]["producer_id"]
    assert producer_id >= 0
    assert {row["producer_id"] for row in rows} == {producer_id}
    assert [row["sequence"] for row in rows] == list(range(10))
    before_version, before_files = log.version, table_fingerprint(log.table.uri)

    for base, end in ((0, 4), (4, 8), (8, 10)):
        for _ in range(3):
            result = log.append(
                payload_table(values[base:end]),
                BatchHeader(producer_id=producer_id, producer_epoch=rows[0]["producer_epoch"], base_sequence=base),
            )
            assert result.duplicate
            assert (result.base_offset, result.last_offset) == (base, end - 1)
    log.refresh()
    assert (log.version, log.log_end_offset()) == (before_version, 10)
    assert table_fingerprint(log.table.uri) == before_files
    assert [(m.offset(), m.value()) for m in read_all(lake, topic)] == list(enumerate(values))

    # The producer carries on after the re-sends with its next sequence.
    p.produce(topic, b"m10")
    p.flush()
    assert [m.value() for m in read_all(lake, topic)] == [*values, b"m10"]


def test_S3_1_one_producer_id_with_sequences_per_partition_from_zero(lake, make_topic):
    topic = make_topic(partitions=2)
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": 2})
    for i in range(5):
        p.produce(topic, f"a{i}", partition=0)
    for i in range(3):
        p.produce(topic, f"b{i}", partition=1)
    p.flush()
    rows = {partition: open_partition(lake, topic, partition).fetch(0).rows.to_pylist() for partition in (0, 1)}
    assert len({row["producer_id"] for partition in rows for row in rows[partition]}) == 1
    assert [row["sequence"] for row in rows[0]] == [0, 1, 2, 3, 4]
    assert [row["sequence"] for row in rows[1]] == [0, 1, 2]
    assert {row["producer_epoch"] for partition in rows for row in rows[partition]} == {0}
    # A second producer gets a different producer id (allocated by one strict commit each).
    other = producer(lake)
    other.produce(topic, b"c", partition=0)
    other.flush()
    last = open_partition(lake, topic, 0).fetch(5).rows.to_pylist()[0]
    assert last["producer_id"] != rows[0][0]["producer_id"] and last["sequence"] == 0


def test_S3_3_a_sequence_gap_is_out_of_order_and_writes_nothing(lake, make_topic):
    topic = make_topic()
    p = producer(lake)
    p.produce(topic, b"a")
    p.flush()
    log = open_partition(lake, topic, 0)
    producer_id = log.fetch(0).rows.column("producer_id")[0].as_py()
    before = table_fingerprint(log.table.uri)
    with pytest.raises(OutOfOrderSequence) as raised:
        log.append(payload_table([b"b"]), BatchHeader(producer_id=producer_id, producer_epoch=0, base_sequence=2))
    assert raised.value.expected_sequence == 1
    assert table_fingerprint(log.table.uri) == before


class _LostAcknowledgement:
    """Makes the next partition commits land, then fail as storage errors, leaving the caller's handle stale.

    The commit is real (Delta is not mocked): the same version the caller decided on is
    committed through a second handle at that version, so a lost race is still a
    CommitConflict. Only the acknowledgement is lost, as when a storage request
    succeeds but its response never arrives.
    """

    def __init__(self, monkeypatch, times: int) -> None:
        self.remaining = times
        self.lost = 0
        original = Table.append

        def append(table: Table, data, **kwargs):
            if self.remaining and "/topics/" in table.uri:
                twin = Table(table.uri, DeltaTable(table.uri, version=table.version))
                try:
                    original(twin, data, **kwargs)
                except CommitConflict:
                    table.refresh()  # as the real append does when it loses the race
                    raise
                self.remaining -= 1
                self.lost += 1
                raise KafkaStorageError("the storage acknowledgement was lost")
            return original(table, data, **kwargs)

        monkeypatch.setattr(Table, "append", append)


def test_S3_2_idempotent_producer_retry_after_a_lost_ack_lands_each_message_once(lake, make_topic, monkeypatch):
    """S3.2: a batch committed but not acknowledged is retried with the same sequence and reported
    with its original offsets; every message is in the log exactly once."""
    topic = make_topic()
    reports = []
    p = producer(
        lake,
        **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": 3, "retry.backoff.ms": 1},
        on_delivery=lambda e, m: reports.append((e, m.offset(), m.value())),
    )
    faults = _LostAcknowledgement(monkeypatch, times=2)
    values = [f"m{i}".encode() for i in range(7)]
    for value in values:
        p.produce(topic, value)
    p.flush()
    assert faults.lost == 2
    assert reports == [(None, i, value) for i, value in enumerate(values)]
    assert [(m.offset(), m.value()) for m in read_all(lake, topic)] == list(enumerate(values))
    assert leo(lake, topic) == 7


def test_non_idempotent_producer_does_not_retry_an_ambiguous_storage_error(lake, make_topic, monkeypatch):
    """Without a producer id a retry could duplicate: the error is reported and the batch is in the log once."""
    topic = make_topic()
    reports = []
    p = producer(lake, **{"enable.idempotence": False}, on_delivery=lambda e, m: reports.append(e))
    faults = _LostAcknowledgement(monkeypatch, times=1)
    p.produce(topic, b"once")
    p.flush()
    assert faults.lost == 1
    assert [error.code() for error in reports] == [KafkaError.KAFKA_STORAGE_ERROR]
    assert reports[0].retriable()
    assert [m.value() for m in read_all(lake, topic)] == [b"once"]


# -- bad input at the client, and damaged tables (S8.3) ----------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"value": 123},
        {"key": ["k"]},
        {"timestamp": -1},
        {"timestamp": "now"},
        {"headers": "x"},
        {"headers": [(1, b"v")]},
        {"expected_offset": -1},
        {"expected_offset": True},
        {"partition": "0"},
        {"partition": 7},
    ],
    ids=lambda bad: "-".join(f"{key}={value!r}" for key, value in bad.items()),
)
def test_S8_3_produce_refuses_bad_input_with_one_sentence_and_writes_nothing(lake, make_topic, bad):
    topic = make_topic()
    p = producer(lake)
    before = table_fingerprint(Path(lake) / "topics" / topic)
    with pytest.raises(KafkaException) as raised:
        p.produce(topic, **{"value": b"v", **bad})
    assert "\n" not in str(raised.value) and next(iter(bad)) in str(raised.value)
    assert len(p) == 0
    assert p.flush(5) == 0
    assert table_fingerprint(Path(lake) / "topics" / topic) == before


def test_unassign_stops_reading_and_a_new_assign_starts_again(lake, make_topic):
    topic = make_topic(partitions=2)
    p = producer(lake)
    for partition in (0, 1):
        p.produce(topic, f"v{partition}", partition=partition)
    p.flush()
    with consumer(lake, **{"auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert sorted(m.value() for m in c.consume(10, 2.0)) == [b"v0", b"v1"]
        c.unassign()
        assert c.assignment() == []
        assert c.consume(10, 0.2) == []
        c.assign([TopicPartition(topic, 1, 0)])
        assert [m.value() for m in c.consume(10, 2.0)] == [b"v1"]


def test_a_corrupt_data_file_fails_the_consumer_and_the_cli_with_one_line_naming_it(lake, make_topic):
    topic = make_topic()
    p = producer(lake)
    for n in range(3):
        p.produce(topic, f"v{n}", partition=0)
        p.flush()
    table = open_partition(lake, topic, 0).table
    middle = [entry for entry in table.files() if entry.min_offset == 1][0]
    Path(table.file_path(middle)).write_bytes(b"not parquet")
    with consumer(lake, **{"auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, 0, 1)])
        with pytest.raises(CorruptRecord) as raised:
            c.consume(10, 2.0)
        assert Path(middle.path).name in str(raised.value)
    cli = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", "consume", topic, "--root", lake, "--partition", "0", "--offset", "1"],
        capture_output=True, text=True, timeout=120,
    )
    assert cli.returncode == 1  # a failure, not bad input: exit 1 (exit 2 is for bad input)
    assert len(cli.stderr.strip().splitlines()) == 1 and Path(middle.path).name in cli.stderr
