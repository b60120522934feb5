"""`confluent_kafka.cimpl`'s names, for programs and frameworks that import them from there.

confluent-kafka's C extension module holds the client classes and the admin request types (`NewTopic`,
`NewPartitions`); frameworks import them as `from confluent_kafka.cimpl import NewTopic`. Each name here is
lakelog's own class, the one `lakelog` and `lakelog.admin` export.
"""

from lakelog import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    NewTopic,
    Producer,
    TopicPartition,
    Uuid,
    libversion,
    version,
)
from lakelog.admin import NewPartitions

# confluent-kafka's C-level admin client: its AdminClient is this class's subclass there, lakelog's is one class.
from lakelog.client import AdminClient as _AdminClientImpl

__all__ = [
    "Consumer",
    "KafkaError",
    "KafkaException",
    "Message",
    "NewPartitions",
    "NewTopic",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "Producer",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "TopicPartition",
    "Uuid",
    "_AdminClientImpl",
    "libversion",
    "version",
]
