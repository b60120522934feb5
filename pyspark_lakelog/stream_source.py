"""`spark.readStream.format("lakelog")`: topics as a Structured Streaming source, read_committed by default.

Offsets are Spark's Kafka source's (JSON: topic -> partition -> next offset to
read), so the query's checkpoint holds them as it holds Kafka's. A micro-batch
reads [start, end) of each partition; `latestOffset` ends every partition at its
LSO in read_committed (its high watermark in read_uncommitted), so an open
transaction holds back its own partition and no other (S5.1), and a batch is
never planned past what the isolation level may see. The rows are read as batch
reads read them (`PartitionScan`: `PartitionLog.fetch` on a pinned snapshot,
aborted transactions dropped, S5.3), one input partition per topic-partition
range (cut into pieces of about `maxPartitionBytes`).

PySpark 4.1's `DataSourceStreamReader.latestOffset()` is told neither the
batch's start nor a read limit (Spark 4.2 adds `latestOffset(start, limit)`), so
the reader keeps its position itself: the end of the last batch Spark planned
or committed (on restart, Spark plans the checkpoint's last batch again, with
`partitions(end, end)` for a committed one, before it asks for a new end), else
the initial offsets. `maxOffsetsPerTrigger` caps a new end from that position.

Partitions added to a topic, and topics that come to match `subscribePattern`,
are read from their log start. A position below a partition's log start (its
rows deleted by retention or `delete_records`) or a topic deleted under the
query fails the query with OffsetOutOfRange / UnknownTopicOrPartition when
`failOnDataLoss` is true (the default), else is skipped with a WARNING.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from lakelog.catalog import user_topics
from lakelog.errors import OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.log import READ_COMMITTED, PartitionLog, open_partition, plan_handles, topic_config
from lakelog.log.partition import LOG_END_OFFSET_APP_ID
from lakelog.log.scan import EARLIEST, LATEST, PLAN_THREADS, PartitionScan
from lakelog.log.topics import partition_path
from lakelog.store import Location
from lakelog.store.delta.pinned import pin
from pyspark_lakelog.source import read_scans, scan_tasks
from pyspark_lakelog.stream_options import StreamReadOptions
from pyspark_lakelog.subscription import Subscription

logger = logging.getLogger(__name__)

# Spark's Kafka source offsets: {"topic": {"0": 23}}, partitions as strings (JSON object keys).
Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class StreamPartition(InputPartition):
    """One input partition of a micro-batch: ranges of one or more topic-partitions, or none (a batch with no rows)."""

    scans: tuple[PartitionScan, ...]
    include_headers: bool


class TopicStreamReader(DataSourceStreamReader):
    """Micro-batches of topic rows in the Kafka source's columns, bounded by each partition's LSO."""

    def __init__(self, options: StreamReadOptions) -> None:
        self.options = options
        # The end of the last batch Spark planned or committed: where the next batch starts.
        self.position: Offsets | None = None
        self.initial: Offsets | None = None

    # -- offsets (driver) --------------------------------------------------------------

    def initialOffset(self) -> Offsets:
        """`startingOffsets` resolved now: earliest is each log start, latest each LSO (HW in read_uncommitted)."""
        if self.initial is None:
            explicit = _offsets_json(self.options.starting_offsets)
            offsets: Offsets = {}
            for topic, partitions in self._partitions().items():
                given = explicit.get(topic) if explicit is not None else None
                if given is not None and set(given) != {str(p) for p in partitions}:
                    raise UnknownTopicOrPartition(
                        f"startingOffsets must give an offset for every partition of {topic} ({sorted(partitions)}), "
                        f"got {sorted(int(p) for p in given)}; use -2 for earliest and -1 for latest",
                        topic=topic,
                    )
                offsets[topic] = {}
                with _opened(self.options.root, [(topic, p) for p in partitions]) as logs:
                    for partition in partitions:
                        log = _existing(logs, topic, partition)
                        spec = given[str(partition)] if given is not None else self._default_start()
                        offsets[topic][str(partition)] = self._resolve_start(log, spec)
            self.initial = offsets
        return self.initial

    def latestOffset(self) -> Offsets:
        """The next batch's end: every partition's LSO (or HW), capped by maxOffsetsPerTrigger from the position."""
        start = self.position if self.position is not None else self.initialOffset()
        begin: Offsets = {}
        end: Offsets = {}
        wanted = [(topic, partition) for topic, partitions in self._partitions(start).items() for partition in partitions]
        with _opened(self.options.root, wanted) as logs:
            for topic, partition in wanted:
                log = _existing(logs, topic, partition)
                at = start.get(topic, {}).get(str(partition))
                first = self._checked_start(log, at)
                limit = log.last_stable_offset() if self.options.isolation_level == READ_COMMITTED else log.high_watermark()
                begin.setdefault(topic, {})[str(partition)] = first
                # Never behind the position (an offset in the checkpoint is never moved back).
                end.setdefault(topic, {})[str(partition)] = max(first, limit, at if at is not None else first)
        if self.options.max_offsets_per_trigger is not None:
            end = _rate_limited(begin, end, self.options.max_offsets_per_trigger)
        return end

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        """The ranges [start, end) of every partition, planned on snapshots taken now (at or past `end`)."""
        self._advance(end)
        scans: list[PartitionScan] = []
        wanted = []
        for topic, partitions in end.items():
            for key, stop in partitions.items():
                at = start.get(topic, {}).get(key)
                if at is not None and at > stop:
                    # Never planned by this reader (an end is never below its position): refuse, not read twice.
                    raise OffsetOutOfRange(f"{topic}-{key}: a micro-batch from offset {at} back to {stop}")
                if at is None or at < stop:  # at == stop: nothing to read (a restart plans its last batch as end..end)
                    wanted.append((topic, int(key)))
        with _opened(self.options.root, wanted) as logs:
            for topic, partition in wanted:
                at, stop = start.get(topic, {}).get(str(partition)), end[topic][str(partition)]
                log = logs[(topic, partition)]
                if isinstance(log, UnknownTopicOrPartition):
                    self._lost(f"topic {topic} was deleted; offsets {at}-{stop} of partition {partition} cannot be read", topic)
                    continue
                first = self._checked_start(log, at)
                if first < stop:
                    scans.append(_scan(log, self.options.isolation_level, first, stop))
        tasks = scan_tasks(scans, self.options.max_partition_bytes)  # [()] when there is nothing to read
        return [StreamPartition(task, self.options.include_headers) for task in tasks]

    def commit(self, end: Offsets) -> None:
        self._advance(end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StreamPartition)
        for batch in read_scans(partition.scans):
            yield batch if partition.include_headers else batch.drop_columns(["headers"])

    # -- internals -----------------------------------------------------------------------

    def _advance(self, end: Offsets) -> None:
        position = {topic: dict(partitions) for topic, partitions in (self.position or {}).items()}
        for topic, partitions in end.items():
            for key, offset in partitions.items():
                known = position.setdefault(topic, {}).get(key)
                position[topic][key] = offset if known is None else max(known, offset)
        self.position = position

    def _default_start(self) -> int:
        return LATEST if self.options.starting_offsets == "latest" else EARLIEST

    def _resolve_start(self, log: PartitionLog, spec: int) -> int:
        if spec == EARLIEST:
            return log.log_start_offset()
        if spec == LATEST:
            return log.last_stable_offset() if self.options.isolation_level == READ_COMMITTED else log.high_watermark()
        if not isinstance(spec, int) or isinstance(spec, bool) or spec < 0:
            raise OffsetOutOfRange(f"startingOffsets for {log.topic}-{log.partition}: {spec!r} is not an offset, -1 or -2")
        if spec > log.high_watermark():
            raise OffsetOutOfRange(
                f"startingOffsets for {log.topic}-{log.partition}: {spec} is past the log end offset {log.high_watermark()}",
                log_start_offset=log.log_start_offset(),
                log_end_offset=log.high_watermark(),
            )
        return self._checked_start(log, spec)

    def _checked_start(self, log: PartitionLog, at: int | None) -> int:
        """Where reading `log` from `at` starts: its log start for a new partition; data loss below the log start."""
        log_start = log.log_start_offset()
        if at is None:
            return log_start  # a partition new to the query is read from its start, as Spark's Kafka source does
        if at < log_start:
            self._lost(
                f"{log.topic}-{log.partition}: offsets {at}-{log_start - 1} are gone (log start {log_start}: "
                "retention or delete_records) before the query read them",
                log.topic,
                OffsetOutOfRange,
            )
            return log_start
        return at

    def _lost(self, what: str, topic: str, error: type[Exception] = UnknownTopicOrPartition) -> None:
        if self.options.fail_on_data_loss:
            raise error(f"{what}; the query stops (set failOnDataLoss=false to skip lost data with a warning)")
        logger.warning("lakelog stream: %s; skipped (failOnDataLoss=false)", what)

    def _partitions(self, position: Offsets | None = None) -> dict[str, list[int]]:
        """The topic-partitions the query reads now; a topic of the position that is gone is data loss."""
        options = self.options
        topics = Subscription(options.subscription, options.topics, options.pattern, options.assigned).matching(options.root)
        found: dict[str, list[int]] = {}
        for topic in topics:
            try:
                count = topic_config(options.root, topic).num_partitions
            except UnknownTopicOrPartition:
                if position is None and options.subscription != "pattern":
                    raise  # a topic missing when the query starts: the query cannot start
                if position is not None and topic in position:
                    self._lost(f"topic {topic} was deleted under the query", topic)
                continue
            if options.assigned is not None:
                missing = [p for p in options.assigned[topic] if p >= count]
                if missing:
                    raise UnknownTopicOrPartition(
                        f"assign names partitions {missing} that {topic} has not (0-{count - 1})", topic=topic
                    )
                found[topic] = list(options.assigned[topic])
            else:
                found[topic] = list(range(count))
        if position is not None:
            for topic in sorted(set(position) - set(found)):
                if options.subscription == "pattern" and topic in user_topics(options.root):
                    continue  # still there, no longer matched: not lost
                if topic not in topics:
                    self._lost(f"topic {topic} was deleted under the query", topic)
        return found


@contextlib.contextmanager
def _opened(
    root: object, wanted: list[tuple[str, int]]
) -> Iterator[dict[tuple[str, int], PartitionLog | UnknownTopicOrPartition]]:
    """Each wanted partition's handle at its latest version (or the error that says it does not exist), opened side
    by side (on an object store each is a few small reads that wait on the store), through the process's kept
    handles (lakelog.log.plan_handles: the stream's Python worker plans every micro-batch again), given back after."""
    location = Location.of(root)

    def take(one: tuple[str, int]) -> tuple[tuple[str, int], PartitionLog | UnknownTopicOrPartition]:
        topic, partition = one
        try:
            return one, plan_handles.take(
                partition_path(location, topic, partition), lambda: open_partition(location, topic, partition)
            )
        except UnknownTopicOrPartition as error:
            return one, error

    if len(wanted) <= 1:
        logs = dict(map(take, wanted))
    else:
        with ThreadPoolExecutor(min(len(wanted), PLAN_THREADS), thread_name_prefix="lakelog-stream") as pool:
            logs = dict(pool.map(take, wanted))
    try:
        yield logs
    finally:
        for (topic, partition), log in logs.items():
            if isinstance(log, PartitionLog):
                plan_handles.give_back(partition_path(location, topic, partition), log)


def _existing(logs: Mapping[tuple[str, int], PartitionLog | UnknownTopicOrPartition], topic: str, partition: int) -> PartitionLog:
    """The handle of a partition the subscription lists; its UnknownTopicOrPartition if it is gone."""
    log = logs[(topic, partition)]
    if isinstance(log, UnknownTopicOrPartition):
        raise log
    return log


def _scan(log: PartitionLog, isolation_level: str, start: int, end: int) -> PartitionScan:
    """A batch read's plan of [start, end) of `log`, on its snapshot in hand (which holds `end`)."""
    aborted = tuple(log.aborted_transactions(start, end)) if isolation_level == READ_COMMITTED else ()
    return PartitionScan(
        topic=log.topic,
        partition=log.partition,
        isolation_level=isolation_level,
        start_offset=start,
        end_offset=end,
        high_watermark=log.high_watermark(),
        last_stable_offset=log.last_stable_offset(),
        snapshot=pin(log.table, (LOG_END_OFFSET_APP_ID,)),
        aborted=aborted,
    )


def _rate_limited(begin: Offsets, end: Offsets, limit: int) -> Offsets:
    """`end` moved back so that at most `limit` offsets are read, shared in proportion to each partition's lag."""
    lags = {(topic, key): end[topic][key] - begin[topic][key] for topic in end for key in end[topic]}
    total = sum(lags.values())
    if total <= limit:
        return end
    shares = {tp: lag * limit // total for tp, lag in lags.items()}
    # What the rounding down left over goes to the largest lags first, so the batch reads `limit` offsets.
    for tp in sorted(lags, key=lambda tp: (-(lags[tp] * limit % total), tp))[: limit - sum(shares.values())]:
        shares[tp] += 1
    return {topic: {key: begin[topic][key] + shares[(topic, key)] for key in end[topic]} for topic in end}


def _offsets_json(text: str) -> Mapping[str, Mapping[str, int]] | None:
    if text in ("earliest", "latest"):
        return None
    value = json.loads(text)
    return {topic: {str(key): offset for key, offset in partitions.items()} for topic, partitions in value.items()}


__all__ = ["Offsets", "StreamPartition", "TopicStreamReader"]
