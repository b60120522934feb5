"""Changes to an existing topic: its config, its partition count, its deletion (Kafka's admin topic calls).

Every partition table carries the topic's config. Partition 0 is the source of
truth: a change is decided on partition 0's snapshot (the config it holds) and
committed as that snapshot's next version; from then on the change has happened
(`topic_config` reads partition 0). The call then brings every other partition
to partition 0's config, each decided on its own snapshot (a partition that
already holds it is left alone), and creates the partitions a larger count adds.
A crash in between leaves partitions 1..n-1 behind partition 0: the next change
of the topic (any `alter_topic_config`, `create_partitions`, or `complete_topic`)
brings them forward first, and a partition table a crash left uncreated is
created by `open_partition`, as for a new topic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from lakelog.errors import (
    CommitConflict,
    ConcurrentTransactions,
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    UnknownTopicOrPartition,
)
from lakelog.log.partition import APPEND_TIMEOUT_S, PartitionLog
from lakelog.log.records import PARTITION_SCHEMA
from lakelog.log.topic_config import TopicConfig
from lakelog.log.topics import open_partition, partition_path, topic_path
from lakelog.store import Location, Table, TableNotFoundError, delete_table
from lakelog.store.delta.lost_race import after_lost_race
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff, RetryPolicy

logger = logging.getLogger(__name__)

# change(current config) -> the topic's new config values, before validation.
ConfigChange = Callable[[TopicConfig], Mapping[str, Any]]


def alter_topic_config(
    root: str | Location,
    topic: str,
    change: ConfigChange,
    *,
    validate_only: bool = False,
    partitions_may_grow: bool = False,
    retry: RetryPolicy = DEFAULT_POLICY,
) -> TopicConfig:
    """Apply `change` to the topic's config, validated as at creation; returns the new config.

    num.partitions cannot change through a config (downward InvalidPartitions, upward
    InvalidConfig naming create_partitions) unless `partitions_may_grow`. A refusal, or
    `validate_only`, writes nothing (S8.3).
    """
    table = _partition_zero(root, topic)
    backoff = retry.start(APPEND_TIMEOUT_S)
    while True:
        current = TopicConfig.from_table_configuration(table.configuration)
        new = TopicConfig.load(change(current))
        _check_partition_count(topic, current.num_partitions, new.num_partitions, partitions_may_grow)
        if validate_only:
            return new
        if dict(new.values) == dict(current.values):
            break
        try:
            version = table.set_configuration(new.table_configuration())
        except CommitConflict:
            _wait(backoff, topic, 0)
            table.refresh()
            continue
        logger.info("%s: config changed at partition 0 version %d (%s)", topic, version, _difference(current, new))
        break
    complete_topic(root, topic, new, retry=retry)
    return new


def create_partitions(
    root: str | Location, topic: str, total: int, *, validate_only: bool = False, retry: RetryPolicy = DEFAULT_POLICY
) -> TopicConfig:
    """Grow the topic to `total` partitions (Kafka's CreatePartitions); fewer than now, or as many, is InvalidPartitions.

    Keys hash over the new count from then on, as in Kafka: a key's partition may change.
    """
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise InvalidPartitions(f"the new partition count of {topic} must be a positive integer, not {total!r}")

    def grow(current: TopicConfig) -> Mapping[str, Any]:
        if total < current.num_partitions:
            raise InvalidPartitions(
                f"Topic currently has {current.num_partitions} partitions, which is higher than the requested {total}."
            )
        if total == current.num_partitions:
            raise InvalidPartitions(f"Topic already has {current.num_partitions} partitions.")
        return {**current.values, "num.partitions": total}

    return alter_topic_config(root, topic, grow, validate_only=validate_only, partitions_may_grow=True, retry=retry)


def complete_topic(
    root: str | Location, topic: str, config: TopicConfig | None = None, *, retry: RetryPolicy = DEFAULT_POLICY
) -> None:
    """Bring partitions 1..n-1 to partition 0's config (`config`, if read already), creating missing ones."""
    if config is None:
        config = TopicConfig.from_table_configuration(_partition_zero(root, topic).configuration)
    stored = config.table_configuration()
    for partition in range(1, config.num_partitions):
        location = partition_path(root, topic, partition)
        try:
            table = Table.open(location)
        except TableNotFoundError:
            Table.create(location, PARTITION_SCHEMA, stored)
            continue
        backoff = retry.start(APPEND_TIMEOUT_S)
        while dict(TopicConfig.from_table_configuration(table.configuration).values) != dict(config.values):
            try:
                table.set_configuration(stored)
            except CommitConflict:
                _wait(backoff, topic, partition)
                table.refresh()


def delete_topic(root: str | Location, topic: str) -> None:
    """Delete every partition table of the topic through the root's file IO (Kafka's DeleteTopics).

    Refused, with nothing deleted (S8.3): an internal topic (`__*`, InvalidTopic), a
    missing one (UnknownTopicOrPartition), one with an open transaction in a partition
    (ConcurrentTransactions, retriable: its end writes markers there, S4.5). Every
    partition first commits its last version, a deletion mark, on a snapshot with no
    open transaction: a writer still holding the partition loses its next commit race
    to it and gets UnknownTopicOrPartition, and `open_partition` refuses a marked one.
    Then partitions n-1..1 and partition 0, whose table makes the topic exist, are
    deleted (lakelog.store.delete_table: commits oldest first, so a late put finds no
    table and is withdrawn by its writer), then the topic's folder.
    A delete cut short by a crash is finished by the next one.
    """
    if topic.startswith("__"):
        raise InvalidTopic(f"topic {topic} is internal (a name starting with __) and cannot be deleted", topic=topic)
    config = TopicConfig.from_table_configuration(_partition_zero(root, topic).configuration)
    logs = []
    for partition in range(config.num_partitions):
        try:
            log = open_partition(root, topic, partition)
        except UnknownTopicOrPartition:
            continue  # not created yet, or marked by a delete cut short
        _refuse_open_transactions(topic, partition, log)
        logs.append(log)
    for log in logs:
        backoff = DEFAULT_POLICY.start(APPEND_TIMEOUT_S)
        while True:
            _refuse_open_transactions(topic, log.partition, log)  # on the snapshot the mark is decided on
            try:
                log.table.mark_deleted()
                break
            except CommitConflict:
                _wait(backoff, topic, log.partition)
                log.table.refresh()
    io = topic_path(root, topic).io
    for partition in range(config.num_partitions - 1, -1, -1):
        delete_table(partition_path(root, topic, partition))
    io.delete_tree(topic_path(root, topic).uri)
    logger.info("deleted topic %s (%d partition(s))", topic, config.num_partitions)


def _refuse_open_transactions(topic: str, partition: int, log: PartitionLog) -> None:
    open_transactions = log.open_transactions()
    if open_transactions:
        producer_id, first_offset = min(open_transactions.items(), key=lambda item: item[1])
        raise ConcurrentTransactions(
            f"{topic}-{partition} holds an open transaction (producer id {producer_id}, from offset {first_offset}); "
            "delete the topic once it ends",
            topic=topic,
        )


def _partition_zero(root: str | Location, topic: str) -> Table:
    try:
        return Table.open(partition_path(root, topic, 0))
    except TableNotFoundError:
        raise UnknownTopicOrPartition(f"topic {topic} does not exist under {root}", topic=topic) from None


def _check_partition_count(topic: str, current: int, new: int, may_grow: bool) -> None:
    if new < current:
        raise InvalidPartitions(f"Topic currently has {current} partitions, which is higher than the requested {new}.")
    if new > current and not may_grow:
        raise InvalidConfig(
            f"num.partitions of topic {topic} cannot change through its config; add partitions with create_partitions",
            key="num.partitions",
        )


def _wait(backoff: Backoff, topic: str, partition: int) -> None:
    after_lost_race(backoff, f"{topic}-{partition}: the config change", logger)


def _difference(before: TopicConfig, after: TopicConfig) -> str:
    changed = [f"{key}={after.values[key]}" for key in sorted(after.values) if before.values.get(key) != after.values[key]]
    return ", ".join(changed) or "no change"
