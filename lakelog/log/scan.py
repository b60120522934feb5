"""Batch reads of whole topics: a scan plan resolved once, then read anywhere (S5.2, S5.4).

`plan_scan` resolves, for every partition of a topic, the snapshot to read and
the offsets [start, end) to read from it, as Spark's Kafka source resolves its
`startingOffsets` / `endingOffsets`: `end` is cut at the LSO in
`read_committed` and at the high watermark in `read_uncommitted`, so a plan
never reads past what its isolation level may see. Each `PartitionScan` carries
its partition's snapshot pinned (files and LEO), so it can be shipped to
another process (a Spark executor) and read there exactly as planned, even
while writers go on.

Partitions are planned side by side (threads: on S3 each waits on a few small
reads), and the LSO and the aborted transactions come from the partition's
transaction index kept between the plans of the process
(lakelog.log.scan_state), so a plan folds only the rows appended since the
last one, not the whole partition's headers. The partition handles are kept
too (lakelog.log.plan_handles): a plan made again refreshes each partition (a
GET of the next commit and one of the one in hand when nothing is new) instead of opening it cold.

`PartitionScan.read` reads through `PartitionLog.fetch` on the pinned snapshot:
the LSO, the aborted-transaction index and the row filter are the log's own,
not a second implementation. Control rows are never returned (they only take
offsets), at either isolation level, as the Consumer and Spark's Kafka source
do. The aborted transactions of the range (`PartitionScan.aborted`) are listed
too, for readers that filter the files themselves (Spark's Parquet reader).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lakelog.errors import InvalidRequest, OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.log import plan_handles
from lakelog.log.fetch import ISOLATION_LEVELS, READ_COMMITTED
from lakelog.log.partition import LOG_END_OFFSET_APP_ID, PartitionLog
from lakelog.log.partition_file import PartitionFile, partition_files
from lakelog.log.records import HEADER_TYPE
from lakelog.log.scan_state import transaction_state
from lakelog.log.topic_config import TopicConfig
from lakelog.log.topics import open_partition, partition_path
from lakelog.log.transactions import AbortedTransaction
from lakelog.store import Location, PinnedSnapshot
from lakelog.store.delta.pinned import pin

logger = logging.getLogger(__name__)

# Spark's Kafka source (and Kafka's ListOffsets) spell "earliest" and "latest" as -2 and -1.
EARLIEST = -2
LATEST = -1
# Partitions planned at once: each waits on the store for a few small reads.
PLAN_THREADS = 8
# How much a scan reads per fetch: bounds a reader's memory, whatever the partition's size.
READ_BYTES = 64 << 20

OffsetSpec = int | Mapping[int, int]
# Kafka's TimestampType of a record: lakelog stamps the producer's time, or the append time if it gave none.
TIMESTAMP_TYPE_CREATE_TIME = 0

# What a batch read returns: the columns of Spark's Kafka source, in its order.
KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", HEADER_TYPE),
    ]
)


def kafka_rows(topic: str, partition: int, rows: pa.Table) -> pa.Table:
    """Partition rows (data rows only) in the Kafka source's columns (KAFKA_SCHEMA)."""
    count = rows.num_rows
    return pa.Table.from_arrays(
        [
            rows.column("key"),
            rows.column("value"),
            pa.array([topic], pa.string()).take(pa.array(np.zeros(count, dtype=np.int32))),
            pa.array(np.full(count, partition, dtype=np.int32)),
            rows.column("offset"),
            rows.column("timestamp"),
            pa.array(np.full(count, TIMESTAMP_TYPE_CREATE_TIME, dtype=np.int32)),
            rows.column("headers"),
        ],
        schema=KAFKA_SCHEMA,
    )


