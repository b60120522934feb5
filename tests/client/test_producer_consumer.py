"""The confluent-kafka-shaped Producer on real Delta tables: config, delivery reports, batching, partitioning,
idempotence (S3). Consumer basics are in test_consumer_basics.py, errors and topic admin in test_errors_and_topics.py.

Every test writes and reads real partition tables under a fresh root; nothing of
Delta is mocked. Rules of ../shared/design/SEMANTICS.md are named where they apply.
"""

from __future__ import annotations

import math
import sys
import time
import zlib
from pathlib import Path

import pytest
from helpers import FakeClock, table_fingerprint

from lakelog import (
    TIMESTAMP_CREATE_TIME,
    AdminClient,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from lakelog.errors import (
    CommitConflict,
    InvalidConfig,
    KafkaStorageError,
    OutOfOrderSequence,
)
from lakelog.log import BatchHeader, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.store import Table
from tests.client.clients import NEVER_LINGER_MS, leo, producer, read_all, version


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


@pytest.mark.parametrize("with_callback", [False, True])
def test_a_sent_batch_keeps_its_messages_only_for_callbacks(lake, make_topic, with_callback):
    """Without a delivery callback a sent batch's reports are only counted: len() counts them and poll() serves
    them (its return counts them), as confluent-kafka's; the messages themselves are let go of once sent. With a
    callback each message is kept until its report is served."""
    topic = make_topic()
    served = []
    callbacks = {"on_delivery": lambda e, m: served.append(m.value())} if with_callback else {}
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": 2}, **callbacks)
    value = f"a value of its own {time.monotonic_ns()}".encode()  # sys.getrefcount tells who holds it
    unheld = sys.getrefcount(value)
    p.produce(topic, value)
    assert sys.getrefcount(value) == unheld + 1  # queued
    p.produce(topic, value)  # fills the batch: sent
    assert version(lake, topic) == 1
    assert sys.getrefcount(value) == unheld + (2 if with_callback else 0)
    assert len(p) == 2
    assert p.poll(0) == 2
    assert len(p) == 0
    assert served == ([value, value] if with_callback else [])
    assert sys.getrefcount(value) == unheld + (2 if with_callback else 0)  # `served` holds them now


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
    assert len(partition_files(log.table)) == math.ceil(count / per_batch)
    assert [m.offset() for m in read_all(lake, topic)] == list(range(count))


def test_batch_size_bytes_bounds_a_batch(lake, make_topic):
    topic = make_topic()
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.size": 10})
    for i in range(9):
        p.produce(topic, f"v{i:03d}")  # 4 bytes: the third message reaches 12 >= 10
    p.flush()
    assert version(lake, topic) == 3


def test_linger_ms_holds_a_batch_until_it_has_waited(lake, make_topic):
    """A batch is sent once its first message has waited linger.ms on the producer's clock, not a millisecond
    before, as one commit. The clock is passed in, so nothing here depends on the machine's speed."""
    topic = make_topic()
    clock = FakeClock()
    served = []
    p = Producer({"lakelog.root": lake, "linger.ms": 400, "on_delivery": lambda e, m: served.append(m.offset())}, clock=clock)
    for i in range(3):
        p.produce(topic, f"v{i}")
        clock.advance(100)
    assert p.poll(0) == 0  # 300 ms since the first message
    clock.advance(99)
    assert p.poll(0) == 0  # 399 ms
    assert version(lake, topic) == 0 and served == []
    clock.advance(1)
    assert p.poll(0) == 3  # 400 ms: sent, and its reports served
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
                twin = Table.open(table.uri, version=table.version)
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
