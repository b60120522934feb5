"""The Consumer's isolation.level on real Delta tables: what it returns, its positions, EOF and watermarks (S5).

Transactional data is written straight to the partition log (a batch per call)
with the markers a coordinator writes, so each test controls exactly which
transactions are open, committed or aborted.
"""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog import OFFSET_BEGINNING, OFFSET_END, AdminClient, Consumer, KafkaError, TopicPartition
from lakelog.client.types import Message
from lakelog.errors import InvalidConfig
from lakelog.log import BatchHeader, ControlType, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED

pytestmark = pytest.mark.roots("local", "s3")


def consumer(lake: str, **conf) -> Consumer:
    return Consumer({"lakelog.root": lake, **conf})


def drain(c: Consumer, timeout: float = 0.5) -> list[Message]:
    """Every message and event until nothing comes for `timeout` seconds."""
    out = []
    while (message := c.poll(timeout)) is not None:
        out.append(message)
    return out


def data(messages: list[Message]) -> list[tuple[int, bytes]]:
    return [(m.offset(), m.value()) for m in messages if m.error() is None]


def eofs(messages: list[Message]) -> list[int]:
    return [m.offset() for m in messages if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF]


@pytest.fixture
def history(lake, make_topic):
    """A partition holding: n0 | txn of 1 committed | txn of 2 aborted | n5 | txn of 3 open at offset 8.

    Offsets: 0 n0, 1 a1 (1), 2 b2 (2), 3 COMMIT(1), 4 b4 (2), 5 n5, 6 ABORT(2), 7 n7, 8 c8 (3, open), 9 n9.
    LSO 8, HW 10.
    """
    topic = make_topic()
    log = open_partition(lake, topic, 0)

    def txn(producer_id: int, value: bytes, sequence: int) -> None:
        log.append(payload_table([value]), BatchHeader(producer_id, 0, sequence, is_transactional=True), transaction=_UNVERIFIED)

    log.append(payload_table([b"n0"]))
    txn(1, b"a1", 0)
    txn(2, b"b2", 0)
    log.append_marker(1, 1, ControlType.COMMIT)
    txn(2, b"b4", 1)
    log.append(payload_table([b"n5"]))
    log.append_marker(2, 1, ControlType.ABORT)
    log.append(payload_table([b"n7"]))
    txn(3, b"c8", 0)
    log.append(payload_table([b"n9"]))
    assert (log.last_stable_offset(), log.high_watermark()) == (8, 10)
    return topic, log


def test_isolation_level_defaults_to_read_committed_and_is_validated(lake, history):
    topic, log = history
    assert consumer(lake).config["isolation.level"] == "read_committed"
    before = table_fingerprint(log.table.uri)
    for bad in ("READ_COMMITTED", "serializable", "", 1, None):
        with pytest.raises(InvalidConfig) as raised:
            consumer(lake, **{"isolation.level": bad})
        assert raised.value.key == "isolation.level"
    assert table_fingerprint(log.table.uri) == before


def test_S5_2_read_committed_consumer_gets_committed_rows_below_the_lso(lake, history):
    topic, log = history
    with consumer(lake) as c:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert data(drain(c)) == [(0, b"n0"), (1, b"a1"), (5, b"n5"), (7, b"n7")]
        log.append_marker(3, 1, ControlType.COMMIT)
        assert data(drain(c)) == [(8, b"c8"), (9, b"n9")]


def test_S5_2_read_uncommitted_consumer_gets_every_data_row_below_the_hw(lake, history):
    topic, _ = history
    with consumer(lake, **{"isolation.level": "read_uncommitted"}) as c:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert data(drain(c)) == [
            (0, b"n0"),
            (1, b"a1"),
            (2, b"b2"),
            (4, b"b4"),
            (5, b"n5"),
            (7, b"n7"),
            (8, b"c8"),
            (9, b"n9"),
        ]


