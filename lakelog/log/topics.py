"""Topics under a root: `topics/<topic>/<partition>/`, one Delta table per partition."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lakelog.config import validate_name
from lakelog.errors import CorruptRecord, InvalidPartitions, TopicAlreadyExists, UnknownTopicOrPartition
from lakelog.log.partition import Clock, PartitionLog, wall_clock_ms
from lakelog.log.records import PARTITION_SCHEMA
from lakelog.log.topic_config import TopicConfig
from lakelog.store import Location, Table, TableNotFoundError, check_root, ensure_initialised

TOPICS_DIR = "topics"
# Internal logs kept outside `<root>/<log_name>/`, and their partition count where it is fixed by design:
# the quality gates' results live under `<root>/quality/results/<n>`, one partition.
INTERNAL_LOG_FOLDERS = {"__quality_results": ("quality", "results")}
INTERNAL_LOG_PARTITIONS = {"__quality_results": 1, "__schemas": 1, "__sweeps": 1}
# Internal logs' own defaults under the topic defaults, as Kafka's internal topics have theirs: those the topic
# defaults had before they moved for cold opens of topic partitions (lakelog/conf/topic.properties). A coordinator's
# log takes several commits per transaction and is opened cold seldom; with the topic defaults a transaction's
# offsets (`bench/kafka_reference`) cost 3.2-3.5 times a plain offset commit against 2.4-2.7.
INTERNAL_LOG_CONFIG = {"checkpoint.interval.commits": 50, "segment.files": 200}

logger = logging.getLogger(__name__)


def topic_path(root: str | Location, topic: str) -> Location:
    return check_root(root) / TOPICS_DIR / validate_name(topic)


def partition_path(root: str | Location, topic: str, partition: int) -> Location:
    return topic_path(root, topic) / str(partition)


def create_topic(
    root: str | Location, topic: str, num_partitions: int | None = None, config: Mapping[str, Any] | None = None
) -> TopicConfig:
    """Create a topic's partition tables; TopicAlreadyExists if partition 0 exists.

    A root not yet initialised becomes one first. Partition 0 is created first, by put-if-absent, and decides the race; the
    others follow and are completed by `open_partition` if a crash cut them short.
    """
    topic_config = validate_new_topic(topic, num_partitions, config)
    ensure_initialised(root)  # the explicit admin path may make a root (lakelog.store.delta.cluster)
    path = topic_path(root, topic)
    _, created = Table.open_or_create(path / "0", PARTITION_SCHEMA, topic_config.table_configuration())
    if not created:
        raise TopicAlreadyExists(f"topic {topic} already exists", topic=topic)
    _complete_partitions(root, topic, topic_config)
    logger.info("created topic %s with %d partition(s) under %s", topic, topic_config.num_partitions, path.uri)
    return topic_config


def validate_new_topic(topic: str, num_partitions: int | None, config: Mapping[str, Any] | None) -> TopicConfig:
    """Check a topic's name, partition count and config as create_topic would; writes nothing."""
    validate_name(topic)
    overrides = dict(config or {})
    if num_partitions is not None:
        if not isinstance(num_partitions, int) or isinstance(num_partitions, bool) or num_partitions < 1:
            raise InvalidPartitions(f"num_partitions must be a positive integer, not {num_partitions!r}")
        overrides["num.partitions"] = num_partitions
    return TopicConfig.load(overrides)


def _complete_partitions(root: str | Location, topic: str, topic_config: TopicConfig) -> None:
    for partition in range(1, topic_config.num_partitions):
        location = partition_path(root, topic, partition)
        if not Table.exists(location):
            Table.create(location, PARTITION_SCHEMA, topic_config.table_configuration())


def list_topics(root: str | Location) -> list[str]:
    folder = check_root(root) / TOPICS_DIR
    return sorted(entry.name for entry in folder.children() if Table.exists(entry / "0"))


def topic_config(root: str | Location, topic: str) -> TopicConfig:
    try:
        table = Table.open(partition_path(root, topic, 0))
    except TableNotFoundError:
        raise UnknownTopicOrPartition(f"topic {topic} does not exist under {root}", topic=topic) from None
    if table.deleted:
        raise UnknownTopicOrPartition(f"topic {topic} is being deleted under {root}", topic=topic)
    return TopicConfig.from_table_configuration(table.configuration)


def topic_config_past_damage(root: str | Location, topic: str, damage: CorruptRecord) -> TopicConfig:
    """The topic's config from another partition when partition 0's log is damaged (every partition carries it).

    So damage to one partition refuses writes to it alone. Raises `damage` if no other partition opens.
    """
    folder = topic_path(root, topic)
    for entry in sorted(folder.children(), key=lambda entry: (len(entry.name), entry.name)):
        if not entry.name.isdigit() or entry.name == "0":
            continue
        try:
            table = Table.open(entry)
        except (TableNotFoundError, CorruptRecord):
            continue
        if not table.deleted:
            logger.warning(
                "%s: partition 0 is damaged (%s); the topic's config is read from partition %s", topic, damage, entry.name
            )
            return TopicConfig.from_table_configuration(table.configuration)
    raise damage


