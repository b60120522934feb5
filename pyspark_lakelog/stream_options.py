"""The `lakelog` streaming source's and sink's options, checked on the driver with lakelog's error classes.

Reading (`spark.readStream.format("lakelog")`), as Spark's Kafka source spells them:

- `root` and its `storage.<key>` options, as for batch reads (pyspark_lakelog.options);
- exactly one of `subscribe` (topics separated by commas), `subscribePattern`
  (a regular expression that must match a whole topic name; internal `__*`
  topics never match), `assign` (JSON `{"topic": [0, 1]}`) or `topic` (lakelog's
  alias of `subscribe` for one topic);
- `startingOffsets`: `earliest` (the default), `latest`, or JSON
  `{"topic": {"0": 23, "1": -2}}` naming every partition of every topic it names
  (-2 earliest, -1 latest); a subscribed topic it leaves out starts at earliest.
  Used only when the query starts without a checkpoint;
- `maxOffsetsPerTrigger`: at most this many offsets per micro-batch, shared over
  the partitions in proportion to what each has to read;
- `failOnDataLoss` (`true`, the default, or `false`): whether a position below a
  partition's log start (retention, `delete_records`) or a deleted topic fails the
  query, or is skipped with a WARNING;
- `includeHeaders` (`true`, the default, as lakelog's batch reads give headers,
  or `false`: no `headers` column);
- `isolation.level` (`read_committed`, the default, or `read_uncommitted`);
- `maxPartitionBytes`, as for batch reads.

Writing (`df.writeStream.format("lakelog")`): as batch writes (`root`, `storage.*`,
`topic` or a `topic` column, `transaction.timeout.ms`, `allow.auto.create.topics`),
with `transactional.id` optional: by default it is derived from the query's
`checkpointLocation`, so a restart of the same query (and a zombie of it) uses the
same id. `batch.id` is Spark's micro-batch id and cannot be set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from lakelog.errors import InvalidConfig
from lakelog.log import ISOLATION_LEVELS, READ_COMMITTED
from lakelog.store import Location
from pyspark_lakelog.options import DEFAULT_PARTITION_BYTES, STORAGE_PREFIX, WriteOptions, existing_root
from pyspark_lakelog.subscription import Subscription

STREAM_READ_KEYS = (
    "root",
    "topic",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "maxoffsetspertrigger",
    "failondataloss",
    "includeheaders",
    "isolation.level",
    "maxpartitionbytes",
)
# Spark's own name of the option, as the sink receives it (lower case).
CHECKPOINT_KEY = "checkpointlocation"
# Options of Spark's DataStreamWriter that the sink receives with its own: not the sink's to check.
SPARK_WRITER_KEYS = ("queryname", "path")
# A derived transactional id: this prefix and the query's checkpoint location, made absolute.
DERIVED_ID_PREFIX = "spark-stream:"


@dataclass(frozen=True)
class StreamReadOptions:
    """A checked streaming read. `subscription` is one of "subscribe", "pattern", "assign"."""

    root: Location
    subscription: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: Mapping[str, tuple[int, ...]] | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = True
    isolation_level: str = READ_COMMITTED
    max_partition_bytes: int = DEFAULT_PARTITION_BYTES

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamReadOptions:
        values = {str(key).lower(): value for key, value in dict(options).items()}
        unknown = sorted(key for key in set(values) - set(STREAM_READ_KEYS) - {"path"} if not key.startswith(STORAGE_PREFIX))
        if unknown:
            raise InvalidConfig(
                f"unknown option(s) {unknown} for reading a lakelog stream; known: {', '.join(STREAM_READ_KEYS)}, "
                f"{STORAGE_PREFIX}<key>",
                key=unknown[0],
            )
        root = existing_root(values)
        subscription = Subscription.parse(values, "a lakelog stream")
        kind, topics, pattern, assigned = subscription.kind, subscription.topics, subscription.pattern, subscription.assigned
        starting = values.get("startingoffsets", "earliest").strip()
        if starting.lower() in ("earliest", "latest"):
            starting = starting.lower()
        else:
            _check_offsets_json(starting)
        isolation_level = values.get("isolation.level", READ_COMMITTED)
        if isolation_level not in ISOLATION_LEVELS:
            raise InvalidConfig(
                f"isolation.level must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation_level!r}",
                key="isolation.level",
            )
        return cls(
            root,
            kind,
            topics,
            pattern,
            assigned,
            starting,
            _positive(values, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
            _bool(values, "failondataloss", "failOnDataLoss", True),
            _bool(values, "includeheaders", "includeHeaders", True),
            isolation_level,
            _positive(values, "maxpartitionbytes", "maxPartitionBytes") or DEFAULT_PARTITION_BYTES,
        )


def stream_write_options(options: Mapping[str, str]) -> WriteOptions:
    """The batch writer's options for a streaming sink: `transactional.id` from the checkpoint unless given."""
    values = {str(key).lower(): value for key, value in dict(options).items()}
    if values.get("batch.id"):
        raise InvalidConfig("a streaming write takes its batch.id from Spark's micro-batch id: do not set it", key="batch.id")
    checkpoint = values.pop(CHECKPOINT_KEY, None)
    for key in SPARK_WRITER_KEYS:
        values.pop(key, None)
    if not values.get("transactional.id"):
        if not checkpoint:
            raise InvalidConfig(
                "a lakelog streaming write needs option checkpointLocation (its transactional.id is derived from it) "
                "or option transactional.id",
                key="transactional.id",
            )
        values["transactional.id"] = derived_transactional_id(checkpoint)
    return WriteOptions.parse(values)


def derived_transactional_id(checkpoint: str) -> str:
    """The transactional id of a query writing with checkpoint `checkpoint` (a path, absolute or not, or a URI)."""
    if not urlparse(checkpoint).scheme or len(urlparse(checkpoint).scheme) == 1:  # a path (or a Windows drive)
        checkpoint = "file://" + os.path.abspath(checkpoint)
    return DERIVED_ID_PREFIX + checkpoint.rstrip("/")


def _check_offsets_json(text: str) -> None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidConfig(
            f'startingOffsets is neither "earliest", "latest" nor JSON like {{"topic": {{"0": 23}}}}: {error.msg}',
            key="startingOffsets",
        ) from None
    if not isinstance(value, dict) or not all(isinstance(parts, dict) for parts in value.values()):
        raise InvalidConfig(
            f'startingOffsets must be JSON like {{"topic": {{"0": 23, "1": -2}}}}, not {text!r}', key="startingOffsets"
        )


def _positive(values: Mapping[str, str], key: str, name: str) -> int | None:
    text = values.get(key)
    if text is None or str(text) == "":
        return None
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InvalidConfig(f"option {name} must be an integer, not {text!r}", key=name) from None
    if value < 1:
        raise InvalidConfig(f"option {name} must be positive, not {value}", key=name)
    return value


def _bool(values: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    text = values.get(key)
    if text is None or str(text) == "":
        return default
    if str(text).lower() not in ("true", "false"):
        raise InvalidConfig(f"option {name} must be true or false, not {text!r}", key=name)
    return str(text).lower() == "true"


__all__ = ["CHECKPOINT_KEY", "StreamReadOptions", "derived_transactional_id", "stream_write_options"]