@dataclass(frozen=True)
class PartitionScan:
    """What to read of one partition: offsets [start_offset, end_offset) of a pinned snapshot.

    `aborted` lists the aborted transactions meeting the range (read_committed;
    empty otherwise); `files` the snapshot's data files holding offsets of it.
    """

    topic: str
    partition: int
    isolation_level: str
    start_offset: int
    end_offset: int
    high_watermark: int
    last_stable_offset: int
    snapshot: PinnedSnapshot
    aborted: tuple[AbortedTransaction, ...]

    @property
    def files(self) -> list[PartitionFile]:
        return [
            entry
            for entry in partition_files(self.snapshot)
            if entry.max_offset >= self.start_offset and entry.min_offset < self.end_offset
        ]

    @property
    def size_bytes(self) -> int:
        return sum(entry.size_bytes for entry in self.files)

    def split(self, max_bytes: int) -> list[PartitionScan]:
        """This scan cut at file boundaries into scans of about `max_bytes` of files each, in offset order."""
        pieces: list[PartitionScan] = []
        start, size = self.start_offset, 0
        for entry in self.files:
            size += entry.size_bytes
            cut = min(entry.max_offset + 1, self.end_offset)
            if size >= max_bytes and cut < self.end_offset:
                pieces.append(replace(self, start_offset=start, end_offset=cut))
                start, size = cut, 0
        pieces.append(replace(self, start_offset=start))
        return pieces

    def read(self, max_bytes: int = READ_BYTES) -> Iterator[pa.Table]:
        """The data rows of the range in offset order, as PartitionLog.fetch returns them, in chunks."""
        log = PartitionLog(
            self.snapshot, self.topic, self.partition, TopicConfig.from_table_configuration(self.snapshot.configuration)
        )
        # The plan's own LSO cut and aborted list: reading a range never folds the partition's headers.
        aborted = self.aborted if self.isolation_level == READ_COMMITTED else None
        offset = self.start_offset
        while offset < self.end_offset:
            fetched = log.fetch_planned(offset, self.end_offset, max_bytes, aborted)
            rows = fetched.rows
            if rows.num_rows and rows.column("control").null_count < rows.num_rows:
                rows = rows.filter(rows.column("control").is_null())
            if rows.num_rows:
                yield rows
            offset = fetched.next_offset

    def read_kafka_rows(self, max_bytes: int = READ_BYTES) -> Iterator[pa.Table]:
        """`read`, in the Kafka source's columns (KAFKA_SCHEMA)."""
        for rows in self.read(max_bytes):
            yield kafka_rows(self.topic, self.partition, rows)


def plan_scan(
    root: str | Location,
    topic: str,
    isolation_level: str = READ_COMMITTED,
    starting_offsets: OffsetSpec = EARLIEST,
    ending_offsets: OffsetSpec = LATEST,
) -> list[PartitionScan]:
    """Resolve a batch read of every partition of `topic`, in partition order.

    Offsets are EARLIEST, LATEST, or a mapping of every partition to an offset
    (or EARLIEST/LATEST), as Spark's Kafka source takes them; LATEST is the LSO
    in read_committed and the high watermark in read_uncommitted, and an ending
    offset past it is cut to it. Raises UnknownTopicOrPartition for an unknown
    topic or a mapping that does not name exactly its partitions,
    OffsetOutOfRange for an offset outside the log or a start after its end.
    """
    if isolation_level not in ISOLATION_LEVELS:
        raise InvalidRequest(f"isolation level must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation_level!r}")
    root = Location.of(root)
    # UnknownTopicOrPartition for a topic that does not exist. Handles are kept between plans (plan_handles).
    first = _take(root, topic, 0)
    num_partitions = first.config.num_partitions
    starts = _per_partition("startingOffsets", topic, starting_offsets, num_partitions)
    ends = _per_partition("endingOffsets", topic, ending_offsets, num_partitions)
    if LATEST in starts.values():
        raise OffsetOutOfRange(f"startingOffsets for {topic}: latest (-1) is not allowed in a batch read")
    if EARLIEST in ends.values():
        raise OffsetOutOfRange(f"endingOffsets for {topic}: earliest (-2) is not allowed in a batch read")

    def plan(partition: int) -> PartitionScan:
        # A handle taken holds the latest snapshot (a kept one is refreshed): no refresh before planning on it.
        log = first if partition == 0 else _take(root, topic, partition)
        scan = _plan_partition(log, isolation_level, starts[partition], ends[partition])
        plan_handles.give_back(partition_path(root, topic, partition), log)
        return scan

    if num_partitions == 1:
        return [plan(0)]
    # Each partition's plan is a few small reads (its log, the rows its index has not folded yet): on S3 they wait
    # on the store, so partitions are planned side by side. `map` gives them (and the first error) in partition order.
    with ThreadPoolExecutor(min(num_partitions, PLAN_THREADS), thread_name_prefix="lakelog-plan") as pool:
        return list(pool.map(plan, range(num_partitions)))


def _take(root: Location, topic: str, partition: int) -> PartitionLog:
    return plan_handles.take(partition_path(root, topic, partition), lambda: open_partition(root, topic, partition))


