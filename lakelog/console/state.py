"""What the console's pages show, gathered through the client layer's Admin API (never the store itself).

Each function reads the root once per call and returns plain values the templates render; nothing is kept
between calls (a console is a view of the tables, no state of its own). A read of one partition's offsets is a
refreshed handle's few requests; a page never reads records it does not show, except a group's lag, which
counts records (lakelog.client.admin.browse.records_lag, bounded per partition).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lakelog.client import AdminClient
from lakelog.client.admin import browse, timeline
from lakelog.client.admin import groups as group_admin
from lakelog.client.admin import transactions as transaction_admin
from lakelog.client.admin.browse import READ_COMMITTED, READ_UNCOMMITTED
from lakelog.client.roots import Location, topic_names
from lakelog.client.types import PartitionDescription, TopicDescription
from lakelog.errors import KafkaException

logger = logging.getLogger(__name__)

Root = str | Location

# Topic config keys a topic page shows first (retention and compaction); the rest follow in name order.
TOPIC_KEYS = ("cleanup.policy", "retention.ms", "retention.bytes", "delete.retention.ms", "segment.files", "compression.type")
ONGOING = "Ongoing"
# The overview's chart of commits: one bar per minute over this many minutes.
HISTORY_MINUTES = 60
# A topic's chart of commits: at most this many bars over its history.
HISTORY_BARS = 60
MINUTE_MS = 60_000
# A sweep older than this is flagged: the broker's timers (transaction and session timeouts) wait for the next one.
SWEEP_STALE_MS = 10 * MINUTE_MS


@dataclass
class Warning_:
    kind: str
    text: str
    link: str


@dataclass
class TopicRow:
    name: str
    partitions: int
    offsets: int
    files: int
    open_partitions: int
    internal: bool


@dataclass
class Overview:
    topics: list[TopicRow]
    transactions: int
    open_transactions: int
    groups: int
    warnings: list[Warning_] = field(default_factory=list)
    # Commits (data files written) per minute over the last HISTORY_MINUTES, oldest first, of every topic.
    commits_per_minute: list[int] = field(default_factory=list)
    last_sweep: timeline.SweepRow | None = None


@dataclass
class History:
    """A topic's history from its files in hand (lakelog.client.admin.timeline)."""

    offsets: list[tuple[int, int]]
    bucket_minutes: int
    commits: list[int]
    bucket_labels: list[str]


@dataclass
class TransactionRow:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    start_ms: int
    timeout_ms: int
    partitions: list[tuple[str, int]]
    hanging: bool
    held_back: int


@dataclass
class HangingRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_stable_offset: int
    reason: str
    needs_admin_abort: bool
    held_back: int


@dataclass
class GroupPartition:
    topic: str
    partition: int
    committed: int | None
    pending: int | None
    high_watermark: int
    last_stable_offset: int
    member_id: str | None
    lag_committed: browse.RecordsLag | None
    lag_uncommitted: browse.RecordsLag | None
    offset_lag: int | None


@dataclass
class GroupView:
    group_id: str
    state: str
    group_epoch: int
    target_epoch: int
    assignor: str
    members: list[Any]
    partitions: list[GroupPartition]
    # (time, the group's offset lag then) at each of its offset commits still in its log.
    lag_over_time: list[tuple[int, int]] = field(default_factory=list)


def admin(root: Root) -> AdminClient:
    return AdminClient({"lakelog.root": root})


def describe_topics(root: Root, names: list[str] | None = None) -> list[TopicDescription]:
    names = topic_names(root) if names is None else names
    if not names:
        return []
    futures = admin(root).describe_topics(names)
    found = []
    for name in names:
        try:
            found.append(futures[name].result())
        except KafkaException as error:  # deleted between the listing and the read: left out, and said
            logger.info("console: topic %s is not described (%s)", name, error)
    return found


def described_with_writes(
    root: Root, names: list[str] | None = None
) -> list[tuple[TopicDescription, dict[int, list[timeline.Written]]]]:
    """Each topic's description and its partitions' commits, read in one refresh (deleted ones left out)."""
    found = []
    for name in topic_names(root) if names is None else names:
        try:
            found.append(timeline.topic_writes(root, name))
        except KafkaException as error:  # deleted between the listing and the read: left out, and said
            logger.info("console: topic %s is not described (%s)", name, error)
    return found