def open_partition(root: str | Location, topic: str, partition: int, clock: Clock = wall_clock_ms) -> PartitionLog:
    """Open one partition's log; UnknownTopicOrPartition if the topic or partition does not exist.

    One table load when the partition is there (every partition table carries the topic's config);
    the topic's partition 0 is read only to tell a missing topic from a partition a crash left uncreated.
    """
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise UnknownTopicOrPartition(f"partition must be an integer, not {partition!r}", topic=topic)
    if partition < 0:
        raise UnknownTopicOrPartition(f"topic {topic} has no partition {partition}", topic=topic)
    location = partition_path(root, topic, partition)
    try:
        table = Table.open(location)
    except TableNotFoundError:
        table = None
    if table is not None and table.deleted:
        raise UnknownTopicOrPartition(f"{topic}-{partition} was deleted", topic=topic)
    config = TopicConfig.from_table_configuration(table.configuration) if table is not None else topic_config(root, topic)
    if not 0 <= partition < config.num_partitions:
        raise UnknownTopicOrPartition(f"topic {topic} has partitions 0-{config.num_partitions - 1}, not {partition}", topic=topic)
    if table is None:
        _complete_partitions(root, topic, config)
        table = Table.open(location)
    return PartitionLog(table, topic, partition, config, clock)


def open_internal_partition(
    root: str | Location,
    log_name: str,
    partition: int,
    num_partitions: int,
    clock: Clock = wall_clock_ms,
    config: Mapping[str, Any] | None = None,
) -> PartitionLog:
    """Open partition `partition` of an internal log `<root>/<log_name>/` (such as `__transaction_state`).

    Tables are created on first use. The partition count is decided once per
    root, by whoever creates partition 0 (put-if-absent); every later caller
    gets that count from partition 0, whatever `num_partitions` it passes, so
    processes with different configs still hash ids to the same partition.
    `config` (topic configs such as `cleanup.policy`) applies to tables this call creates.
    """
    if not log_name.startswith("__"):
        raise ValueError(f"internal logs are named __<name>, not {log_name!r}")
    folder = internal_log_path(root, log_name)
    num_partitions = INTERNAL_LOG_PARTITIONS.get(log_name, num_partitions)
    if partition != 0:
        # A partition that exists carries the count partition 0 decided: one load instead of two.
        try:
            table = Table.open(folder / str(partition))
        except TableNotFoundError:
            pass
        else:
            found = TopicConfig.from_table_configuration(table.configuration)
            if 0 <= partition < found.num_partitions:
                return PartitionLog(table, log_name, partition, found, clock)
    first = _open_or_create(
        folder / "0", TopicConfig.load({**INTERNAL_LOG_CONFIG, **(config or {}), "num.partitions": num_partitions})
    )
    decided = TopicConfig.from_table_configuration(first.configuration)
    if not 0 <= partition < decided.num_partitions:
        raise UnknownTopicOrPartition(
            f"{log_name} has partitions 0-{decided.num_partitions - 1}, not {partition}", topic=log_name
        )
    table = first if partition == 0 else _open_or_create(folder / str(partition), decided)
    return PartitionLog(table, log_name, partition, decided, clock)


def existing_internal_partition(
    root: str | Location, log_name: str, partition: int, clock: Clock = wall_clock_ms
) -> PartitionLog | None:
    """Partition `partition` of an internal log if its table exists (None if not): for a reader, which never
    creates one (open_internal_partition does, for the coordinators)."""
    try:
        table = Table.open(internal_log_path(root, log_name) / str(partition))
    except TableNotFoundError:
        return None
    return PartitionLog(table, log_name, partition, TopicConfig.from_table_configuration(table.configuration), clock)


def internal_log_path(root: str | Location, log_name: str) -> Location:
    """The folder of an internal log's partition tables: `<root>/<log_name>/`, or its INTERNAL_LOG_FOLDERS entry."""
    return check_root(root).child(*INTERNAL_LOG_FOLDERS.get(log_name, (log_name,)))


def _open_or_create(location: Location, config: TopicConfig) -> Table:
    try:
        return Table.open(location)
    except TableNotFoundError:
        return Table.create(location, PARTITION_SCHEMA, config.table_configuration())[0]


def internal_partition_count(root: str | Location, log_name: str, num_partitions: int) -> int:
    """The partition count of an internal log, fixed when its partition 0 was created (see open_internal_partition)."""
    return open_internal_partition(root, log_name, 0, num_partitions).config.num_partitions


def existing_internal_partitions(root: str | Location, log_name: str) -> list[int]:
    """Partitions of an internal log that have a table (partitions are created on first use)."""
    folder = internal_log_path(root, log_name)
    return sorted(int(entry.name) for entry in folder.children() if entry.name.isdigit() and Table.exists(entry))
