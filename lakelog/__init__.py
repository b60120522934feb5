"""lakelog: Kafka's exactly-once semantics on Delta Lake tables.

Port a confluent-kafka program by changing the import and naming a root:
`Producer({"lakelog.root": "/data/lake"})`.
"""

from lakelog.client import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    AdminClient,
    ClusterMetadata,
    Consumer,
    ConsumerGroupTopicPartitions,
    Message,
    NewTopic,
    Producer,
    TopicDescription,
    TopicPartition,
)
from lakelog.errors import KafkaError, KafkaException

__all__ = [
    "AdminClient",
    "ClusterMetadata",
    "Consumer",
    "ConsumerGroupTopicPartitions",
    "KafkaError",
    "KafkaException",
    "Message",
    "NewTopic",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "Producer",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "TopicDescription",
    "TopicPartition",
]
