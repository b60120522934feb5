"""lakelog.serialization, SerializingProducer and DeserializingConsumer as confluent-kafka has them (issue 14, gap 8).

Driven through confluent-kafka's semantics (its serialization/__init__.py, serializing_producer.py,
deserializing_consumer.py): Kafka's byte layouts, (de)serializers popped from the config before it is
validated, their failures as Key/Value(De)SerializationError, and a message error as ConsumeError.
"""

from __future__ import annotations

import struct

import pytest
from helpers import table_fingerprint

from lakelog import (
    OFFSET_BEGINNING,
    Consumer,
    DeserializingConsumer,
    KafkaError,
    KafkaException,
    Producer,
    SerializingProducer,
    TopicPartition,
)
from lakelog.error import (
    ConsumeError,
    KeySerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from lakelog.errors import InvalidConfig
from lakelog.log import open_partition
from lakelog.serialization import (
    Deserializer,
    DoubleDeserializer,
    DoubleSerializer,
    IntegerDeserializer,
    IntegerSerializer,
    MessageField,
    SerializationContext,
    SerializationError,
    Serializer,
    StringDeserializer,
    StringSerializer,
)


def test_integer_is_four_big_endian_signed_bytes():
    serialize, deserialize = IntegerSerializer(), IntegerDeserializer()
    assert serialize(1) == b"\x00\x00\x00\x01"
    assert serialize(-1) == b"\xff\xff\xff\xff"
    assert serialize(2**31 - 1) == b"\x7f\xff\xff\xff"
    assert deserialize(b"\x80\x00\x00\x00") == -(2**31)
    assert serialize(None) is None and deserialize(None) is None
    for bad in (2**31, -(2**31) - 1, "1"):
        with pytest.raises(SerializationError):
            serialize(bad)
    with pytest.raises(SerializationError):
        deserialize(b"\x00\x01")


def test_double_is_an_ieee_754_binary64_big_endian():
    serialize, deserialize = DoubleSerializer(), DoubleDeserializer()
    assert serialize(1.0) == bytes.fromhex("3ff0000000000000")
    assert serialize(-2.5) == bytes.fromhex("c004000000000000")
    assert deserialize(serialize(3.141592653589793)) == 3.141592653589793
    assert serialize(None) is None and deserialize(None) is None
    with pytest.raises(SerializationError):
        deserialize(b"\x00" * 4)


def test_string_uses_its_codec():
    assert StringSerializer()("häh") == "häh".encode()
    assert StringSerializer("utf_16_be")("ab") == b"\x00a\x00b"
    assert StringDeserializer("latin_1")(b"\xe4") == "ä"
    assert StringSerializer()(None) is None and StringDeserializer()(None) is None
    with pytest.raises(SerializationError):
        StringSerializer("ascii")("ä")
    with pytest.raises(SerializationError):
        StringDeserializer()(b"\xff")


def test_serialization_error_is_a_kafka_exception_and_the_bases_are_abstract():
    assert issubclass(SerializationError, KafkaException)
    with pytest.raises(NotImplementedError):
        Serializer()(1)
    with pytest.raises(NotImplementedError):
        Deserializer()(b"")
    context = SerializationContext("t", MessageField.KEY, [("h", b"1")])
    assert (context.topic, context.field, context.headers) == ("t", MessageField.KEY, [("h", b"1")])
    assert str(MessageField.VALUE) == "value" and MessageField.KEY == "key"


def _raw(root: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    with Consumer({"lakelog.root": root}) as consumer:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        return [(m.key(), m.value()) for m in consumer.consume(100, 2.0)]


def test_serializing_producer_writes_what_the_serializers_make_and_the_consumer_reads_it_back(root, topic):
    name = topic()
    contexts = []

    def value_serializer(obj, ctx):
        contexts.append((ctx.topic, ctx.field, ctx.headers))
        return StringSerializer()(obj, ctx)

    # key.serializer and value.serializer are no client config: popped before the config is validated.
    producer = SerializingProducer(
        {"lakelog.root": root, "key.serializer": IntegerSerializer(), "value.serializer": value_serializer}
    )
    delivered = []
    producer.produce(name, key=7, value="sieben", headers=[("h", b"1")], on_delivery=lambda e, m: delivered.append(e))
    producer.produce(name, key=None, value=None)
    producer.flush()
    assert delivered == [None]
    assert contexts == [(name, MessageField.VALUE, [("h", b"1")]), (name, MessageField.VALUE, None)]
    assert _raw(root, name) == [(b"\x00\x00\x00\x07", b"sieben"), (None, None)]

    consumer = DeserializingConsumer(
        {"lakelog.root": root, "key.deserializer": IntegerDeserializer(), "value.deserializer": StringDeserializer()}
    )
    consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
    first = consumer.poll(5.0)
    assert (first.key(), first.value(), first.headers()) == (7, "sieben", [("h", b"1")])
    second = consumer.poll(5.0)
    assert (second.key(), second.value()) == (None, None)
    with pytest.raises(NotImplementedError):
        consumer.consume(1, 0)
    consumer.close()


def test_the_plain_clients_still_refuse_serializer_keys(root):
    with pytest.raises(InvalidConfig):
        Producer({"lakelog.root": root, "value.serializer": StringSerializer()})
    with pytest.raises(InvalidConfig):
        Consumer({"lakelog.root": root, "value.deserializer": StringDeserializer()})


@pytest.mark.parametrize(
    "field, raised, code",
    [
        ("key", KeySerializationError, KafkaError._KEY_SERIALIZATION),
        ("value", ValueSerializationError, KafkaError._VALUE_SERIALIZATION),
    ],
)
def test_S8_3_a_failing_serializer_raises_before_anything_is_queued(root, topic, field, raised, code):
    name = topic()
    producer = SerializingProducer({"lakelog.root": root, f"{field}.serializer": IntegerSerializer()})
    before = table_fingerprint(open_partition(root, name, 0).table.uri)
    with pytest.raises(raised) as caught:
        producer.produce(name, **{field: "not an int"})
    assert caught.value.code == code and isinstance(caught.value.exception, SerializationError)
    assert len(producer) == 0 and producer.flush(1) == 0
    assert table_fingerprint(open_partition(root, name, 0).table.uri) == before


def test_a_failing_deserializer_raises_with_the_message_as_read(root, topic):
    name = topic()
    producer = Producer({"lakelog.root": root})
    producer.produce(name, value=b"\x01\x02")
    producer.flush()
    consumer = DeserializingConsumer({"lakelog.root": root, "value.deserializer": IntegerDeserializer()})
    consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
    with pytest.raises(ValueDeserializationError) as caught:
        consumer.poll(5.0)
    assert caught.value.code == KafkaError._VALUE_DESERIALIZATION
    assert caught.value.kafka_message.value() == b"\x01\x02" and caught.value.kafka_message.offset() == 0
    consumer.close()


def test_a_message_carrying_an_error_is_raised_as_consume_error(root, topic):
    name = topic()
    consumer = DeserializingConsumer({"lakelog.root": root, "enable.partition.eof": True})
    consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
    with pytest.raises(ConsumeError) as caught:
        consumer.poll(5.0)
    assert caught.value.code == KafkaError._PARTITION_EOF and caught.value.kafka_message.partition() == 0
    consumer.close()


def test_integer_serializer_layout_is_javas():
    """Kafka's Java IntegerSerializer writes the int big-endian: the same bytes as struct's '>i'."""
    assert IntegerSerializer()(123456789) == struct.pack(">i", 123456789) == bytes.fromhex("075bcd15")
