"""lakelog: Kafka's exactly-once semantics on Delta Lake tables.

Port a confluent-kafka program by changing the import and naming a root:
`Producer({"lakelog.root": "/data/lake"})`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

    # confluent_kafka's top-level admin model names (confluent_kafka._model), for programs that import them from here.
    from lakelog.client.admin.broker_only import ElectionType
    from lakelog.client.admin.groups import ConsumerGroupState
    from lakelog.client.admin.types import ConsumerGroupType, IsolationLevel, Node, TopicCollection, TopicPartitionInfo, Uuid
    from lakelog.client.messages import Messages
    from lakelog.client.partitioner import consistent, fnv1a, murmur2
    from lakelog.client.serializing import DeserializingConsumer, SerializingProducer
    from lakelog.errors import KafkaError, KafkaException

# Where each public name lives: importing `lakelog` (as the command line does first) loads none of the client, Arrow
# or the stores until a name is used, so `lakelog --help` and a package that needs only `lakelog.errors` start fast.
_HOMES = {
    **dict.fromkeys(
        (
            "OFFSET_BEGINNING",
            "OFFSET_END",
            "OFFSET_INVALID",
            "OFFSET_STORED",
            "TIMESTAMP_CREATE_TIME",
            "TIMESTAMP_LOG_APPEND_TIME",
            "TIMESTAMP_NOT_AVAILABLE",
            "AdminClient",
            "ClusterMetadata",
            "Consumer",
            "ConsumerGroupTopicPartitions",
            "Message",
            "NewTopic",
            "Producer",
            "TopicDescription",
            "TopicPartition",
        ),
        "lakelog.client",
    ),
    "ElectionType": "lakelog.client.admin.broker_only",
    "ConsumerGroupState": "lakelog.client.admin.groups",
    **dict.fromkeys(
        ("ConsumerGroupType", "IsolationLevel", "Node", "TopicCollection", "TopicPartitionInfo", "Uuid"),
        "lakelog.client.admin.types",
    ),
    "Messages": "lakelog.client.messages",
    **dict.fromkeys(("consistent", "fnv1a", "murmur2"), "lakelog.client.partitioner"),
    **dict.fromkeys(("DeserializingConsumer", "SerializingProducer"), "lakelog.client.serializing"),
    **dict.fromkeys(("KafkaError", "KafkaException"), "lakelog.errors"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'lakelog' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


def version() -> str:
    """lakelog's version, as confluent_kafka.version() gives its own (a str since confluent-kafka 2.12)."""
    from importlib import metadata

    try:
        return metadata.version("lakelog")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def libversion() -> tuple[str, int]:
    """(version, int) as confluent_kafka.libversion() gives librdkafka's: the int is 0xMMmmrrff (ff: a release)."""
    text = version()
    parts = [int(part) if part.isdigit() else 0 for part in text.split(".")[:3]]
    major, minor, patch = parts + [0] * (3 - len(parts))
    return text, (major & 0xFF) << 24 | (minor & 0xFF) << 16 | (patch & 0xFF) << 8 | 0xFF


__all__ = [
    "AdminClient",
    "ClusterMetadata",
    "Consumer",
    "ConsumerGroupState",
    "ConsumerGroupTopicPartitions",
    "ConsumerGroupType",
    "DeserializingConsumer",
    "ElectionType",
    "IsolationLevel",
    "KafkaError",
    "KafkaException",
    "Message",
    "Messages",
    "NewTopic",
    "Node",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "Producer",
    "SerializingProducer",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "TopicDescription",
    "TopicCollection",
    "TopicPartition",
    "TopicPartitionInfo",
    "Uuid",
    "consistent",
    "fnv1a",
    "libversion",
    "murmur2",
    "version",
]
