"""What a `Consumer` knows of the root's topics: `list_topics`, `offsets_for_times`, and the subscription's
metadata refresh (regex subscriptions, unknown topics, `allow.auto.create.topics`).

A subscribed name that starts with `^` is a regular expression (librdkafka's
rule), matched with Python's `re.search` against the root's topics; internal
`__*` topics never match. The consumer resolves its patterns itself, as
librdkafka's and Java's classic-protocol clients do, and hands the coordinator
the matching topic names: a new match is a subscription change, which the
coordinator answers with a new target assignment (S6.2). KIP-848 resolves
regexes on the coordinator instead (`SubscribedTopicRegex`); here the coordinator
stays name-based, and members of one group see a new topic each at its own
refresh. The subscription is refreshed when it changes, and then every
`topic.metadata.refresh.interval.ms` of the consumer's clock, from `poll()`.

A subscribed name that is not a topic of the root is reported by `poll()` as a
message carrying UNKNOWN_TOPIC_OR_PART, once until the topic appears, as
librdkafka reports it; with `allow.auto.create.topics=true` the consumer creates
it (with the root's topic defaults) instead, where the root allows it too
(`auto.create.topics.enable`, Kafka's broker key, true by default). The coordinator assigns a topic's
partitions once it exists.
"""

from __future__ import annotations

import logging

from lakelog import config
from lakelog.client.consumer.fetcher import Fetcher, partition_list
from lakelog.client.consumer.state import ConsumerState
from lakelog.client.consumer.subscription import INTERNAL_PREFIX, Subscription
from lakelog.client.metadata import cluster_metadata
from lakelog.client.types import OFFSET_END, OFFSET_INVALID, ClusterMetadata, Message, TopicPartition
from lakelog.errors import InvalidArgument, InvalidType, KafkaError, TopicAlreadyExists
from lakelog.log import create_topic, list_topics, open_partition
from lakelog.log.timestamps import offset_for_timestamp

logger = logging.getLogger(__name__)

# ListOffsets' special timestamps: the latest and the earliest offset.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class Metadata:
    """A Consumer's view of the root's topics, and its subscription's refresh."""

    def __init__(self, state: ConsumerState, fetcher: Fetcher) -> None:
        self._state = state
        self._fetcher = fetcher

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The root's topics and their partitions (one topic with `topic`), as confluent's `ClusterMetadata`.

        A topic that does not exist comes back carrying UNKNOWN_TOPIC_OR_PART in
        its `error`, as librdkafka returns it; with `allow.auto.create.topics=true`
        it is created instead. `timeout` is accepted: the root answers at once.
        """
        self._state.check_open()
        if topic is None:
            return cluster_metadata(self._state.root)
        if not isinstance(topic, str):
            raise InvalidType(f"topic must be a str, not {type(topic).__name__}")
        if self._auto_create_topics() and not topic.startswith(INTERNAL_PREFIX):
            self._create_missing([topic])
        return cluster_metadata(self._state.root, topic)

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """For each partition, the earliest offset whose record timestamp is >= `offset` (a time in ms).

        As Kafka's ListOffsets: OFFSET_END (-1) where no such record is below the
        end this consumer reads to (the LSO in read_committed, the high watermark
        in read_uncommitted); a timestamp of -2 asks for the log start offset and
        -1 for that end. An unknown topic or partition raises UnknownTopicOrPartition.
        """
        self._state.check_open()
        result = []
        for tp in partition_list(partitions):
            timestamp = tp.offset
            if not isinstance(timestamp, int) or isinstance(timestamp, bool):
                raise InvalidType(f"{tp.topic}-{tp.partition}: the timestamp in offset must be an int, not {timestamp!r}")
            if timestamp < 0 and timestamp not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
                raise InvalidArgument(f"{tp.topic}-{tp.partition}: timestamp {timestamp} is neither >= 0, -1 nor -2")
            state = self._state.assigned.get((tp.topic, tp.partition))
            log = state.log if state is not None else open_partition(self._state.root, tp.topic, tp.partition)
            log.refresh()
            end = self._fetcher.end_offset(log)
            if timestamp == EARLIEST_TIMESTAMP:
                offset: int | None = log.log_start_offset()
            elif timestamp == LATEST_TIMESTAMP:
                offset = end
            else:
                offset = offset_for_timestamp(log, timestamp, end)
            result.append(TopicPartition(tp.topic, tp.partition, OFFSET_END if offset is None else offset))
        return result

    # -- internals: the subscription's metadata refresh ------------------------------------------

    def refresh_subscription(self, subscription: Subscription) -> tuple[str, ...] | None:
        """When due: the topic names `subscription` stands for now, with the missing named topics reported
        (or created); None when it is not due."""
        if self._state.now_s() < subscription.next_refresh:
            return None
        subscription.next_refresh = self._state.now_s() + self._state.config["topic.metadata.refresh.interval.ms"] / 1000
        existing = list_topics(self._state.root)
        missing = [name for name in subscription.names if name not in existing]
        if missing and self._auto_create_topics():
            self._create_missing(missing)
            existing = list_topics(self._state.root)
            missing = [name for name in subscription.names if name not in existing]
        subscription.reported_missing &= set(missing)
        for name in missing:
            if name in subscription.reported_missing:
                continue
            subscription.reported_missing.add(name)
            self._state.logger.warning("subscribed topic %s does not exist under %s", name, self._state.root)
            error = KafkaError(
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                f"Subscribed topic not available: {name}: Broker: Unknown topic or partition",
            )
            self._state.events.append(Message(name, -1, OFFSET_INVALID, error=error))
        return subscription.resolve(existing)

    def _auto_create_topics(self) -> bool:
        """allow.auto.create.topics, where the root allows it too (Kafka's broker key auto.create.topics.enable)."""
        return bool(self._state.config["allow.auto.create.topics"] and config.load("broker").get("auto.create.topics.enable"))

    def _create_missing(self, topics: list[str]) -> None:
        """allow.auto.create.topics: create each missing topic with the root's topic defaults."""
        existing = set(list_topics(self._state.root))
        for topic in topics:
            if topic in existing:
                continue
            try:
                create_topic(self._state.root, topic)
                self._state.logger.info("created topic %s (allow.auto.create.topics=true)", topic)
            except TopicAlreadyExists:
                pass  # another client created it first
