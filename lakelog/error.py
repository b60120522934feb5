"""confluent_kafka.error's names, so `from lakelog.error import ConsumeError` ports as the rest does.

The classes live in lakelog.errors with every other error.
"""

import logging

from lakelog.errors import (
    ConsumeError,
    KafkaError,
    KafkaException,
    KeyDeserializationError,
    KeySerializationError,
    ProduceError,
    SerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ConsumeError",
    "KafkaError",
    "KafkaException",
    "KeyDeserializationError",
    "KeySerializationError",
    "ProduceError",
    "SerializationError",
    "ValueDeserializationError",
    "ValueSerializationError",
]
