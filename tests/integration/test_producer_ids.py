"""`__producer_ids` stays bounded: the counter is committed alone, the table is opened once per process, its log cleaned.

Allocation is O(1) in the ids ever allocated (issue 11): no row and no data file per id, a checkpoint
every 20 commits and the log cleaned behind the two latest. A table written with one row per id keeps
working: the counter continues, the old files leave the snapshot.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from lakelog.log import allocate_producer_id, producer_ids
from lakelog.store import Location, Table, check_root

pytestmark = pytest.mark.roots("local", "s3")


def ids_table(root: str) -> Table:
    return Table.open(check_root(root) / producer_ids.PRODUCER_IDS_DIR)


def log_files(table: Table) -> list[str]:
    return [entry.name for entry in (Location.of(table.uri) / "_delta_log").list() if not entry.is_dir]


def test_S4_1_ids_are_consecutive_with_no_file_and_a_bounded_log(root):
    count = 5 * producer_ids.CHECKPOINT_INTERVAL
    assert [allocate_producer_id(root, "c") for _ in range(count)] == list(range(count))
    table = ids_table(root)
    assert table.data_files() == []
    assert table.app_version(producer_ids.NEXT_ID_APP_ID) == count
    commits = [name for name in log_files(table) if name.endswith(".json")]
    # Two checkpoint intervals behind the latest checkpoint at most, whatever the count.
    assert len(commits) <= 3 * producer_ids.CHECKPOINT_INTERVAL, commits
    assert "00000000000000000000.json" not in commits


def test_a_table_with_one_row_per_id_keeps_counting_and_drops_its_files(root):
    table, _ = Table.create(check_root(root) / producer_ids.PRODUCER_IDS_DIR, producer_ids.SCHEMA, {})
    for producer_id in range(3):
        row = pa.table(
            {
                "producer_id": pa.array([producer_id], pa.int64()),
                "client_id": pa.array(["old"], pa.string()),
                "allocated_at": pa.array([time.time_ns() // 1000], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            },
            schema=producer_ids.SCHEMA,
        )
        table.append(row, app_versions={producer_ids.NEXT_ID_APP_ID: producer_id + 1})
    assert [allocate_producer_id(root) for _ in range(2)] == [3, 4]
    assert ids_table(root).data_files() == []
