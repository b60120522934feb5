"""`SerializingProducer` and `DeserializingConsumer`, as confluent-kafka's.

Each takes its (de)serializers from its config (`key.serializer`, `value.serializer`,
`key.deserializer`, `value.deserializer`: callables of `(data, SerializationContext)`),
popped before the rest of the config is validated, and is otherwise the plain client.
A serializer's failure is raised as `KeySerializationError` / `ValueSerializationError`
before anything is queued; a deserializer's as `KeyDeserializationError` /
`ValueDeserializationError` carrying the message as it was read, and a message carrying
an error (such as `_PARTITION_EOF`) as `ConsumeError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from lakelog.client.consumer import Consumer
from lakelog.client.producer import DeliveryCallback, Producer
from lakelog.client.types import Message
from lakelog.errors import (
    ConsumeError,
    KeyDeserializationError,
    KeySerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from lakelog.serialization import MessageField, SerializationContext

logger = logging.getLogger(__name__)

Codec = Callable[[Any, SerializationContext], Any]


def _pop_codecs(conf: Mapping[str, Any], *keys: str) -> tuple[dict[str, Any], list[Codec | None]]:
    """The config without `keys`, and their values (None where absent), as confluent-kafka pops them."""
    if not isinstance(conf, Mapping):
        raise TypeError(f"client config must be a dict, not {type(conf).__name__}")
    rest = dict(conf)
    return rest, [rest.pop(key, None) for key in keys]


class SerializingProducer(Producer):
    """A Producer that serializes keys and values with `key.serializer` / `value.serializer`."""

    def __init__(self, conf: Mapping[str, Any], **kwargs: Any) -> None:
        rest, (self._key_serializer, self._value_serializer) = _pop_codecs(conf, "key.serializer", "value.serializer")
        super().__init__(rest, **kwargs)

    def produce(  # type: ignore[override]
        self,
        topic: str,
        key: Any = None,
        value: Any = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Any = None,
        **kwargs: Any,
    ) -> None:
        """Serialize the key, then the value (each with the headers in its context), then produce."""
        context = SerializationContext(topic, MessageField.KEY, headers)
        if self._key_serializer is not None:
            try:
                key = self._key_serializer(key, context)
            except Exception as error:
                raise KeySerializationError(error) from error
        context.field = MessageField.VALUE
        if self._value_serializer is not None:
            try:
                value = self._value_serializer(value, context)
            except Exception as error:
                raise ValueSerializationError(error) from error
        super().produce(
            topic,
            value,
            key,
            partition=partition,
            on_delivery=on_delivery,
            timestamp=timestamp,
            headers=headers,
            **kwargs,
        )


class DeserializingConsumer(Consumer):
    """A Consumer whose `poll()` deserializes values and keys with `value.deserializer` / `key.deserializer`."""

    def __init__(self, conf: Mapping[str, Any], **kwargs: Any) -> None:
        rest, (self._key_deserializer, self._value_deserializer) = _pop_codecs(conf, "key.deserializer", "value.deserializer")
        super().__init__(rest, **kwargs)

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message, its value then its key deserialized; raises ConsumeError for a message carrying an error."""
        # Consumer.poll is consume(1); this class's consume() refuses, as confluent-kafka's does.
        messages = super().consume(1, -1 if timeout is None else timeout)
        if not messages:
            return None
        message = messages[0]
        error = message.error()
        if error is not None:
            raise ConsumeError(error, kafka_message=message)
        topic = message.topic()
        if topic is None:
            raise TypeError("Message topic is None")
        context = SerializationContext(topic, MessageField.VALUE, message.headers())
        value = message.value()
        if self._value_deserializer is not None:
            try:
                value = self._value_deserializer(value, context)
            except Exception as error:
                raise ValueDeserializationError(error, message) from error
        key = message.key()
        context.field = MessageField.KEY
        if self._key_deserializer is not None:
            try:
                key = self._key_deserializer(key, context)
            except Exception as error:
                raise KeyDeserializationError(error, message) from error
        message.set_key(key)
        message.set_value(value)
        return message

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Not available, as in confluent-kafka: use poll()."""
        raise NotImplementedError
