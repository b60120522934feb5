"""What a produced message may be: refused at the call with a Kafka-named error, or alone in its delivery report,
and nothing of it written (S8.3): timestamps the log can hold, sizes counted with headers against message.max.bytes
and the topic's max.message.bytes, strings that are UTF-8, timeouts that are numbers."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from helpers import unchanged
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog import Consumer, KafkaError, Producer
from lakelog.client.producer.accumulator import Batch
from lakelog.client.producer.limits import message_size
from lakelog.errors import InvalidArgument, InvalidType, KafkaException, MsgSizeTooLarge
from lakelog.log import open_partition, payload_table
from lakelog.log.records import MAX_TIMESTAMP_MS, conform_payload, record_sizes

NEVER_LINGER_MS = 600_000


@pytest.fixture
def reports():
    return []


@pytest.fixture
def producer(lake, reports):
    made = []

    def make(**conf):
        conf = {"lakelog.root": lake, "linger.ms": NEVER_LINGER_MS, **conf}
        made.append(Producer(conf, on_delivery=lambda error, message: reports.append((error, message))))
        return made[-1]

    yield make
    for p in made:
        p.close()


def outcomes(reports):
    """Each report as (its error's name or None, offset, value)."""
    return [(None if error is None else error.name(), message.offset(), message.value()) for error, message in reports]


def stored_timestamps_us(lake, topic):
    log = open_partition(lake, topic, 0)
    return log.fetch(0).rows.column("timestamp").cast(pa.int64()).to_pylist()


# -- timestamps (finding 5) -----------------------------------------------------------


@pytest.mark.parametrize("timestamp", [MAX_TIMESTAMP_MS + 1, 10**16, 2**62, 2**63 - 1, 2**63, 2**64])
def test_timestamp_past_the_column_refused_at_produce_nothing_queued(lake, make_topic, producer, reports, timestamp):
    """finding 5: a timestamp whose microseconds do not fit the int64 column is InvalidArgument at produce(), where it
    was stored wrapped (10^16 read back as -8.4e15, 2^62 as 0) or made flush() raise OverflowError."""
    topic = make_topic()
    p = producer()
    with unchanged(lake):
        with pytest.raises(InvalidArgument) as raised:
            p.produce(topic, b"late", timestamp=timestamp)
        assert raised.value.error.code() == KafkaError._INVALID_ARG
        assert len(p) == 0
        assert p.flush() == 0
    assert reports == []


def test_latest_timestamp_the_column_holds_reads_back_exactly(lake, make_topic, producer):
    """finding 5: MAX_TIMESTAMP_MS is taken and stored as itself, not as another instant."""
    topic = make_topic()
    p = producer()
    p.produce(topic, b"last", timestamp=MAX_TIMESTAMP_MS)
    p.flush()
    assert stored_timestamps_us(lake, topic) == [MAX_TIMESTAMP_MS * 1000]


def test_bad_timestamp_fails_alone_the_batch_is_delivered(lake, make_topic, producer, reports):
    """finding 5: the messages queued beside a refused timestamp are delivered at flush(); none vanishes unreported
    (an OverflowError at flush() lost them all)."""
    topic = make_topic()
    p = producer()
    p.produce(topic, b"before", timestamp=1_000)
    with pytest.raises(InvalidArgument):
        p.produce(topic, b"bad", timestamp=2**63)
    p.produce(topic, b"after", timestamp=2_000)
    assert p.flush() == 0
    assert outcomes(reports) == [(None, 0, b"before"), (None, 1, b"after")]
    assert stored_timestamps_us(lake, topic) == [1_000_000, 2_000_000]


def test_produce_batch_bad_timestamp_fails_alone(lake, make_topic, producer, reports):
    """finding 5: in produce_batch() the refused message gets its `_error`, and the others are queued."""
    topic = make_topic()
    p = producer()
    messages = [{"value": b"a"}, {"value": b"bad", "timestamp": 10**16}, {"value": b"c"}]
    assert p.produce_batch(topic, messages) == 2
    assert messages[1]["_error"].code() == KafkaError._INVALID_ARG
    p.flush()
    assert outcomes(reports) == [(None, 0, b"a"), (None, 1, b"c")]


def test_payload_table_refuses_timestamps_the_column_cannot_hold():
    """finding 5: the log's own builder refuses them too, rather than wrap (10^16) or overflow (2^63)."""
    for timestamp in (10**16, 2**63, -(2**62)):
        with pytest.raises(InvalidArgument):
            payload_table([b"x"], timestamps_ms=[timestamp])
    assert payload_table([b"x"], timestamps_ms=[MAX_TIMESTAMP_MS]).column("timestamp").cast(pa.int64()).to_pylist() == [
        MAX_TIMESTAMP_MS * 1000
    ]


def test_message_that_cannot_be_built_at_send_fails_alone(lake, make_topic, producer, reports):
    """finding 5: the send's last guard: a queued message whose row cannot be built (one produce() would refuse,
    put in its batch by hand) is reported with _INVALID_ARG, and the rest of its batch is delivered."""
    topic = make_topic()
    p = producer()

    def pending(value, timestamp):
        return (None, value, None, timestamp, None)

    batch = Batch(topic, 0, 0, None, [pending(b"a", 1), pending(b"bad", 2**63), pending(b"c", 3)])
    p._gated.send(batch)
    p.flush()
    assert outcomes(reports) == [(None, 0, b"a"), ("_INVALID_ARG", None, b"bad"), (None, 1, b"c")]


# -- sizes (finding 6) ----------------------------------------------------------------


def test_headers_counted_against_message_max_bytes(lake, make_topic, producer, reports):
    """finding 6: headers count in a message's size: key + value + header names and values past message.max.bytes
    is MSG_SIZE_TOO_LARGE at produce() (a 50 MB header was taken), and exactly at it is taken."""
    topic = make_topic()
    p = producer(**{"message.max.bytes": 1000})
    with unchanged(lake):
        with pytest.raises(MsgSizeTooLarge) as raised:
            p.produce(topic, b"v" * 10, key=b"k", headers={"h": b"x" * 990})
        assert raised.value.error.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert (raised.value.size, raised.value.max_bytes) == (1002, 1000)
        with pytest.raises(MsgSizeTooLarge):
            p.produce(topic, None, headers=[("n" * 600, None), ("m", b"y" * 400)])
        assert len(p) == 0
    p.produce(topic, b"v" * 10, key=b"k", headers=[("h", b"x" * 988)])
    p.flush()
    assert outcomes(reports) == [(None, 0, b"v" * 10)]


def test_record_past_topic_max_message_bytes_fails_alone_in_its_report(lake, make_topic, producer, reports):
    """finding 6: a producer allowed larger messages than the topic writes a record past the topic's
    max.message.bytes: MSG_SIZE_TOO_LARGE in that message's delivery report, nothing of it written, and the
    messages around it delivered (before: the 5,000-byte record was written into a 2,000-byte topic)."""
    topic = make_topic(config={"max.message.bytes": 2000})
    p = producer(**{"message.max.bytes": 100_000})
    p.produce(topic, b"small-1")
    p.produce(topic, b"z" * 1000, headers={"h": b"y" * 1001})  # 2,002 bytes with its header
    p.produce(topic, b"small-2")
    p.flush()
    assert outcomes(reports) == [(None, 0, b"small-1"), ("MSG_SIZE_TOO_LARGE", None, b"z" * 1000), (None, 1, b"small-2")]
    assert "max.message.bytes 2000" in reports[1][0].str()
    log = open_partition(lake, topic, 0)
    assert log.log_end_offset() == 2
    assert log.fetch(0).rows.column("value").to_pylist() == [b"small-1", b"small-2"]


def test_only_a_record_past_topic_max_message_bytes_writes_nothing(lake, make_topic, producer, reports):
    """finding 6: a batch of one too-large record leaves the table (version and files) as it was (S8.3)."""
    topic = make_topic(config={"max.message.bytes": 2000})
    p = producer(**{"message.max.bytes": 100_000})
    p.produce(topic, b"warm")
    p.flush()
    with unchanged(lake):
        p.produce(topic, b"z" * 5000)
        p.flush()
    assert outcomes(reports)[1:] == [("MSG_SIZE_TOO_LARGE", None, b"z" * 5000)]


def test_record_past_topic_max_message_bytes_makes_a_transaction_abort_only(lake, make_topic, producer, reports):
    """finding 6: in a transaction the refused delivery makes it abort-only, as any failed delivery does (S4.5)."""
    topic = make_topic(config={"max.message.bytes": 2000})
    p = producer(**{"message.max.bytes": 100_000, "transactional.id": "limits"})
    p.init_transactions()
    p.begin_transaction()
    p.produce(topic, b"z" * 5000)
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction()
    assert raised.value.error.txn_requires_abort()
    p.abort_transaction()
    assert outcomes(reports) == [("MSG_SIZE_TOO_LARGE", None, b"z" * 5000)]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=20),
            st.none() | st.binary(max_size=20),
            st.none() | st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_log_and_producer_count_a_record_the_same(records):
    """finding 6: the log's record_sizes and the producer's message_size agree to the byte, so a message the producer
    takes at message.max.bytes == max.message.bytes is one the topic takes."""
    keys, values, headers = ([record[i] for record in records] for i in range(3))
    payload = conform_payload(payload_table(values, keys=keys, headers=headers))
    expected = [message_size((key, value, header, 0, None)) for key, value, header in records]
    assert record_sizes(payload).tolist() == expected


