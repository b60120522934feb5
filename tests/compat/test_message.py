"""Message as confluent-kafka has it (issue 14, gap 9): its constructor's order, setters, equality, pickling.

Driven through confluent-kafka's semantics (its confluent_kafka.c Message type and tests/test_message.py),
and checked against the messages lakelog's own Producer reports and Consumer returns.
"""

from __future__ import annotations

import pickle

import pytest

from lakelog import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)


def test_an_empty_message_reads_as_confluents():
    for message in (Message(), Message(None, -2, -2, None, None, None, None, None, -2.0, -2)):
        assert len(message) == 0
        assert (message.topic(), message.key(), message.value(), message.headers(), message.error()) == (None,) * 5
        assert (message.partition(), message.offset(), message.leader_epoch(), message.latency()) == (None,) * 4
        assert message.timestamp() == (0, 0) and message.delivery_count() is None
        assert message.__reduce__() == (Message, (None, -1, -1001, None, None, None, None, (0, 0), -1.0, -1, -1))
        assert str(message) and repr(message)


def test_positional_arguments_in_confluents_order():
    headers, error = [("h", b"1")], KafkaError(KafkaError._PARTITION_EOF)
    message = Message("t", 1, 2, "k", "v", headers, error, (TIMESTAMP_CREATE_TIME, 4), 5.67, 3)
    assert (message.topic(), message.partition(), message.offset(), message.key(), message.value()) == ("t", 1, 2, "k", "v")
    assert message.headers() is headers and message.error() is error
    assert message.timestamp() == (1, 4) and message.latency() == 5.67 and message.leader_epoch() == 3
    assert len(message) == 1


def test_keyword_arguments():
    error = KafkaError(KafkaError._MSG_TIMED_OUT)
    message = Message(
        topic="t",
        partition=1,
        offset=2,
        key=b"k",
        value=b"vv",
        headers=[],
        error=error,
        timestamp=(0, 4),
        latency=5.67,
        leader_epoch=3,
    )
    assert (message.partition(), message.offset(), len(message), message.error()) == (1, 2, 2, error)


def test_setters_replace_each_field():
    message = Message()
    error = KafkaError(KafkaError._TRANSPORT)
    message.set_topic("t")
    message.set_value(b"value")
    message.set_key(b"k")
    message.set_headers([("h", None)])
    message.set_error(error)
    assert (message.topic(), message.value(), message.key(), message.headers(), message.error()) == (
        "t",
        b"value",
        b"k",
        [("h", None)],
        error,
    )
    assert len(message) == 5


def test_equality_as_confluent_defines_it():
    fields = ("t", 1, 2, "k", "v", [], None, (0, 4), 5.67, 3)
    same, other_key = Message(*fields), Message("t", 1, 2, "z", "v", [], None, (0, 4), 5.67, 3)
    assert Message(*fields) == same and not (Message(*fields) != same)
    assert Message(*fields) != other_key
    # The latency and the timestamp's type are not compared; the timestamp's value is.
    assert Message("t", 1, 2, "k", "v", [], None, (1, 4), 0.1, 3) == same
    assert Message("t", 1, 2, "k", "v", [], None, (0, 5), 5.67, 3) != same
    assert same != 1 and same != object() and same is not None
    with pytest.raises(TypeError):
        assert same < same
    with pytest.raises(TypeError):
        hash(same)


def test_pickles_with_every_field():
    fields = ("t", 1, 2, b"k", b"v", [("h", b"1")], None, (0, 4), 5.67, 3, 5)
    message = Message(*fields)
    assert message.__reduce__() == (Message, fields)
    restored = pickle.loads(pickle.dumps(message))
    assert restored == message and restored is not message and restored.latency() == 5.67


def test_bad_constructor_arguments_raise_type_error():
    with pytest.raises(TypeError):
        Message("t", 0, 0, None, None, None, None, timestamp=5)
    with pytest.raises(TypeError):
        Message("t", "0")
    with pytest.raises(TypeError):
        len(Message(value=1))
    # Fields confluent-kafka keeps in C ints: a partition is 32 bits, a delivery count 16.
    with pytest.raises(OverflowError):
        Message("t", 2**31)
    with pytest.raises(OverflowError):
        Message("t", 0, 0, None, None, None, None, (0, 0), -1.0, -1, 32768)


def test_delivered_and_consumed_messages_equal_messages_built_in_confluents_order(root, topic):
    name = topic()
    reports = []
    producer = Producer({"lakelog.root": root})
    producer.produce(name, value=b"v", key=b"k", timestamp=1234, on_delivery=lambda e, m: reports.append((e, m)))
    producer.flush()
    [(error, delivered)] = reports
    assert error is None
    assert delivered == Message(name, 0, 0, b"k", b"v", None, None, (TIMESTAMP_CREATE_TIME, 1234))
    with Consumer({"lakelog.root": root}) as consumer:
        consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
        consumed = consumer.poll(5.0)
    assert consumed == Message(name, 0, 0, b"k", b"v", None, None, (TIMESTAMP_CREATE_TIME, 1234))
    assert consumed == delivered
