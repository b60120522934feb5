"""confluent_kafka.serialization for lakelog: the plain serializers and their context.

A serializer turns an object into the bytes a record carries (`None` stays `None`, Kafka's
null); a deserializer turns them back. Numbers are big-endian and signed, as Kafka's Java
serializers write them: `IntegerSerializer` 4 bytes, `DoubleSerializer` an IEEE 754 binary64.
`SerializingProducer` and `DeserializingConsumer` (lakelog.client.serializing) call them with a
`SerializationContext` naming the topic, the field and the headers. Schema Registry
serializers are not part of lakelog.
"""

from __future__ import annotations

import enum
import logging
import struct
from typing import Any

from lakelog.client.types import Headers
from lakelog.errors import SerializationError

logger = logging.getLogger(__name__)

__all__ = [
    "Deserializer",
    "DoubleDeserializer",
    "DoubleSerializer",
    "IntegerDeserializer",
    "IntegerSerializer",
    "MessageField",
    "SerializationContext",
    "SerializationError",
    "Serializer",
    "StringDeserializer",
    "StringSerializer",
]


class MessageField(enum.StrEnum):
    """Which part of a message is being (de)serialized (confluent-kafka's are plain strings: str() is the value)."""

    NONE = "none"
    KEY = "key"
    VALUE = "value"


class SerializationContext:
    """What a (de)serializer is told besides the data: the topic, the field, the message's headers."""

    def __init__(self, topic: str, field: MessageField, headers: Headers | None = None) -> None:
        self.topic = topic
        self.field = field
        self.headers = headers


class Serializer:
    """Base of serializers: `serializer(obj, ctx)` returns bytes, or None for None."""

    __slots__: list[str] = []

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        raise NotImplementedError


class Deserializer:
    """Base of deserializers: `deserializer(data, ctx)` returns the object, or None for None."""

    __slots__: list[str] = []

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> Any:
        raise NotImplementedError


def _pack(layout: str, obj: Any) -> bytes:
    try:
        return struct.pack(layout, obj)
    except struct.error as error:
        raise SerializationError(str(error)) from error


def _unpack(layout: str, value: bytes) -> Any:
    try:
        return struct.unpack(layout, value)[0]
    except struct.error as error:
        raise SerializationError(str(error)) from error


class IntegerSerializer(Serializer):
    """An int as 4 big-endian signed bytes (Kafka's IntegerSerializer); SerializationError outside int32."""

    def __call__(self, obj: int | None, ctx: SerializationContext | None = None) -> bytes | None:
        return None if obj is None else _pack(">i", obj)


class IntegerDeserializer(Deserializer):
    """4 big-endian signed bytes as an int; SerializationError for any other length."""

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> int | None:
        return None if value is None else _unpack(">i", value)


class DoubleSerializer(Serializer):
    """A float as an IEEE 754 binary64, big-endian (Kafka's DoubleSerializer)."""

    def __call__(self, obj: float | None, ctx: SerializationContext | None = None) -> bytes | None:
        return None if obj is None else _pack(">d", obj)


class DoubleDeserializer(Deserializer):
    """8 big-endian bytes as a float; SerializationError for any other length."""

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> float | None:
        return None if value is None else _unpack(">d", value)


class StringSerializer(Serializer):
    """A str encoded with `codec` (utf_8 by default); SerializationError if the codec cannot encode it."""

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, obj: str | None, ctx: SerializationContext | None = None) -> bytes | None:
        if obj is None:
            return None
        try:
            return obj.encode(self.codec)
        except UnicodeError as error:
            raise SerializationError(str(error)) from error


class StringDeserializer(Deserializer):
    """Bytes decoded with `codec` (utf_8 by default); SerializationError if the codec cannot decode them."""

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None) -> str | None:
        if value is None:
            return None
        try:
            return value.decode(self.codec)
        except UnicodeError as error:
            raise SerializationError(str(error)) from error
