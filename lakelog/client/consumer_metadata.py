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
import re
from dataclasses import dataclass, field

from lakelog import config
from lakelog.client.consumer_fetch import _partition_list
from lakelog.client.consumer_state import _ConsumerState
from lakelog.client.metadata import cluster_metadata
from lakelog.client.types import OFFSET_END, OFFSET_INVALID, ClusterMetadata, Message, TopicPartition
from lakelog.config import validate_name
from lakelog.errors import InvalidArgument, InvalidType, KafkaError, KafkaException, TopicAlreadyExists
from lakelog.log import create_topic, list_topics, open_partition
from lakelog.log.timestamps import offset_for_timestamp

logger = logging.getLogger(__name__)

# librdkafka's rule: a subscribed topic name starting with this is a regular expression.
REGEX_PREFIX = "^"
# Kafka's internal topics (__consumer_offsets, __transaction_state, ...) never match a pattern.
INTERNAL_PREFIX = "__"
# ListOffsets' special timestamps: the latest and the earliest offset.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


@dataclass
class Subscription:
    """A subscribe() list split into topic names and patterns, and what it resolved to last."""

    names: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    # When to look at the root's topics again, in seconds of the consumer's clock (0: at the next poll).
    next_refresh: float = 0.0
    # Named topics reported missing, so that each is reported once until it exists.
    reported_missing: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, topics: list[str] | tuple[str, ...]) -> Subscription:
        names, patterns = [], []
        for topic in topics:
            if not isinstance(topic, str):
                raise InvalidType("expected list of unicode strings")
            if topic.startswith(REGEX_PREFIX):
                try:
                    patterns.append(re.compile(topic))
                except re.error as error:
                    raise KafkaException(KafkaError(KafkaError._INVALID_ARG, f"invalid topic regex {topic!r}: {error}")) from None
            else:
                names.append(validate_name(topic))
        return cls(tuple(sorted(set(names))), tuple(patterns))

    def resolve(self, existing: list[str]) -> tuple[str, ...]:
        """The topic names this subscription stands for: the names given, and the topics the patterns match."""
        matched = {
            topic
            for topic in existing
            if not topic.startswith(INTERNAL_PREFIX) and any(pattern.search(topic) for pattern in self.patterns)
        }
        return tuple(sorted(matched | set(self.names)))


class _Metadata(_ConsumerState):
    """`Consumer`'s view of the root's topics, over its `config`, `_root`, `_assigned` and `_events`."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The root's topics and their partitions (one topic with `topic`), as confluent's `ClusterMetadata`.

        A topic that does not exist comes back carrying UNKNOWN_TOPIC_OR_PART in
        its `error`, as librdkafka returns it; with `allow.auto.create.topics=true`
        it is created instead. `timeout` is accepted: the root answers at once.
        """
        self._check_open()
        if topic is None:
            return cluster_metadata(self._root)
        if not isinstance(topic, str):
            raise InvalidType(f"topic must be a str, not {type(topic).__name__}")
        if self._auto_create_topics() and not topic.startswith(INTERNAL_PREFIX):
            self._create_missing([topic])
        return cluster_metadata(self._root, topic)

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """For each partition, the earliest offset whose record timestamp is >= `offset` (a time in ms).

        As Kafka's ListOffsets: OFFSET_END (-1) where no such record is below the
        end this consumer reads to (the LSO in read_committed, the high watermark
        in read_uncommitted); a timestamp of -2 asks for the log start offset and
        -1 for that end. An unknown topic or partition raises UnknownTopicOrPartition.
        """
        self._check_open()
        result = []
        for tp in _partition_list(partitions):
            timestamp = tp.offset
            if not isinstance(timestamp, int) or isinstance(timestamp, bool):
                raise InvalidType(f"{tp.topic}-{tp.partition}: the timestamp in offset must be an int, not {timestamp!r}")
            if timestamp < 0 and timestamp not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
                raise InvalidArgument(f"{tp.topic}-{tp.partition}: timestamp {timestamp} is neither >= 0, -1 nor -2")
            state = self._assigned.get((tp.topic, tp.partition))
            log = state.log if state is not None else open_partition(self._root, tp.topic, tp.partition)
            log.refresh()
            end = self._end_offset(log)
            if timestamp == EARLIEST_TIMESTAMP:
                offset: int | None = log.log_start_offset()
            elif timestamp == LATEST_TIMESTAMP:
                offset = end
            else:
                offset = offset_for_timestamp(log, timestamp, end)
            result.append(TopicPartition(tp.topic, tp.partition, OFFSET_END if offset is None else offset))
        return result

    # -- internals: the subscription's metadata refresh ------------------------------------------

    def _refresh_subscription(self, subscription: Subscription) -> tuple[str, ...] | None:
        """When due: the topic names `subscription` stands for now, with the missing named topics reported
        (or created); None when it is not due."""
        if self._now_s() < subscription.next_refresh:
            return None
        subscription.next_refresh = self._now_s() + self.config["topic.metadata.refresh.interval.ms"] / 1000
        existing = list_topics(self._root)
        missing = [name for name in subscription.names if name not in existing]
        if missing and self._auto_create_topics():
            self._create_missing(missing)
            existing = list_topics(self._root)
            missing = [name for name in subscription.names if name not in existing]
        subscription.reported_missing &= set(missing)
        for name in missing:
            if name in subscription.reported_missing:
                continue
            subscription.reported_missing.add(name)
            self._logger.warning("subscribed topic %s does not exist under %s", name, self._root)
            error = KafkaError(
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                f"Subscribed topic not available: {name}: Broker: Unknown topic or partition",
            )
            self._events.append(Message(name, -1, OFFSET_INVALID, error=error))
        return subscription.resolve(existing)

    def _auto_create_topics(self) -> bool:
        """allow.auto.create.topics, where the root allows it too (Kafka's broker key auto.create.topics.enable)."""
        return bool(self.config["allow.auto.create.topics"] and config.load("broker").get("auto.create.topics.enable"))

    def _create_missing(self, topics: list[str]) -> None:
        """allow.auto.create.topics: create each missing topic with the root's topic defaults."""
        existing = set(list_topics(self._root))
        for topic in topics:
            if topic in existing:
                continue
            try:
                create_topic(self._root, topic)
                self._logger.info("created topic %s (allow.auto.create.topics=true)", topic)
            except TopicAlreadyExists:
                pass  # another client created it first
