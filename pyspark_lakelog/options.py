"""The `lakelog` data source's options, checked on the driver with lakelog's error classes.

Reading (exactly one of `topic`, `view`, `status`):

- `root`: the lakelog root, a local folder, `file:///...` or `s3://bucket/prefix`
  (required; it must exist). `storage.<key>` options set the store's connection
  (keys: `lakelog.store.io.fileio.S3_KEYS`, such as `storage.endpoint_url`,
  `storage.region`, `storage.access_key_id`, `storage.secret_access_key`,
  `storage.allow_http`); unset keys come from the `AWS_*` environment.
- `subscribe` (or lakelog's `topic`): a topic, or several separated by commas; `subscribePattern` (a regular
  expression matching whole topic names, resolved on the driver) or `assign` (JSON `{"topic": [0, 1]}`), as
  Spark's Kafka source takes them (pyspark_lakelog.subscription); rows in Spark's Kafka-source
  columns. `isolation.level` (`read_committed`, the default, or
  `read_uncommitted`), `startingOffsets` (`earliest`, the default, or JSON
  `{"topic": {"0": 23, "1": -2}}`) and `endingOffsets` (`latest`, the default,
  or JSON; -1 is latest), and `startingTimestamp`, `startingOffsetsByTimestamp`,
  `endingTimestamp`, `endingOffsetsByTimestamp`, which win over them
  (pyspark_lakelog.batch_offsets).
- `view`: the materialized read_committed view of a topic (`<root>/views/<topic>`).
- `status`: the partition-status table of a topic (`<root>/status/<topic>`).
- `maxPartitionBytes`: data files per input partition (default 128 MiB); a
  topic-partition larger than that is read by several tasks, and smaller ones
  share a task, each counted at its size plus 4 MiB to open (Spark's
  `spark.sql.files.openCostInBytes`).
- `minPartitions` (topic reads; Spark's Kafka-source option): the fewest tasks a
  read is packed into, wherever it has that many pieces (default 2).

Writing: `root` and its `storage.<key>` options, `topic` (or a `topic`
column), `transactional.id` (required), `batch.id` (optional: a non-negative
integer, growing from batch to batch; a batch at or below the last committed
one is skipped), `transaction.timeout.ms` (optional) and `allow.auto.create.topics`
(`true` or `false`; default the Producer's, true): a missing topic is created on first write with the root's
topic defaults, as the Producer creates one, where the root's `auto.create.topics.enable` allows it too. The
write's config defaults (the partitioner, these two keys) are the driver's: executors never read their own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from lakelog import config
from lakelog.errors import InvalidConfig, TopicAlreadyExists, UnknownTopicOrPartition
from lakelog.log import ISOLATION_LEVELS, READ_COMMITTED, create_topic, topic_config
from lakelog.log.scan import EARLIEST, LATEST, PartitionScan, parse_offsets_json, plan_scan
from lakelog.store import Location, check_root, open_root
from lakelog.store.io.fileio import S3_KEYS, storage_key
from pyspark_lakelog.batch_offsets import TopicBounds, parse_times, resolve
from pyspark_lakelog.subscription import SUBSCRIPTIONS, Subscription

DEFAULT_PARTITION_BYTES = 128 << 20
READ_KEYS = (
    "root",
    "topic",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "view",
    "status",
    "quality",
    "isolation.level",
    "startingoffsets",
    "endingoffsets",
    "maxpartitionbytes",
    "minpartitions",
)
# The options of a topic read that a view, status or quality read refuses.
TOPIC_READ_KEYS = (
    "isolation.level",
    "startingoffsets",
    "endingoffsets",
    "minpartitions",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
)
logger = logging.getLogger(__name__)

WRITE_KEYS = ("root", "topic", "transactional.id", "batch.id", "transaction.timeout.ms", "allow.auto.create.topics")
AUTO_CREATE = "allow.auto.create.topics"
# `storage.<key>`: the root's store connection (lakelog.store.io.fileio.S3_KEYS), as `lakelog.storage.<key>` in client configs.
STORAGE_PREFIX = "storage."


@dataclass(frozen=True)
class ReadOptions:
    """A checked read: what to read (`kind` is "topic", "view", "status" or "quality") and how."""

    root: Location
    kind: str
    names: tuple[str, ...]
    isolation_level: str = READ_COMMITTED
    # Per topic read, where it starts and ends (topic reads only).
    bounds: Mapping[str, TopicBounds] | None = None
    max_partition_bytes: int = DEFAULT_PARTITION_BYTES
    min_partitions: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        values = _lower(options)
        _refuse_unknown(values, READ_KEYS, "reading")
        root = existing_root(values)
        kinds = [kind for kind in ("topic", "view", "status", "quality") if values.get(kind)]
        if any(values.get(key) for key in SUBSCRIPTIONS if key != "topic") and "topic" not in kinds:
            kinds.insert(0, "topic")
        if len(kinds) != 1:
            raise InvalidConfig(
                "lakelog reads need exactly one of the options subscribe (or topic), subscribePattern, assign, "
                f"view, status or quality (got {', '.join(kinds) or 'none'})",
                key="topic",
            )
        kind = kinds[0]
        names: tuple[str, ...] = ()
        if kind != "topic":
            names = tuple(name.strip() for name in values[kind].split(",") if name.strip())
        if kind != "topic" and len(names) != 1:
            raise InvalidConfig(f"option {kind} names one topic, not {values[kind]!r}", key=kind)
        if kind == "quality" and names != ("results",):
            raise InvalidConfig(f"option quality names the table results, not {values[kind]!r}", key=kind)
        if kind in ("view", "status"):
            # The name becomes `<root>/views/<name>`: a topic's name, or nothing (no `../x` outside the root).
            config.validate_name(names[0], what=kind)
        if kind != "topic":
            for key in TOPIC_READ_KEYS:
                if key in values:
                    raise InvalidConfig(f"option {key} applies to topic reads, not to a {kind}", key=key)
        isolation_level = values.get("isolation.level", READ_COMMITTED)
        if isolation_level not in ISOLATION_LEVELS:
            raise InvalidConfig(
                f"isolation.level must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation_level!r}",
                key="isolation.level",
            )
        bounds = None
        if kind == "topic":
            names, bounds = _topic_bounds(root, values)
        max_bytes = _positive_int(values, "maxpartitionbytes", DEFAULT_PARTITION_BYTES)
        min_partitions = _positive_int(values, "minpartitions", 0) or None
        return cls(root, kind, names, isolation_level, bounds, max_bytes, min_partitions)

    def plan(self) -> list[PartitionScan]:
        """The partition scans of a topic read, topic by topic in partition order (assign: its partitions only)."""
        assert self.bounds is not None
        scans = []
        for topic in self.names:
            bounds = self.bounds[topic]
            count = topic_config(self.root, topic).num_partitions
            starting, ending = resolve(self.root, topic, bounds, self.isolation_level, count)
            for scan in plan_scan(self.root, topic, self.isolation_level, starting, ending):
                if bounds.partitions is None or scan.partition in bounds.partitions:
                    scans.append(scan)
        return scans


def _topic_bounds(root: Location, values: Mapping[str, str]) -> tuple[tuple[str, ...], dict[str, TopicBounds]]:
    """The topics a read names (checked on the driver, before any task runs) and where each starts and ends."""
    subscription = Subscription.parse(values, "a lakelog read")
    names = subscription.matching(root)
    for name in names:
        # Unknown topics fail here, on the driver, before any task runs.
        count = topic_config(root, name).num_partitions
        if subscription.assigned is not None:
            beyond = [p for p in subscription.assigned[name] if not 0 <= p < count]
            if beyond:
                raise UnknownTopicOrPartition(f"assign names partitions {beyond} that {name} has not (0-{count - 1})", topic=name)
    starting = parse_offsets_json("startingOffsets", values.get("startingoffsets", "earliest"), names)
    ending = parse_offsets_json("endingOffsets", values.get("endingoffsets", "latest"), names)
    starting_times = parse_times(values, "starting", names) or {}
    ending_times = parse_times(values, "ending", names) or {}
    assigned = subscription.assigned or {}
    bounds = {
        name: TopicBounds(starting[name], ending[name], starting_times.get(name), ending_times.get(name), assigned.get(name))
        for name in names
    }
    return tuple(names), bounds


@dataclass(frozen=True)
class WriteOptions:
    """A checked write: where, under which transactional id, and which batch."""

    root: Location
    topic: str | None
    transactional_id: str
    batch_id: int | None
    transaction_timeout_ms: int | None
    auto_create: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        values = _lower(options)
        _refuse_unknown(values, WRITE_KEYS, "writing")
        root = existing_root(values)
        topic = values.get("topic") or None
        # Decided here, on the driver, with the driver's config defaults ($LAKELOG_CONF_DIR): executors create a
        # topic they meet in a topic column only as the driver would (their environment is not the driver's).
        auto_create = _bool(values, AUTO_CREATE, bool(config.load("producer")[AUTO_CREATE])) and root_creates_topics()
        if topic is not None:
            write_partition_count(root, topic, auto_create)
        transactional_id = values.get("transactional.id")
        if not transactional_id:
            raise InvalidConfig(
                "lakelog writes are transactional: set option transactional.id (and batch.id to make a retried "
                "job's write happen once)",
                key="transactional.id",
            )
        batch_id = _optional_int(values, "batch.id")
        timeout = _optional_int(values, "transaction.timeout.ms")
        return cls(root, topic, transactional_id, batch_id, timeout, auto_create)


def root_creates_topics() -> bool:
    """The broker key auto.create.topics.enable, as the config defaults of this process have it."""
    return bool(config.load("broker").get("auto.create.topics.enable", False))


def write_partition_count(root: Location, topic: str, auto_create: bool) -> int:
    """The partition count of a topic written to; a missing one is created as the Producer creates it (with the
    root's topic defaults), when `auto_create` (the write's allow.auto.create.topics and the broker key
    auto.create.topics.enable, both decided on the driver: WriteOptions.auto_create) allows it."""
    try:
        return topic_config(root, topic).num_partitions
    except UnknownTopicOrPartition:
        if not auto_create or topic.startswith("__"):
            raise
    try:
        created = create_topic(root, topic)
    except TopicAlreadyExists:  # another writer created it first
        return topic_config(root, topic).num_partitions
    logger.info("created topic %s on first write (allow.auto.create.topics, auto.create.topics.enable)", topic)
    return created.num_partitions


def existing_root(values: Mapping[str, str]) -> Location:
    """The `root` option as a checked Location carrying the `storage.*` options; InvalidConfig if it holds nothing,
    UnresolvedRoot if it is no root."""
    root = values.get("root")
    if not root:
        raise InvalidConfig("option root is required: the lakelog root (a folder or s3://bucket/prefix)", key="lakelog.root")
    location = check_root(root, storage_options(values))
    # A local root must be a folder; on an object store, a root that holds no object has no topics either.
    if not location.is_dir():
        raise InvalidConfig(f"lakelog root {location.uri} does not exist (or is not a folder)", key="lakelog.root")
    # UnresolvedRoot for a folder or prefix that is no root (never initialised): neither read nor written.
    return open_root(location)


def storage_options(values: Mapping[str, str]) -> dict[str, str]:
    """The `storage.<key>` options by their storage option names; InvalidConfig naming an unknown one."""
    options = {}
    for key, value in values.items():
        if not key.startswith(STORAGE_PREFIX):
            continue
        name = key[len(STORAGE_PREFIX) :]
        try:
            options[storage_key(name)] = value
        except InvalidConfig:
            known = ", ".join(STORAGE_PREFIX + known_key for known_key in S3_KEYS)
            raise InvalidConfig(f"unknown option {key} for lakelog; storage options are: {known}", key=key) from None
    return options


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands options over case-insensitively; compare in lower case.
    return {str(key).lower(): value for key, value in dict(options).items()}


def _refuse_unknown(values: Mapping[str, str], known: tuple[str, ...], doing: str) -> None:
    unknown = sorted(key for key in set(values) - set(known) - {"path"} if not key.startswith(STORAGE_PREFIX))
    if unknown:
        raise InvalidConfig(
            f"unknown option(s) {unknown} for {doing} lakelog; known: {', '.join(known)}, {STORAGE_PREFIX}<key>",
            key=unknown[0],
        )


def _positive_int(values: Mapping[str, str], key: str, default: int) -> int:
    value = _optional_int(values, key)
    if value is None:
        return default
    if value < 1:
        raise InvalidConfig(f"option {key} must be positive, not {value}", key=key)
    return value


def _bool(values: Mapping[str, str], key: str, default: bool) -> bool:
    text = values.get(key)
    if text is None or text == "":
        return default
    if str(text).lower() not in ("true", "false"):
        raise InvalidConfig(f"option {key} must be true or false, not {text!r}", key=key)
    return str(text).lower() == "true"


def _optional_int(values: Mapping[str, str], key: str) -> int | None:
    text = values.get(key)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InvalidConfig(f"option {key} must be an integer, not {text!r}", key=key) from None
    if value < 0:
        raise InvalidConfig(f"option {key} must not be negative, not {value}", key=key)
    return value


__all__ = ["EARLIEST", "LATEST", "ReadOptions", "WriteOptions", "existing_root", "storage_options"]
