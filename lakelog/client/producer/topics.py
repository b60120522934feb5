"""The producer's view of the root's topics (Kafka's producer metadata): partition counts, first-use creation, partitioning.

A missing topic is created on first use only when both the producer allows it
(allow.auto.create.topics) and the root does (the broker key auto.create.topics.enable),
as a Kafka broker would; never one named as internal (`__*`), nor an illegal name.
A message produce() cannot write is reported with the error `undeliverable` gives.
"""

from __future__ import annotations

from collections.abc import Callable

from lakelog import config
from lakelog.client.partitioner import partition_for
from lakelog.client.producer.sender import Logger
from lakelog.config import validate_name
from lakelog.errors import (
    CorruptRecord,
    InvalidRequest,
    InvalidTopic,
    KafkaError,
    KafkaException,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from lakelog.log import PartitionLog, create_topic, open_partition, topic_config, topic_config_past_damage
from lakelog.log.partition import Clock
from lakelog.store import Location

# Internal logs (__consumer_offsets, __transaction_state, ...) are written by their coordinators, never by produce().
INTERNAL_PREFIX = "__"


class ProducerTopics:
    """The partition count of each topic a producer wrote to, read (or created) once."""

    def __init__(
        self,
        root: Location,
        producer_config: config.Config,
        clock: Clock,
        logger: Logger,
        adopt: Callable[[tuple[str, int], PartitionLog], None],
    ) -> None:
        self._root = root
        self._config = producer_config
        self._clock = clock
        self._logger = logger
        self._adopt = adopt  # partition 0's log, opened for the topic's config: kept for its first batch
        self._partitioner = producer_config["partitioner"]
        # The partition count of each topic read so far: produce() looks here first (read-only outside this class).
        self.counts: dict[str, int] = {}

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count, or None when produce() cannot write it (see `undeliverable`)."""
        count = self.counts.get(topic)
        if count is not None:
            return count
        if topic.startswith(INTERNAL_PREFIX):
            return None
        try:
            # Partition 0's log carries the topic's config: kept for its first batch, so that is not a second table load.
            first = open_partition(self._root, topic, 0, clock=self._clock)
            count = first.config.num_partitions
            self._adopt((topic, 0), first)
        except InvalidTopic:
            return None
        except CorruptRecord as damage:
            # Partition 0 alone is damaged: messages for the others still go; partition 0's fail in their reports.
            count = topic_config_past_damage(self._root, topic, damage).num_partitions
        except UnknownTopicOrPartition:
            if not self._may_create_topics():
                return None
            count = self._create_topic(topic)
        self.counts[topic] = count
        return count

    def resolve_partition(self, topic: str, partition: int, key: bytes | None) -> int:
        """The partition a message goes to: the one asked for, or the partitioner's for `key` (-1)."""
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise InvalidRequest(f"partition must be an integer, not {partition!r}")
        count = self.partition_count(topic)
        if count is None:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist under {self._root}", topic=topic)
        if partition == -1:
            return partition_for(key, count, self._partitioner)
        if not 0 <= partition < count:
            # librdkafka refuses a partition past a known topic's count at once, with _UNKNOWN_PARTITION.
            raise KafkaException(
                KafkaError(KafkaError._UNKNOWN_PARTITION, f"topic {topic} has partitions 0-{count - 1}, not {partition}")
            )
        return partition

    def _may_create_topics(self) -> bool:
        if not self._config.get("allow.auto.create.topics", False):
            return False
        return bool(config.load("broker", {}).get("auto.create.topics.enable", False))

    def _create_topic(self, topic: str) -> int:
        try:
            created = create_topic(self._root, topic, None, None)
        except TopicAlreadyExists:  # another client created it first
            return topic_config(self._root, topic).num_partitions
        self._logger.info("created topic %s on first produce (allow.auto.create.topics, auto.create.topics.enable)", topic)
        return created.num_partitions


def undeliverable(topic: str) -> KafkaError:
    """Why produce() cannot write to `topic`: UNKNOWN_TOPIC_OR_PART for a topic the root does not hold, or
    TOPIC_EXCEPTION for an illegal name or an internal one (`__*`, which Kafka refuses to clients too)."""
    if topic.startswith(INTERNAL_PREFIX):
        return KafkaError(KafkaError.TOPIC_EXCEPTION, f"cannot produce to internal topic {topic}")
    try:
        validate_name(topic)
    except InvalidTopic as illegal:
        return KafkaError(KafkaError.TOPIC_EXCEPTION, str(illegal))
    return KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, f"topic {topic} does not exist under the root")
