"""A topic's and a group's history over time, from what their tables already hold: no request beyond a refresh.

- **When offsets were written.** Every commit of a partition adds one data file, whose add action carries its
  commit time (`modificationTime`, by the writer's clock) and its offset range: the partition's files in hand are
  its commit history for the records still in the log. A merge of small files (S5.3) is one file at the merge's
  time, so the history before a merge shows as one step; what retention deleted is no longer shown. Read with the
  topic's description, in the same refresh of the process's kept handles (`topic_writes`): no request more.
- **When a group committed its offsets.** Every offset commit is a record of the group's `__consumer_offsets`
  partition with its commit time (S6.1); a transactional one counts once its transaction committed (read as a
  read_committed consumer reads it, S7.1). The newest `max_offsets` offsets of that partition are read.
- **The last sweep**: the newest row of `__sweeps` (lakelog.log.sweep_log), which every sweep leaves.
- **Lag over time**, from the two: at each offset commit of the group and each commit of data to a partition it
  commits offsets of, the partitions' ends then less the offsets the group had committed by then. It counts offsets (markers and aborted records among them), as Kafka's lag does;
  the records a consumer would be handed now are `browse.records_lag`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lakelog.client.admin.topics import describe_topic_and
from lakelog.client.types import TopicDescription
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG
from lakelog.coordinator.group.records import OffsetRecord, from_row
from lakelog.coordinator.group.types import partition_for_group
from lakelog.errors import CorruptRecord
from lakelog.log import PartitionLog
from lakelog.log.fetch import READ_COMMITTED
from lakelog.log.partition_file import partition_files
from lakelog.log.sweep_log import SweepRow, last_sweep
from lakelog.log.topics import existing_internal_partition
from lakelog.store import Location
from lakelog.typedef import TopicPartitionKey

# Offsets of a group's __consumer_offsets partition read for its history, the newest first.
MAX_HISTORY_OFFSETS = 20_000
PAGE_BYTES = 8 << 20


@dataclass(frozen=True)
class Written:
    """One commit of data to a partition: when, and the partition's end offset after it."""

    time_ms: int
    end_offset: int


@dataclass(frozen=True)
class Committed:
    """One offset a group committed: when, for which partition, and the offset."""

    time_ms: int
    topic: str
    partition: int
    offset: int


def writes_of(log: PartitionLog) -> list[Written]:
    """A partition's commits of the files still in its log, in time order (see the module's note): pass it to
    `describe_topic_and` to read them in the same refresh as the topic's description."""
    writes, reached = [], 0
    for time_ms, end in sorted(
        (file.modification_time_ms, file.max_offset + 1) for file in partition_files(log.table) if file.num_records
    ):
        reached = max(reached, end)  # a merged file is later than the newer files it did not take in
        writes.append(Written(time_ms, reached))
    return writes


def topic_writes(root: str | Location, topic: str) -> tuple[TopicDescription, dict[int, list[Written]]]:
    """The topic's description and each partition's commits, in one refresh of its handles."""
    description, writes = describe_topic_and(root, topic, writes_of)
    return description, dict(enumerate(writes))


def offsets_over_time(writes: Mapping[int, list[Written]]) -> list[tuple[int, int]]:
    """(time, the sum of the partitions' end offsets then) at each commit: a topic's offsets written over time."""
    events = sorted((write.time_ms, partition, write.end_offset) for partition, each in writes.items() for write in each)
    ends: dict[int, int] = {}
    total, points = 0, []
    for time_ms, partition, end in events:
        before = ends.get(partition, 0)
        if end > before:
            ends[partition] = end
            total += end - before
        points.append((time_ms, total))
    return points


def commits_per_bucket(times_ms: Iterable[int], start_ms: int, end_ms: int, buckets: int) -> list[int]:
    """How many of `times_ms` fall in each of `buckets` equal spans of [start_ms, end_ms)."""
    counts = [0] * buckets
    span = max(end_ms - start_ms, 1)
    for time_ms in times_ms:
        if start_ms <= time_ms < end_ms:
            counts[min((time_ms - start_ms) * buckets // span, buckets - 1)] += 1
    return counts


def offset_history(root: str | Location, group_id: str, max_offsets: int = MAX_HISTORY_OFFSETS) -> list[Committed]:
    """The group's offset commits still in its `__consumer_offsets` partition (the newest `max_offsets` offsets of
    it), in time order; [] if the partition was never made."""
    first = existing_internal_partition(root, CONSUMER_OFFSETS_LOG, 0)  # it holds the log's partition count
    if first is None:
        return []
    partition = partition_for_group(group_id, first.config.num_partitions)
    log = first if partition == 0 else existing_internal_partition(root, CONSUMER_OFFSETS_LOG, partition)
    if log is None:
        return []
    end = log.last_stable_offset()
    offset = max(log.log_start_offset(), end - max_offsets)
    key = group_id.encode()
    found: list[Committed] = []
    while offset < end:
        fetched = log.fetch(offset, 1 << 30, PAGE_BYTES, READ_COMMITTED)
        if fetched.next_offset <= offset:
            break
        columns = fetched.rows.select(["key", "value", "control"]).to_pydict()
        for row_key, value, control in zip(columns["key"], columns["value"], columns["control"], strict=True):
            if control is not None or row_key != key or value is None:
                continue
            try:
                record = from_row(json.loads(value))
            except (CorruptRecord, ValueError):
                continue  # the group's own reads refuse such a row (describe says so); a chart leaves it out
            if isinstance(record, OffsetRecord) and not record.removed:
                found.append(Committed(record.commit_ms, record.topic, record.partition, record.offset))
        offset = fetched.next_offset
    found.sort(key=lambda committed: committed.time_ms)
    return found


def lag_over_time(
    commits: list[Committed], writes: Mapping[TopicPartitionKey, list[Written]], now_ms: int | None = None
) -> list[tuple[int, int]]:
    """(time, the group's offset lag then) at each of its commits and at each commit of data to a partition it
    had committed offsets of by then (and at `now_ms`): the sum over those partitions of the partition's end offset
    less the offset committed, never below 0 each."""
    # Events in time order; at one time a write counts before a commit (the group commits what it read).
    events = sorted(
        [(write.time_ms, 0, tp, write.end_offset) for tp, each in writes.items() for write in each]
        + [(commit.time_ms, 1, (commit.topic, commit.partition), commit.offset) for commit in commits]
    )
    ends: dict[TopicPartitionKey, int] = {}
    committed: dict[TopicPartitionKey, int] = {}
    lag, points = 0, []
    for time_ms, kind, tp, value in events:
        before = max(ends.get(tp, 0) - committed[tp], 0) if tp in committed else 0
        if kind == 0:
            ends[tp] = max(ends.get(tp, 0), value)
        else:
            committed[tp] = value
        if tp not in committed:
            continue
        lag += max(ends.get(tp, 0) - committed[tp], 0) - before
        points.append((time_ms, lag))
    if points and now_ms is not None and now_ms > points[-1][0]:
        points.append((now_ms, lag))
    return points


__all__ = [
    "Committed",
    "SweepRow",
    "Written",
    "commits_per_bucket",
    "lag_over_time",
    "last_sweep",
    "offset_history",
    "offsets_over_time",
    "topic_writes",
    "writes_of",
]