def history(writes: dict[int, list[timeline.Written]], now_ms: int) -> History:
    """Offsets written over time, and commits per bucket from the first commit in hand to now."""
    times = [write.time_ms for each in writes.values() for write in each]
    first = min(times, default=now_ms)
    span_minutes = max(1, -(-(now_ms - first) // MINUTE_MS))
    bucket = max(1, -(-span_minutes // HISTORY_BARS))
    bars = -(-span_minutes // bucket)
    start = now_ms - bars * bucket * MINUTE_MS
    commits = timeline.commits_per_bucket(times, start, now_ms + 1, bars)
    labels = [time.strftime("%m-%d %H:%M", time.gmtime((start + index * bucket * MINUTE_MS) / 1000)) for index in range(bars)]
    return History(timeline.offsets_over_time(writes), bucket, commits, labels)


def overview(root: Root, now_ms: int) -> Overview:
    read = described_with_writes(root)
    topics = [description for description, _ in read]
    rows = [
        TopicRow(
            t.name,
            len(t.partitions),
            sum(p.high_watermark - p.log_start_offset for p in t.partitions),
            sum(p.files for p in t.partitions),
            sum(1 for p in t.partitions if p.last_stable_offset < p.high_watermark),
            t.is_internal,
        )
        for t in topics
    ]
    listings = transaction_admin.list_transactions(root)
    groups = group_admin.list_groups(root)
    view = Overview(rows, len(listings), sum(1 for t in listings if str(t.state) == ONGOING), len(groups))
    times = [write.time_ms for _, writes in read for each in writes.values() for write in each]
    start = now_ms - HISTORY_MINUTES * MINUTE_MS
    view.commits_per_minute = timeline.commits_per_bucket(times, start + 1, now_ms + 1, HISTORY_MINUTES)
    view.last_sweep = timeline.last_sweep(root)
    if view.last_sweep is None:
        view.warnings.append(
            Warning_(
                "no sweep",
                "no sweep has run: timed-out transactions and members stay until `lakelog coordinator sweep` runs",
                "/transactions",
            )
        )
    elif now_ms - view.last_sweep.finished_ms > SWEEP_STALE_MS:
        minutes = (now_ms - view.last_sweep.finished_ms) // MINUTE_MS
        view.warnings.append(
            Warning_(
                "sweep overdue",
                f"the last sweep ended {minutes} minutes ago: timed-out transactions and members wait for the next",
                "/transactions",
            )
        )
    memo = _Topics(root)
    memo.read.update((t.name, t) for t in topics)
    for hanging in hanging_transactions(root, now_ms, memo):
        view.warnings.append(
            Warning_(
                "hanging transaction",
                f"{hanging.topic}-{hanging.partition}: producer {hanging.producer_id} holds the LSO at "
                f"{hanging.last_stable_offset} ({hanging.reason})",
                "/transactions",
            )
        )
    for listing in groups:
        description = group_admin.describe_group(root, listing.group_id)
        if not description.members:
            view.warnings.append(
                Warning_("group with no members", f"group {listing.group_id} has no members", f"/groups/{listing.group_id}")
            )
    return view


def topic(root: Root, name: str, now_ms: int) -> tuple[TopicDescription, list[tuple[str, Any]], History]:
    """The topic's description, its config (retention and compaction first) and its history."""
    description, writes = timeline.topic_writes(root, name)
    config = [(key, description.config[key]) for key in TOPIC_KEYS if key in description.config]
    config += sorted((key, value) for key, value in description.config.items() if key not in TOPIC_KEYS)
    return description, config, history(writes, now_ms)


def producers(root: Root, name: str) -> list[tuple[int, list[Any]]]:
    """Each partition's producer ids with their epoch, last sequence and last write (S3.5)."""
    count = len(admin(root).describe_topics([name])[name].result().partitions)
    return [(partition, transaction_admin.describe_producers(root, name, partition)) for partition in range(count)]


def held_back(partition: PartitionDescription) -> int:
    """Offsets a read_committed reader cannot read yet: HW - LSO."""
    return partition.high_watermark - partition.last_stable_offset


def hanging_transactions(root: Root, now_ms: int, topics: _Topics | None = None) -> list[HangingRow]:
    """Transactions holding a partition's LSO that no live producer will close (find-hanging), and by how much."""
    topics = _Topics(root) if topics is None else topics
    # Only a partition whose LSO is below its high watermark can hold a transaction open: the others are not read.
    holding = [
        (description.name, partition.id)
        for description in topics.every()
        for partition in description.partitions
        if partition.last_stable_offset < partition.high_watermark
    ]
    if not holding:
        return []
    rows = []
    for found in transaction_admin.find_hanging_transactions(root, now_ms=now_ms, partitions=holding):
        described = topics.partition(found.topic, found.partition)
        high_watermark = found.last_stable_offset if described is None else described.high_watermark
        rows.append(
            HangingRow(
                found.topic,
                found.partition,
                found.producer_id,
                found.producer_epoch,
                found.start_offset,
                found.last_stable_offset,
                found.reason,
                found.needs_admin_abort,
                high_watermark - found.last_stable_offset,
            )
        )
    return rows


def transactions(root: Root, now_ms: int) -> tuple[list[TransactionRow], list[HangingRow]]:
    """Every transactional id (open ones first, then by id) and the hanging transactions of the partitions."""
    topics = _Topics(root)
    hanging = hanging_transactions(root, now_ms, topics)
    hanging_producers = {row.producer_id for row in hanging}
    rows = []
    for listing in transaction_admin.list_transactions(root):
        found = transaction_admin.describe_transaction(root, listing.transactional_id)
        if found is None:
            continue
        held = 0
        if str(found.state) == ONGOING:
            held = sum(topics.held_back(*topic_partition) for topic_partition in found.topic_partitions)
        rows.append(
            TransactionRow(
                found.transactional_id,
                found.producer_id,
                found.producer_epoch,
                str(found.state),
                found.transaction_start_time_ms,
                found.transaction_timeout_ms,
                sorted(found.topic_partitions),
                found.producer_id in hanging_producers,
                held,
            )
        )
    rows.sort(key=lambda row: (row.state != ONGOING, not row.hanging, row.transactional_id))
    return rows, hanging


def group(root: Root, group_id: str, now_ms: int | None = None) -> GroupView:
    description = group_admin.describe_group(root, group_id)
    partitions = []
    for row in group_admin.group_offsets(root, group_id):
        gone = row.high_watermark < 0
        partitions.append(
            GroupPartition(
                row.topic,
                row.partition,
                row.committed_offset,
                row.pending_offset,
                row.high_watermark,
                row.last_stable_offset,
                row.member_id,
                None if gone else browse.records_lag(root, row.topic, row.partition, row.committed_offset, READ_COMMITTED),
                None if gone else browse.records_lag(root, row.topic, row.partition, row.committed_offset, READ_UNCOMMITTED),
                row.lag_lso,
            )
        )
    commits = timeline.offset_history(root, group_id)
    writes: dict[tuple[str, int], list[timeline.Written]] = {}
    for description_, by_partition in described_with_writes(root, sorted({commit.topic for commit in commits})):
        writes.update(((description_.name, partition), each) for partition, each in by_partition.items())
    return GroupView(
        group_id,
        str(getattr(description.state, "name", description.state)),
        description.group_epoch,
        description.target_assignment_epoch,
        str(description.partition_assignor),
        list(description.members),
        partitions,
        timeline.lag_over_time(commits, writes, now_ms),
    )


def groups(root: Root) -> Iterator[tuple[Any, Any]]:
    for listing in group_admin.list_groups(root):
        yield listing, group_admin.describe_group(root, listing.group_id)


class _Topics:
    """Topic descriptions read once per page (a page names a topic many times)."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self.read: dict[str, TopicDescription | None] = {}

    def partition(self, topic_name: str, partition: int) -> PartitionDescription | None:
        if topic_name not in self.read:
            found = describe_topics(self.root, [topic_name])
            self.read[topic_name] = found[0] if found else None
        description = self.read[topic_name]
        if description is None or partition >= len(description.partitions):
            return None
        return description.partitions[partition]

    def every(self) -> list[TopicDescription]:
        """Every topic of the root, described (those read already are not read again)."""
        missing = [name for name in topic_names(self.root) if name not in self.read]
        for description in describe_topics(self.root, missing) if missing else []:
            self.read[description.name] = description
        return [description for description in self.read.values() if description is not None]

    def held_back(self, topic_name: str, partition: int) -> int:
        found = self.partition(topic_name, partition)
        return 0 if found is None else held_back(found)


@dataclass
class QualityRow:
    validated_at: str
    topic: str
    suite: str
    mode: str
    success: bool
    rows: int
    unit: str
    outcome: str
    failures: list[str]


def quality(root: Root, limit: int = 50) -> tuple[list[tuple[str, Any]], list[QualityRow]]:
    """Each topic's suite (None: not gated) and the latest validation results with their failing expectations."""
    import json

    from lakelog.quality.results import outcome, read_results
    from lakelog.quality.suites import read_suite

    suites = [(name, read_suite(root, name)) for name in topic_names(root) if not name.startswith("__")]
    results = []
    for row in read_results(root, limit=limit).to_pylist():
        failures = []
        for failure in json.loads(row["failed_expectations"] or "[]"):
            column = f" {failure['column']}" if failure.get("column") else ""
            if failure.get("error"):
                detail = f"error: {failure['error']}"
            elif failure.get("unexpected_count") is not None:
                detail = f"{failure['unexpected_count']} unexpected, e.g. {failure.get('unexpected_values')}"
            else:
                detail = f"observed {failure.get('observed_value')}"
            failures.append(f"{failure['type']}{column}: {detail}")
        results.append(
            QualityRow(
                row["validated_at"].strftime("%Y-%m-%d %H:%M:%S UTC"),
                row["topic"],
                row["suite_name"],
                row["mode"],
                bool(row["success"]),
                row["row_count"],
                row["transactional_id"] or row["load_unit"] or "-",
                outcome(root, row),
                failures,
            )
        )
    return suites, results