def _plan_partition(log: PartitionLog, isolation_level: str, start: int, end: int) -> PartitionScan:
    # First: the state may reload the snapshot (a file removed under it); every offset below is of the one it leaves.
    stable, every_aborted = transaction_state(log)
    high_watermark = log.high_watermark()
    limit = stable if isolation_level == READ_COMMITTED else high_watermark
    log_start = log.log_start_offset()
    start = log_start if start == EARLIEST else start
    where = f"{log.topic}-{log.partition}"
    if not log_start <= start <= high_watermark:
        raise OffsetOutOfRange(
            f"{where}: starting offset {start} is outside [{log_start}, {high_watermark}]",
            log_start_offset=log_start,
            log_end_offset=high_watermark,
        )
    if end != LATEST and end < start:
        raise OffsetOutOfRange(f"{where}: ending offset {end} is before the starting offset {start}")
    # Cut at what the isolation level may see; a start past the LSO reads nothing yet, as a consumer's would.
    end = max(start, limit if end == LATEST else min(end, limit))
    # S5.3: the aborted transactions whose [first offset, marker offset] meets [start, end), as the index lists them.
    aborted = (
        tuple(txn for txn in every_aborted if txn.marker_offset >= start and txn.first_offset < end)
        if isolation_level == READ_COMMITTED and end > start
        else ()
    )
    return PartitionScan(
        topic=log.topic,
        partition=log.partition,
        isolation_level=isolation_level,
        start_offset=start,
        end_offset=end,
        high_watermark=high_watermark,
        last_stable_offset=stable,
        snapshot=pin(log.table, (LOG_END_OFFSET_APP_ID,)),
        aborted=aborted,
    )


def _per_partition(name: str, topic: str, spec: OffsetSpec, num_partitions: int) -> dict[int, int]:
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec not in (EARLIEST, LATEST):
            raise OffsetOutOfRange(f"{name} must be earliest (-2), latest (-1) or one offset per partition, not {spec}")
        return dict.fromkeys(range(num_partitions), spec)
    if not isinstance(spec, Mapping):
        raise InvalidRequest(f"{name} must be earliest, latest or a mapping of partitions to offsets, not {spec!r}")
    offsets = {}
    for partition, offset in spec.items():
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise UnknownTopicOrPartition(f"{name} for {topic}: partition {partition!r} is not an integer", topic=topic)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
            raise OffsetOutOfRange(f"{name} for {topic}-{partition}: {offset!r} is not an offset, -1 or -2")
        offsets[partition] = offset
    if set(offsets) != set(range(num_partitions)):
        raise UnknownTopicOrPartition(
            f"{name} must give an offset for every partition of {topic} (0-{num_partitions - 1}), "
            f"got {sorted(offsets)}; use -2 for earliest and -1 for latest",
            topic=topic,
        )
    return offsets


def parse_offsets_json(name: str, text: str, topics: list[str]) -> dict[str, OffsetSpec]:
    """Spark's Kafka-source offsets option: "earliest", "latest" or {"topic": {"0": 23, "1": -2}}, per topic."""
    if not isinstance(text, str):
        raise InvalidRequest(f"{name} must be a string, not {type(text).__name__}")
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return dict.fromkeys(topics, EARLIEST if word == "earliest" else LATEST)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidRequest(
            f'{name} is neither "earliest", "latest" nor JSON like {{"topic": {{"0": 23, "1": -2}}}}: '
            f"{error.msg} at character {error.pos}"
        ) from None
    if not isinstance(value, dict):
        raise InvalidRequest(f'{name} must be a JSON object like {{"topic": {{"0": 23}}}}, not {text!r}')
    unknown = sorted(set(value) - set(topics))
    if unknown:
        raise UnknownTopicOrPartition(f"{name} names topic(s) {unknown} that this read does not read ({topics})")
    specs: dict[str, OffsetSpec] = {}
    for topic in topics:
        if topic not in value:
            raise UnknownTopicOrPartition(f"{name} must give offsets for topic {topic}", topic=topic)
        partitions = value[topic]
        if not isinstance(partitions, dict):
            raise InvalidRequest(f'{name} for {topic} must be an object of partition -> offset, like {{"0": 23}}')
        parsed = {}
        for key, offset in partitions.items():
            try:
                parsed[int(key)] = offset
            except ValueError:
                raise UnknownTopicOrPartition(f"{name} for {topic}: {key!r} is not a partition number", topic=topic) from None
        specs[topic] = parsed
    return specs


__all__ = ["EARLIEST", "KAFKA_SCHEMA", "LATEST", "PartitionScan", "kafka_rows", "parse_offsets_json", "plan_scan"]
