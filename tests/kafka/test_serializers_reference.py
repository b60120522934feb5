"""SerializingProducer and DeserializingConsumer with the plain serializers, one program on Kafka and on lakelog:
what is read back, and the errors a bad value raises (KeySerializationError, ValueSerializationError)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from .harness import System, compare

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("kafka-broker")]


def serializers(system: System) -> dict[str, Any]:
    serialization = importlib.import_module(f"{system.package.__name__}.serialization")
    topic = system.create_topic("serde")
    producer = system.SerializingProducer(
        system.conf(key_serializer=serialization.IntegerSerializer(), value_serializer=serialization.StringSerializer("utf_8"))
    )
    producer.produce(topic, key=7, value="sieben", headers={"h": b"x"})
    producer.produce(topic, key=None, value=None)
    observed: dict[str, Any] = {}
    for name, call in (
        ("key not an int", lambda: producer.produce(topic, key="seven", value="v")),
        ("value not a str", lambda: producer.produce(topic, key=1, value=b"bytes")),
    ):
        try:
            call()
            observed[name] = None
        except Exception as error:  # noqa: BLE001 - the refusal is the observation
            observed[name] = type(error).__name__
    producer.flush(30)
    consumer = system.DeserializingConsumer(
        system.conf(
            group_id=system.group("serde"),
            auto_offset_reset="earliest",
            key_deserializer=serialization.IntegerDeserializer(),
            value_deserializer=serialization.StringDeserializer("utf_8"),
        )
    )
    consumer.subscribe([topic])
    read = []
    while len(read) < 2:
        message = consumer.poll(10)
        assert message is not None, read
        read.append((message.key(), message.value(), message.headers(), message.offset()))
    consumer.close()
    observed["read"] = read
    return observed


def test_serializing_producer_and_deserializing_consumer(systems: tuple[System, System]) -> None:
    compare(serializers, *systems)
