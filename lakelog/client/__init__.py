"""The Kafka-shaped client API: Producer, Consumer, AdminClient."""

from lakelog.client.admin import AdminClient
from lakelog.client.admin.groups import ConsumerGroupTopicPartitions
from lakelog.client.consumer import Consumer
from lakelog.client.producer import Producer
from lakelog.client.types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    ClusterMetadata,
    Message,
    NewTopic,
    TopicDescription,
    TopicPartition,
)

__all__ = [
    "AdminClient",
    "ClusterMetadata",
    "Consumer",
    "ConsumerGroupTopicPartitions",
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
