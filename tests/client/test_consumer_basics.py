"""The confluent-kafka-shaped Consumer on real Delta tables: assign, poll, consume, seek, watermarks, EOF events,
auto.offset.reset, messages, a corrupt file (S1.4). Split out of test_producer_consumer.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakelog import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from lakelog.errors import (
    CorruptRecord,
    OffsetOutOfRange,
)
from lakelog.log import open_partition
from lakelog.log.partition_file import partition_files
from tests.client.clients import NEVER_LINGER_MS, consumer, producer, read_all


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
    middle = [entry for entry in partition_files(table) if entry.min_offset == 1][0]
    Path(table.file_path(middle)).write_bytes(b"not parquet")
    with consumer(lake, **{"auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, 0, 1)])
        with pytest.raises(CorruptRecord) as raised:
            c.consume(10, 2.0)
        assert Path(middle.path).name in str(raised.value)
    cli = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", "consume", "--topic", topic, "--root", lake, "--partition", "0", "--offset", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1  # a failure, not bad input: exit 1 (exit 2 is for bad input)
    assert len(cli.stderr.strip().splitlines()) == 1 and Path(middle.path).name in cli.stderr