# -- strings and timeouts ---------------------------------------------------------------

SURROGATE = "\ud800"


@pytest.mark.parametrize(
    "message",
    [
        {"value": SURROGATE},
        {"key": "k" + SURROGATE},
        {"headers": {"name": SURROGATE}},
        {"headers": [(SURROGATE, b"v")]},
    ],
    ids=["value", "key", "header value", "header name"],
)
def test_str_that_is_no_utf8_refused_at_produce(lake, make_topic, producer, reports, message):
    """A lone surrogate cannot be UTF-8 encoded: InvalidArgument (a ValueError) at produce(), never a raw
    UnicodeEncodeError, and a header name with one no longer fails the whole batch at flush()."""
    topic = make_topic()
    p = producer()
    p.produce(topic, b"kept")
    with unchanged(lake):
        with pytest.raises(InvalidArgument) as raised:
            p.produce(topic, **{"value": b"v", **message})
        assert not isinstance(raised.value, UnicodeError)
    p.flush()
    assert outcomes(reports) == [(None, 0, b"kept")]


@pytest.mark.parametrize(
    "timeout, error", [("1", InvalidType), (b"1", InvalidType), ([], InvalidType), (math.nan, InvalidArgument)]
)
def test_wrong_timeouts_refused_by_name(lake, make_topic, producer, timeout, error):
    """A timeout that is no number is InvalidType (a TypeError, as confluent-kafka's), NaN InvalidArgument: never a
    TypeError from a comparison inside, nor a wait that never ends (a consumer's poll(NaN))."""
    topic = make_topic()
    p = producer()
    for call in (p.poll, p.flush):
        with pytest.raises(error):
            call(timeout)
    with Consumer({"lakelog.root": lake, "group.id": "g"}) as c:
        c.subscribe([topic])
        with pytest.raises(error):
            c.poll(timeout)
        with pytest.raises(error):
            c.consume(1, timeout)


def test_numeric_timeouts_still_taken(lake, make_topic, producer):
    """None, ints, floats and negatives stay what they were (None / negative: no limit)."""
    p = producer()
    assert p.poll(0) == 0
    assert p.poll(0.0) == 0
    assert p.flush(None) == 0
    assert p.flush(-1) == 0
