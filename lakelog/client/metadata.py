"""What a client's `list_topics()` answers: the root's topics and their partitions, as librdkafka's metadata."""

from __future__ import annotations

from lakelog.client.types import NODE_ID, BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata
from lakelog.errors import KafkaError, UnknownTopicOrPartition
from lakelog.log import list_topics, topic_config
from lakelog.store import Location


def cluster_metadata(root: str | Location, topic: str | None = None) -> ClusterMetadata:
    """Every topic of the root (or one), with its partitions. A topic the root does not hold comes back with
    UNKNOWN_TOPIC_OR_PART as its `error` and no partitions, as librdkafka's metadata carries it."""
    names = [topic] if topic is not None else list_topics(root)
    topics = {}
    for name in names:
        try:
            count = topic_config(root, name).num_partitions
        except UnknownTopicOrPartition:
            error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, f"Broker: Unknown topic or partition: {name}")
            topics[name] = TopicMetadata(name, {}, error)
            continue
        topics[name] = TopicMetadata(name, {p: PartitionMetadata(p) for p in range(count)})
    node = BrokerMetadata(NODE_ID, str(root))
    return ClusterMetadata(topics=topics, cluster_id=str(root), brokers={NODE_ID: node}, orig_broker_name=str(node))


__all__ = ["cluster_metadata"]
