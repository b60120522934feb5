"""Table.rewrite: removes and new files as exactly the next version, the store's commit for retention and key compaction.

Retention (S9.1) removes whole files and records the log start as a txn id; key compaction (S9.3) replaces
files with one that keeps the last record per key and still claims the whole offset range it replaces, so
the log's contiguity and its start stay right. A lost race leaves the table as it was (S8.3).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import table_fingerprint

from lakelog.errors import CommitConflict
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.partition_file import PARTITION_ORDER, partition_files
from lakelog.store import Table
from lakelog.store.delta.file_stats import file_statistics
from lakelog.store.upkeep.maintenance import compact

pytestmark = pytest.mark.roots("local", "s3")


@pytest.fixture
def partition(root):
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    for batch in range(4):
        log.append(payload_table([f"v{batch}-{i}".encode() for i in range(3)], keys=[b"a", b"b", f"k{batch}".encode()]))
    return log


def test_S9_1_S9_3_a_rewrite_removes_and_adds_files_as_the_next_version_and_a_new_file_claims_its_range(partition):
    table = partition.table
    before = table.version
    first, second, *rest = partition_files(table)
    rows = pa.concat_tables([table.read_file(first), table.read_file(second)])
    # Key compaction keeps the last record per key: offsets 0 and 1 are overwritten by 3 and 4 (keys a, b).
    kept = rows.filter(pc.is_in(rows.column("offset"), pa.array([2, 3, 4, 5], pa.int64())))
    version = table.rewrite(
        [first, second],
        [(kept, {"offset": (first.min_offset, second.max_offset)})],
        app_versions={"lakelog.test": 7},
        metadata={"lakelog.operation": "test"},
    )
    assert version == before + 1 == table.version
    assert table.app_version("lakelog.test") == 7
    files = partition_files(table)
    assert [(entry.min_offset, entry.max_offset, entry.num_records) for entry in files] == [(0, 5, 4), (6, 8, 3), (9, 11, 3)]
    assert table.read_file(files[0]).column("offset").to_pylist() == [2, 3, 4, 5]
    assert table.history(1)[0]["lakelog.operation"] == "test"


def test_S9_1_a_rewrite_of_removes_only_commits_and_records_its_app_versions(partition):
    table = partition.table
    first = partition_files(table)[0]
    table.rewrite([first], app_versions={"lakelog.log_start_offset": first.max_offset + 1})
    assert partition_files(table)[0].min_offset == first.max_offset + 1
    assert table.app_version("lakelog.log_start_offset") == 3


def test_a_rewrite_of_app_versions_alone_commits_no_file(partition):
    table = partition.table
    files = partition_files(table)
    for counter in (1, 2, 3):
        assert table.rewrite(app_versions={"lakelog.counter": counter}) == table.version
    assert table.app_version("lakelog.counter") == 3
    assert partition_files(table) == files
    with pytest.raises(ValueError):
        table.rewrite()


def test_S8_3_a_rewrite_that_loses_its_race_deletes_its_new_file_and_leaves_the_table_as_it_was(partition):
    table = partition.table
    other = Table.open(table.location)
    first = partition_files(table)[0]
    partition.append(payload_table([b"x"]))
    fingerprint = table_fingerprint(table.uri)
    with pytest.raises(CommitConflict) as refused:
        other.rewrite([first], [(other.read_file(first).slice(2), {"offset": (first.min_offset, first.max_offset)})])
    assert refused.value.decided_on == table.version - 1
    assert table_fingerprint(table.uri) == fingerprint
    assert other.version == table.version


def test_S9_3_statistics_claim_the_given_range_and_a_merge_keeps_the_range_of_its_sources(partition):
    table = partition.table
    rows = table.read_file(partition_files(table)[0]).slice(2)
    stats = json.loads(file_statistics(rows, {"offset": (0, 2)}))
    assert (stats["minValues"]["offset"], stats["maxValues"]["offset"], stats["numRecords"]) == (0, 2, 1)
    assert json.loads(file_statistics(rows))["minValues"]["offset"] == 2
    with pytest.raises(ValueError):
        file_statistics(rows, {"offset": (3, 5)})
    # Two key-compacted files with gaps at both ends, then a merge of all: the merged file claims 0..11.
    first, second, *_ = partition_files(table)
    table.rewrite([first], [(table.read_file(first).slice(1, 1), {"offset": (0, 2)})])
    table.rewrite([second], [(table.read_file(second).slice(1, 1), {"offset": (3, 5)})])
    assert compact(table, PARTITION_ORDER, fan_in=4) is not None
    (merged,) = partition_files(table)  # PartitionFile's range is the file's statistics
    assert (merged.min_offset, merged.max_offset, merged.num_records) == (0, 11, 8)
