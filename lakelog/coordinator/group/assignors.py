"""The group coordinator's assignors, pure functions of the members' subscriptions and the partition counts.

KIP-848's server-side `uniform` (balanced and sticky) and `range`, and the classic protocol's `roundrobin` and
`cooperative-sticky` (balanced and sticky: `uniform`'s algorithm under its classic name); the classic `range` is
KIP-848's `range`. `range` co-partitions: topics of equal partition count subscribed by the same members give
partition n of each to one member (what state stores with a changelog per input partition rely on).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakelog.coordinator.group.records import TopicPartitionKey
from lakelog.errors import InvalidRequest

ASSIGNORS = ("uniform", "range", "roundrobin", "cooperative-sticky")


def assign(
    assignor: str,
    members: Mapping[str, Iterable[str]],
    topic_partitions: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartitionKey]] | None = None,
) -> dict[str, frozenset[TopicPartitionKey]]:
    """`range` (per topic, ranges over sorted members), `roundrobin` (all partitions in turn over sorted members)
    and `uniform` / `cooperative-sticky` (balanced over all partitions, sticky: members keep what they had within
    their share)."""
    if assignor == "range":
        return _range(members, topic_partitions)
    if assignor == "roundrobin":
        return _roundrobin(members, topic_partitions)
    if assignor in ("uniform", "cooperative-sticky"):
        return _uniform(members, topic_partitions, previous or {})
    raise InvalidRequest(f"unknown assignor {assignor!r}; expected one of {', '.join(ASSIGNORS)}")


def _range(members: Mapping[str, Iterable[str]], topic_partitions: Mapping[str, int]) -> dict[str, frozenset[TopicPartitionKey]]:
    result: dict[str, set[TopicPartitionKey]] = {member: set() for member in members}
    topics = sorted({topic for subscribed in members.values() for topic in subscribed})
    for topic in topics:
        subscribers = sorted(member for member, subscribed in members.items() if topic in subscribed)
        count = topic_partitions.get(topic, 0)
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            size = share + (1 if index < extra else 0)
            result[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {member: frozenset(tps) for member, tps in result.items()}


def _roundrobin(
    members: Mapping[str, Iterable[str]], topic_partitions: Mapping[str, int]
) -> dict[str, frozenset[TopicPartitionKey]]:
    """Kafka's RoundRobinAssignor: every partition of every topic in order, each to the next subscribed member."""
    subscriptions = {member: set(topics) for member, topics in members.items()}
    result: dict[str, set[TopicPartitionKey]] = {member: set() for member in subscriptions}
    order = sorted(subscriptions)
    if not order:
        return {}
    topics = sorted({topic for subscribed in subscriptions.values() for topic in subscribed})
    turn = 0
    for topic in topics:
        for partition in range(topic_partitions.get(topic, 0)):
            # The next member in the circle that subscribes to the topic.
            for step in range(len(order)):
                member = order[(turn + step) % len(order)]
                if topic in subscriptions[member]:
                    result[member].add((topic, partition))
                    turn = (turn + step + 1) % len(order)
                    break
    return {member: frozenset(tps) for member, tps in result.items()}


def _uniform(
    members: Mapping[str, Iterable[str]],
    topic_partitions: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartitionKey]],
) -> dict[str, frozenset[TopicPartitionKey]]:
    subscriptions = {member: set(topics) for member, topics in members.items()}
    if not subscriptions:
        return {}
    partitions = sorted(
        (topic, p)
        for topic in {t for subscribed in subscriptions.values() for t in subscribed}
        for p in range(topic_partitions.get(topic, 0))
    )
    # Balanced: every member gets `share` partitions and `extra` of them one more. A ceiling quota for
    # all would let earlier members keep everything (4 partitions, a and b keep 2 each, c joins with 0).
    share, extra = divmod(len(partitions), len(subscriptions))
    result: dict[str, set[TopicPartitionKey]] = {member: set() for member in subscriptions}
    taken: set[TopicPartitionKey] = set()
    kept: dict[str, list[TopicPartitionKey]] = {
        member: [tp for tp in sorted(previous.get(member, frozenset())) if tp[0] in subscriptions[member] and tp in partitions]
        for member in subscriptions
    }
    # Sticky: members keep up to their share of what they had; the extra slots go to those who had the most.
    for member in sorted(subscriptions):
        for tp in kept[member]:
            if len(result[member]) < share and tp not in taken:
                result[member].add(tp)
                taken.add(tp)
    for member in sorted(subscriptions, key=lambda m: (-len(kept[m]), m)):
        if extra == 0:
            break
        spare = [tp for tp in kept[member] if tp not in taken]
        if spare and len(result[member]) == share:
            result[member].add(spare[0])
            taken.add(spare[0])
            extra -= 1
    for tp in partitions:
        if tp in taken:
            continue
        candidates = [member for member in sorted(subscriptions) if tp[0] in subscriptions[member]]
        if candidates:
            member = min(candidates, key=lambda m: (len(result[m]), m))
            result[member].add(tp)
            taken.add(tp)
    return {member: frozenset(tps) for member, tps in result.items()}


__all__ = ["ASSIGNORS", "assign"]
