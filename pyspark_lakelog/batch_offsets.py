"""The offsets a batch read starts and ends at, per topic, from Spark's Kafka-source options.

`startingOffsets`/`endingOffsets` are parsed by the log's own parser (lakelog.log.scan.parse_offsets_json).
`startingTimestamp` (every partition) and `startingOffsetsByTimestamp` (JSON `{"topic": {"0": <ms>}}`) win over
`startingOffsets`, as in Spark: a partition starts at its earliest offset whose timestamp is at or after the time
(lakelog.log.timestamps), and a partition with none is OffsetOutOfRange, Spark's default `error` strategy. The
ending forms end a partition there, or at its latest offset when none is. Under `assign`, partitions left out
read nothing, and an offsets JSON names only the assigned partitions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from lakelog.errors import InvalidConfig, OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.log import READ_COMMITTED, open_partition
from lakelog.log.scan import EARLIEST, LATEST, OffsetSpec
from lakelog.log.timestamps import offset_for_timestamp
from lakelog.store import Location

# A spec by time: one timestamp for every partition, or one per partition.
TimeSpec = int | Mapping[int, int]


@dataclass(frozen=True)
class TopicBounds:
    """Where a batch read of one topic starts and ends, and (under assign) which partitions it reads."""

    starting: OffsetSpec = EARLIEST
    ending: OffsetSpec = LATEST
    starting_time: TimeSpec | None = None
    ending_time: TimeSpec | None = None
    partitions: tuple[int, ...] | None = None


def parse_times(values: Mapping[str, str], prefix: str, topics: list[str]) -> dict[str, TimeSpec] | None:
    """`<prefix>Timestamp` or `<prefix>OffsetsByTimestamp` (lower-case keys in `values`) per topic, or None."""
    single, by_partition = f"{prefix}timestamp", f"{prefix}offsetsbytimestamp"
    name = f"{prefix}Timestamp"
    if values.get(single):
        try:
            stamp = int(values[single])
        except ValueError:
            raise InvalidConfig(f"option {name} must be a time in ms, not {values[single]!r}", key=name) from None
        return dict.fromkeys(topics, stamp)
    if not values.get(by_partition):
        return None
    name = f"{prefix}OffsetsByTimestamp"
    try:
        value = json.loads(values[by_partition])
    except json.JSONDecodeError as error:
        raise InvalidConfig(
            f'option {name} must be JSON like {{"topic": {{"0": 1700000000000}}}}: {error.msg}', key=name
        ) from None
    if not isinstance(value, dict) or not all(isinstance(parts, dict) for parts in value.values()):
        raise InvalidConfig(f'option {name} must be JSON like {{"topic": {{"0": 1700000000000}}}}', key=name)
    unknown = sorted(set(value) - set(topics))
    missing = sorted(set(topics) - set(value))
    if unknown or missing:
        raise UnknownTopicOrPartition(f"{name} must name exactly the topics read ({topics}), not {sorted(value)}")
    try:
        return {topic: {int(p): int(ms) for p, ms in parts.items()} for topic, parts in value.items()}
    except (TypeError, ValueError):
        raise InvalidConfig(f"option {name} maps partition numbers to times in ms: {values[by_partition]!r}", key=name) from None


def resolve(
    root: Location, topic: str, bounds: TopicBounds, isolation_level: str, num_partitions: int
) -> tuple[OffsetSpec, OffsetSpec]:
    """The starting and ending specs `plan_scan` takes for every partition of `topic`."""
    partitions = range(num_partitions)
    starting = _fill(bounds.starting, partitions, EARLIEST, bounds.partitions, "startingOffsets", topic)
    ending = _fill(bounds.ending, partitions, LATEST, bounds.partitions, "endingOffsets", topic)
    if bounds.starting_time is not None:
        starting = _by_time(root, topic, bounds.starting_time, partitions, isolation_level, "start", bounds.partitions)
    if bounds.ending_time is not None:
        ending = _by_time(root, topic, bounds.ending_time, partitions, isolation_level, "end", bounds.partitions)
    return starting, ending


def _fill(
    spec: OffsetSpec, partitions: range, default: int, assigned: tuple[int, ...] | None, name: str, topic: str
) -> OffsetSpec:
    """Under assign, an offsets JSON names the assigned partitions: the others get `default` (and read nothing)."""
    if assigned is None or isinstance(spec, int):
        return spec
    named = sorted(spec)
    if named != sorted(assigned):
        raise UnknownTopicOrPartition(f"{name} for {topic} must name the assigned partitions {list(assigned)}, not {named}")
    return {p: spec.get(p, default) for p in partitions}


def _by_time(
    root: Location,
    topic: str,
    spec: TimeSpec,
    partitions: range,
    isolation_level: str,
    side: str,
    assigned: tuple[int, ...] | None,
) -> dict[int, int]:
    name = "startingOffsetsByTimestamp" if side == "start" else "endingOffsetsByTimestamp"
    wanted = assigned if assigned is not None else tuple(partitions)
    if not isinstance(spec, int) and sorted(spec) != sorted(wanted):
        raise UnknownTopicOrPartition(f"{name} for {topic} must name partitions {list(wanted)}, not {sorted(spec)}")
    offsets: dict[int, int] = {}
    for partition in partitions:
        if partition not in wanted:
            offsets[partition] = EARLIEST if side == "start" else LATEST
            continue
        log = open_partition(root, topic, partition)
        end = log.last_stable_offset() if isolation_level == READ_COMMITTED else log.high_watermark()
        stamp = spec if isinstance(spec, int) else spec[partition]
        found = offset_for_timestamp(log, stamp, end)
        if found is None and side == "start":
            raise OffsetOutOfRange(f"{topic}-{partition}: no record at or after timestamp {stamp} to start from")
        offsets[partition] = LATEST if found is None else found
    return offsets


__all__ = ["TopicBounds", "parse_times", "resolve"]
