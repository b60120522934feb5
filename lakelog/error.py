"""confluent_kafka.error's names, so `from lakelog.error import ConsumeError` ports as the rest does.

The classes live in lakelog.errors with every other error.

lakelog's three error modules, side by side:
- `lakelog.error`: confluent_kafka.error's public module name, so imports port unchanged; it only re-exports.
- `lakelog.errors`: where every error class lives: KafkaError, KafkaException and one subclass per Kafka error code,
  the classes lakelog raises.
- `lakelog.error_codes`: the table of librdkafka's 188 error codes (names and values), KafkaError's constants.
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