@pytest.mark.parametrize("budget", [{}, {"max.poll.records": 1}, {"max.partition.fetch.bytes": 1}])
def test_S5_4_positions_move_past_filtered_rows(lake, history, budget):
    """S5.4: the position after a message is past every marker and aborted row the fetch skipped, never back."""
    topic, _ = history
    with consumer(lake, **budget) as c:
        tp = TopicPartition(topic, 0)
        c.assign([TopicPartition(topic, 0, 2)])  # starts inside the aborted transaction
        assert c.position([tp])[0].offset == 2
        offsets, positions = [], []
        while (message := c.poll(0.5)) is not None:
            offsets.append(message.offset())
            positions.append(c.position([tp])[0].offset)
        assert offsets == [5, 7]
        assert positions == sorted(positions) and positions[-1] == 8  # waits at the LSO, not at 4 or 6


def test_S5_1_partition_eof_is_reported_at_the_lso_in_read_committed(lake, history):
    topic, log = history
    with consumer(lake, **{"enable.partition.eof": True}) as c:
        c.assign([TopicPartition(topic, 0, 7)])
        messages = drain(c)
        assert data(messages) == [(7, b"n7")] and eofs(messages) == [8]
        log.append_marker(3, 1, ControlType.COMMIT)  # the LSO moves to the HW, 11
        messages = drain(c)
        assert data(messages) == [(8, b"c8"), (9, b"n9")] and eofs(messages) == [11]
    with consumer(lake, **{"enable.partition.eof": True, "isolation.level": "read_uncommitted"}) as c:
        c.assign([TopicPartition(topic, 0, 9)])
        assert eofs(drain(c)) == [11]


def test_S5_1_partition_eof_again_when_an_abort_moves_the_lso_without_data(lake, history):
    """An aborted transaction moves the LSO but yields no message: the reader hears it is at the end again."""
    topic, log = history
    with consumer(lake, **{"enable.partition.eof": True}) as c:
        c.assign([TopicPartition(topic, 0, 8)])
        assert eofs(drain(c)) == [8]
        log.append_marker(3, 1, ControlType.ABORT)
        messages = drain(c)
        assert data(messages) == [(9, b"n9")] and eofs(messages) == [11]


def test_S5_1_watermarks_are_low_and_lso_in_read_committed_low_and_hw_in_read_uncommitted(lake, history):
    topic, log = history
    tp = TopicPartition(topic, 0)
    with consumer(lake) as committed, consumer(lake, **{"isolation.level": "read_uncommitted"}) as uncommitted:
        assert committed.get_watermark_offsets(tp) == (0, 8)
        assert uncommitted.get_watermark_offsets(tp) == (0, 10)
        log.append_marker(3, 1, ControlType.COMMIT)
        assert committed.get_watermark_offsets(tp) == (0, 11)
        assert uncommitted.get_watermark_offsets(tp) == (0, 11)


def test_S5_1_offset_end_is_the_lso_in_read_committed(lake, history):
    """OFFSET_END and auto.offset.reset=latest resolve to the LSO for read_committed, as Kafka's ListOffsets."""
    topic, log = history
    tp = TopicPartition(topic, 0)
    with consumer(lake) as c:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        assert c.position([tp])[0].offset == 8
        c.assign([TopicPartition(topic, 0, 99)])  # out of range: reset to latest
        assert c.position([tp])[0].offset == 8
        c.assign([TopicPartition(topic, 0, 9)])  # between LSO and HW: valid, waits for the transaction
        assert c.position([tp])[0].offset == 9
        assert c.poll(0.3) is None
        log.append_marker(3, 1, ControlType.COMMIT)
        assert data(drain(c)) == [(9, b"n9")]
    with consumer(lake, **{"isolation.level": "read_uncommitted"}) as c:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        assert c.position([tp])[0].offset == 11


def test_S5_1_admin_describe_shows_hw_and_lso_per_partition(lake, history):
    topic, _ = history
    description = AdminClient({"lakelog.root": lake}).describe_topics([topic])[topic].result()
    [partition] = description.partitions
    assert (partition.high_watermark, partition.last_stable_offset, partition.log_end_offset) == (10, 8, 10)
