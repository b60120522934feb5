"""What the per-producer `txn` actions alone cost a new producer's first append (issue 11 item 1).

Run: `nice -n 19 ./dev sh python notes/issue_11_state_cost.py` (about half a minute, a temp root).

Two single-partition topics. Each gets one commit carrying the `txn` entries that
K producers leave today (lakelog.producer.<id>.state and .time, as PartitionLog.append
writes them), K = 50 on one and 5,000 on the other, then 60 one-record appends of one
producer so that the latest checkpoint holds those entries and the log has the same
length on both. Then, alternating between the two partitions (same machine load):
a new producer id's first batch, as a short-lived producer makes it (open the
partition, append one record at sequence 0), and one lookup of an absent app id.
No `__producer_ids` allocation is involved: this isolates the partition's state.

Then `__producer_ids`, which gets one row, one data file and one commit per producer
id and is never compacted nor cleaned by lakelog (delta-rs checkpoints it every 100
commits by default and deletes commits only after delta.logRetentionDuration, 30 days):
two roots whose `__producer_ids` holds 50 and 2,000 ids (written by the same commit
allocate_producer_id makes, without its per-call table open), then allocate_producer_id
timed alternately on both.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import pyarrow as pa

from lakelog.log import BatchHeader, allocate_producer_id, create_topic, open_partition, payload_table
from lakelog.log import producer_ids
from lakelog.store import Location, Table, check_root

SEEDED = (50, 5_000)
FILL_APPENDS = 60
SAMPLES = 20
ALLOCATED = (50, 2_000)


def main() -> None:
    root = tempfile.mkdtemp(prefix="lakelog-state-cost-")
    try:
        payload = payload_table([b"v" * 100])
        for count in SEEDED:
            topic = f"seeded-{count}"
            create_topic(root, topic, 1)
            log = open_partition(root, topic, 0)
            entries: dict[str, int] = {}
            for producer_id in range(count):
                # The two ids PartitionLog.append wrote per producer before S9.4 (epoch 0, last sequence 0).
                entries.update({f"lakelog.producer.{producer_id}.state": 1, f"lakelog.producer.{producer_id}.time": 1_700_000_000_000})
            log.append(payload, app_versions=entries)
            filler = 10_000_000 + count
            for sequence in range(FILL_APPENDS):
                log.append(payload, BatchHeader(filler, 0, sequence))
        samples: dict[int, list[float]] = {count: [] for count in SEEDED}
        lookups: dict[int, list[float]] = {count: [] for count in SEEDED}
        for n in range(SAMPLES):
            for count in SEEDED:
                started = time.perf_counter()
                log = open_partition(root, f"seeded-{count}", 0)
                log.append(payload, BatchHeader(20_000_000 + n, 0, 0))
                samples[count].append(time.perf_counter() - started)
                started = time.perf_counter()
                log.table.app_version(f"absent.{n}")
                lookups[count].append(time.perf_counter() - started)
        for count in SEEDED:
            log = open_partition(root, f"seeded-{count}", 0)
            names = [s for s in log.table.io.list(log.table.child_uri("_delta_log")) if s.name.endswith(".checkpoint.parquet")]
            latest = max(names, key=lambda s: s.name)
            print(
                f"{count:>5,} producers' txn entries: new producer's open + first append p50 "
                f"{statistics.median(samples[count]) * 1e3:.1f} ms, app_version(absent id) p50 "
                f"{statistics.median(lookups[count]) * 1e3:.2f} ms, checkpoint {latest.name} {latest.size / 1024:.1f} KiB"
            )
        early, late = (statistics.median(samples[count]) for count in SEEDED)
        print(f"ratio open + first append, {SEEDED[1]:,} / {SEEDED[0]} producers' entries: {late / early:.2f}")
        allocation_cost(root)
    finally:
        location = Location.of(root)
        location.io.delete_tree(location.uri)


def allocation_cost(root: str) -> None:
    roots = {count: f"{root}/ids-{count}" for count in ALLOCATED}
    for count, where in roots.items():
        table, _ = Table.create(check_root(where) / producer_ids.PRODUCER_IDS_DIR, producer_ids.SCHEMA, {})
        for producer_id in range(count):
            row = pa.table(
                {
                    "producer_id": pa.array([producer_id], pa.int64()),
                    "client_id": pa.array(["filler"], pa.string()),
                    "allocated_at": pa.array([time.time_ns() // 1000], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                },
                schema=producer_ids.SCHEMA,
            )
            table.append(row, app_versions={producer_ids.NEXT_ID_APP_ID: producer_id + 1})
    samples: dict[int, list[float]] = {count: [] for count in ALLOCATED}
    for _ in range(SAMPLES):
        for count, where in roots.items():
            started = time.perf_counter()
            allocate_producer_id(where, "probe")
            samples[count].append(time.perf_counter() - started)
    for count, where in roots.items():
        table = Table.open(check_root(where) / producer_ids.PRODUCER_IDS_DIR)
        log_files = table.io.list(table.child_uri("_delta_log"))
        print(
            f"__producer_ids with {count:>5,} ids: allocate_producer_id p50 {statistics.median(samples[count]) * 1e3:.1f} ms; "
            f"{len(table.data_files()):,} active data files, {len(log_files):,} files in _delta_log"
        )
    early, late = (statistics.median(samples[count]) for count in ALLOCATED)
    print(f"ratio allocate_producer_id, {ALLOCATED[1]:,} / {ALLOCATED[0]} ids allocated before: {late / early:.2f}")


if __name__ == "__main__":
    main()
