"""A subscribe() list: topic names and regular expressions (librdkafka's `^` rule), and what it resolved to last."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lakelog.config import validate_name
from lakelog.errors import InvalidType, KafkaError, KafkaException

# librdkafka's rule: a subscribed topic name starting with this is a regular expression.
REGEX_PREFIX = "^"
# Kafka's internal topics (__consumer_offsets, __transaction_state, ...) never match a pattern.
INTERNAL_PREFIX = "__"


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
