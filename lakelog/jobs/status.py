"""The status table of a topic, `<root>/status/<topic>`: HW, LSO, open transactions and aborted ranges of each partition.

Each partition's status is computed with the partition log's own code (S5.1,
S5.3): the transaction index, brought up to date from its newest snapshot, so a
run reads only what was appended since. It is incremental twice over: a
partition whose table version is the one the status table already shows is not
read at all, and the status table changes only if some partition did. The
status table (one row per partition, catalog.STATUS_SCHEMA) is replaced by one
strict Delta commit decided on the snapshot it was read from; a run that loses
that race to another run waits through the one retry policy
(lakelog.store.io.retry) and decides again on the new snapshot; past the deadline
it gives up with KafkaTimeout.

This module is the job without its engine: `refresh_status` hands the
per-partition computations (`status_of`, one task per partition) to a `MapTasks`
(the Spark application pipelines/partition_status.py runs them as Spark tasks).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from lakelog import catalog
from lakelog.client.retry import DEFAULT_POLICY, Backoff
from lakelog.client.roots import partition_count
from lakelog.errors import CommitConflict
from lakelog.log import open_partition
from lakelog.store import Location, Table, open_root
from lakelog.store.delta.lost_race import after_lost_race

logger = logging.getLogger(__name__)

# How long a run keeps deciding again after lost commit races (Kafka's delivery.timeout.ms default).
COMMIT_TIMEOUT_S = 120.0

# One partition's computation: (root, topic, partition, the table version the status table shows, or None).
StatusTask = tuple[Location, str, int, int | None]
StatusRow = dict[str, Any]
# Runs `status_of` on every task, anywhere (in Spark tasks, in this process), and returns the results in order.
MapTasks = Callable[[Callable[[StatusTask], StatusRow | None], list[StatusTask]], list[StatusRow | None]]


@dataclass(frozen=True)
class StatusReport:
    """What a run did: the status table version it left (None if nothing changed), partitions recomputed."""

    version: int | None
    partitions: int
    recomputed: list[int]


def refresh_status(root: str | Location, topic: str, map_tasks: MapTasks, *, backoff: Backoff | None = None) -> StatusReport:
    """Bring `<root>/status/<topic>` up to date with every partition of `topic`; see the module docstring.

    Lost commit races wait on `backoff` (default: the retry policy's defaults, COMMIT_TIMEOUT_S);
    KafkaTimeout once its deadline has passed.
    """
    # Tasks get the root as a Location: its store settings travel with it to wherever they run.
    root = open_root(root)  # UnresolvedRoot if it is no root
    num_partitions = partition_count(root, topic)
    table, _ = Table.open_or_create(catalog.status_path(root, topic), catalog.STATUS_SCHEMA, {})
    backoff = DEFAULT_POLICY.start(COMMIT_TIMEOUT_S) if backoff is None else backoff
    while True:
        table.refresh()
        shown = {row["partition"]: row for row in _rows(table)}
        tasks: list[StatusTask] = [
            (root, topic, partition, _version(shown.get(partition))) for partition in range(num_partitions)
        ]
        computed = map_tasks(status_of, tasks)
        changed = {row["partition"]: row for row in computed if row is not None}
        if not changed:
            return StatusReport(None, num_partitions, [])
        rows = [changed.get(partition) or shown[partition] for partition in range(num_partitions)]
        name = f"status-{uuid.uuid4().hex}.parquet"
        table.io.write_parquet(pa.Table.from_pylist(rows, schema=catalog.STATUS_SCHEMA), table.child_uri(name))
        try:
            version = table.commit_files([name], catalog.STATUS_SCHEMA, overwrite=True)
        except CommitConflict:
            table.io.delete(table.child_uri(name))
            after_lost_race(backoff, f"status of {topic}", logger)
            continue
        return StatusReport(version, num_partitions, sorted(changed))


def status_of(task: StatusTask) -> StatusRow | None:
    """One partition's status row, or None if its table is still at `known_version` (runs in a task)."""
    root, topic, partition, known_version = task
    log = open_partition(root, topic, partition)
    if log.version == known_version:
        return None
    high_watermark = log.high_watermark()
    return {
        "topic": topic,
        "partition": partition,
        "table_version": log.version,
        "log_start_offset": log.log_start_offset(),
        "high_watermark": high_watermark,
        "last_stable_offset": log.last_stable_offset(),
        "open_transactions": [
            {"producer_id": producer_id, "first_offset": first}
            for producer_id, first in sorted(log.open_transactions().items(), key=lambda item: item[1])
        ],
        "aborted_transactions": [
            {"producer_id": txn.producer_id, "first_offset": txn.first_offset, "marker_offset": txn.marker_offset}
            for txn in log.aborted_transactions(0, high_watermark)
        ],
        "updated_at": datetime.now(UTC),
    }


def _rows(table: Table) -> list[StatusRow]:
    entries = table.data_files()
    if not entries:
        return []
    return pa.concat_tables(table.read_data_file(entry).cast(catalog.STATUS_SCHEMA) for entry in entries).to_pylist()


def _version(row: StatusRow | None) -> int | None:
    return None if row is None else row["table_version"]
