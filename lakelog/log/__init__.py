"""The partition log: append with dense offsets, conditional publish, idempotence, fetch, isolation."""

from lakelog.log.fetch import ISOLATION_LEVELS, READ_COMMITTED, READ_UNCOMMITTED, FetchResult
from lakelog.log.partition import PartitionLog
from lakelog.log.producer_ids import allocate_producer_id
from lakelog.log.records import AppendResult, BatchHeader, ControlType, payload_table
from lakelog.log.topic_config import TopicConfig
from lakelog.log.topics import create_topic, list_topics, open_partition, topic_config, topic_config_past_damage
from lakelog.log.transactions import AbortedTransaction

__all__ = [
    "ISOLATION_LEVELS",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "AbortedTransaction",
    "AppendResult",
    "BatchHeader",
    "ControlType",
    "FetchResult",
    "PartitionLog",
    "TopicConfig",
    "allocate_producer_id",
    "create_topic",
    "list_topics",
    "open_partition",
    "payload_table",
    "topic_config",
    "topic_config_past_damage",
]
