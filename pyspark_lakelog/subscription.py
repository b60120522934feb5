"""What a Kafka-source read names, as Spark's Kafka source spells it, for batch and streaming reads alike.

Exactly one of `subscribe` (topics separated by commas), `subscribePattern` (a regular expression that must
match a whole topic name; internal `__*` topics never match), `assign` (JSON `{"topic": [0, 1]}`) or `topic`
(lakelog's alias of `subscribe`). Bad input is InvalidConfig naming the option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from lakelog.catalog import user_topics
from lakelog.errors import InvalidConfig
from lakelog.store import Location

SUBSCRIPTIONS = ("subscribe", "subscribepattern", "assign", "topic")


@dataclass(frozen=True)
class Subscription:
    """`kind` is "subscribe", "pattern" or "assign"; `topics` the named ones (assign: its topics)."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: Mapping[str, tuple[int, ...]] | None = None

    @classmethod
    def parse(cls, values: Mapping[str, str], what: str) -> Subscription:
        """The subscription of options `values` (lower-case keys); `what` names the read in the error."""
        given = [key for key in SUBSCRIPTIONS if values.get(key)]
        if len(given) != 1:
            raise InvalidConfig(
                f"{what} needs exactly one of the options subscribe, subscribePattern, assign or topic "
                f"(got {', '.join(given) or 'none'})",
                key="subscribe",
            )
        kind, text = given[0], values[given[0]]
        if kind in ("subscribe", "topic"):
            topics = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
            if not topics:
                raise InvalidConfig(f"option {kind} names no topic: {text!r}", key=kind)
            return cls("subscribe", topics)
        if kind == "subscribepattern":
            try:
                re.compile(text)
            except re.error as error:
                raise InvalidConfig(f"subscribePattern {text!r} is no regular expression: {error}", key=kind) from None
            return cls("pattern", pattern=text)
        assigned = parse_assign(text)
        return cls("assign", tuple(assigned), assigned=assigned)

    def matching(self, root: Location) -> list[str]:
        """The topics the subscription names now: a pattern's are the root's user topics it matches in whole."""
        if self.kind != "pattern":
            return list(self.topics)
        assert self.pattern is not None
        pattern = re.compile(self.pattern)
        return [topic for topic in user_topics(root) if pattern.fullmatch(topic)]


def parse_assign(text: str) -> dict[str, tuple[int, ...]]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidConfig(f'assign must be JSON like {{"topic": [0, 1]}}: {error.msg}', key="assign") from None
    if not isinstance(value, dict) or not value:
        raise InvalidConfig(f'assign must be a JSON object like {{"topic": [0, 1]}}, not {text!r}', key="assign")
    assigned = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in partitions):
            raise InvalidConfig(f"assign for {topic} must be a list of partition numbers, not {partitions!r}", key="assign")
        assigned[topic] = tuple(sorted(set(partitions)))
    return assigned


__all__ = ["SUBSCRIPTIONS", "Subscription", "parse_assign"]
