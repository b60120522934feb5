"""The partition log on real Delta tables: one test per rule of SEMANTICS.md S1 (offsets, batches, the LEO, fetch),
and S8.3 for refused appends."""

from __future__ import annotations

import json

import pytest
from helpers import table_fingerprint
from partition_log_helpers import (
    all_rows,
    batch,
    commit_actions,
    data_files,
    delta_log_entries,
    delta_table,
    drop_commits_up_to_last_checkpoint,
    numbered,
    on_object_store,
    open_partition_fresh,
    refuses,
)

from lakelog.errors import (
    InvalidProducerEpoch,
    OffsetMismatch,
    OffsetOutOfRange,
    OutOfOrderSequence,
    PolicyViolation,
    ProducerFenced,
    UnknownProducerId,
)
from lakelog.log import BatchHeader, ControlType, allocate_producer_id, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.log.records import PARTITION_SCHEMA

pytestmark = pytest.mark.roots("local", "s3", "azure", "gcs", release=("azure", "gcs"))


# -- S1 partition log ------------------------------------------------------------


def test_S1_1_offsets_dense_from_zero_never_reused(root, topic):
    """S1.1: offsets are dense from 0 across many appends, control rows and a reopen; none is reused."""
    name = topic()
    log = open_partition(root, name, 0)
    sizes = [1, 3, 2, 5] if on_object_store(root) else [1, 3, 2, 5, 1, 4, 2, 1, 3, 2]
    expected_base = 0
    for i, size in enumerate(sizes):
        result = log.append(numbered(f"a{i}-", size))
        assert (result.base_offset, result.last_offset) == (expected_base, expected_base + size - 1)
        assert result.duplicate is False
        expected_base += size
    marker = log.append_marker(99, 1, ControlType.COMMIT)
    assert (marker.base_offset, marker.last_offset) == (expected_base, expected_base)
    expected_base += 1

    reopened = open_partition(root, name, 0)
    assert reopened.log_end_offset() == expected_base
    for i, size in enumerate([2, 3]):
        result = reopened.append(numbered(f"b{i}-", size))
        assert result.base_offset == expected_base
        expected_base += size
    # The first handle is stale now; its next append is decided again on the latest snapshot.
    result = log.append(batch(b"late"))
    assert result.base_offset == expected_base
    expected_base += 1

    rows = all_rows(open_partition(root, name, 0))
    assert rows.column("offset").to_pylist() == list(range(expected_base))
    assert rows.column("control").to_pylist().count("COMMIT") == 1
    assert rows.column("control").to_pylist()[sum(sizes)] == "COMMIT"
    # An independent reader of the Delta table agrees: every offset exactly once.
    independent = delta_table(log).to_pyarrow_table().column("offset").to_pylist()
    assert sorted(independent) == list(range(expected_base))


def test_S1_2_batch_is_one_commit_all_rows_or_none(root, topic):
    """S1.2: a batch is one commit (version +1, one file with all rows); a refused batch adds no version, no file."""
    log = open_partition(root, topic(), 0)
    log.append(numbered("first-", 3))
    version = log.version
    files_before = data_files(log)

    result = log.append(numbered("batch-", 5))
    assert result.version == version + 1 == log.version
    new_files = data_files(log) - files_before
    assert len(new_files) == 1
    adds = [action["add"] for action in commit_actions(log, version + 1) if "add" in action]
    assert [add["path"] for add in adds] == list(new_files)
    assert json.loads(adds[0]["stats"])["numRecords"] == 5
    # Visibility: none of the batch at version v, all of it at v+1.
    assert delta_table(log, version).to_pyarrow_table().num_rows == 3
    at_commit = delta_table(log, version + 1).to_pyarrow_table().sort_by("offset")
    assert at_commit.column("offset").to_pylist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert at_commit.column("value").to_pylist()[3:] == [f"batch-{i}".encode() for i in range(5)]

    log_before = delta_log_entries(log)
    refuses(log, OffsetMismatch, numbered("refused-", 4), BatchHeader(expected_offset=0))
    assert delta_log_entries(log) == log_before
    assert data_files(log) == files_before | new_files
    assert all_rows(log).num_rows == 8


def test_S1_3_leo_is_last_offset_plus_one_and_hw_equals_leo(root, topic):
    """S1.3: LEO = last offset + 1, HW = LEO; the same in a new PartitionLog, after checkpoints, and from the checkpoint alone."""
    name = topic({"checkpoint.interval.commits": 5})
    log = open_partition(root, name, 0)
    assert log.log_end_offset() == log.high_watermark() == 0
    result = None
    for i in range(12):
        result = log.append(numbered(f"v{i}-", 2))
        assert log.log_end_offset() == result.last_offset + 1 == 2 * (i + 1)
        assert log.high_watermark() == log.log_end_offset()
    assert result is not None and result.version == 12
    checkpoints = [entry for entry in delta_log_entries(log) if entry.endswith(".checkpoint.parquet")]
    assert len(checkpoints) >= 2

    reopened = open_partition(root, name, 0)
    assert reopened.log_end_offset() == reopened.high_watermark() == 24
    assert reopened.fetch(23).rows.column("offset").to_pylist() == [23]

    # Drop the commits the last checkpoint covers (what log cleanup does): LEO comes from the checkpoint.
    drop_commits_up_to_last_checkpoint(log)
    from_checkpoint = open_partition(root, name, 0)
    assert from_checkpoint.log_end_offset() == from_checkpoint.high_watermark() == 24
    appended = from_checkpoint.append(batch(b"after"))
    assert (appended.base_offset, from_checkpoint.log_end_offset()) == (24, 25)


def test_S1_4_fetch_in_offset_order_from_start_offset(root, topic):
    """S1.4: fetch returns rows in offset order from any start offset, across batch boundaries."""
    log = open_partition(root, topic(), 0)
    values = []
    for i in range(6):
        payload = numbered(f"f{i}-", 3)
        values += payload.column("value").to_pylist()
        log.append(payload)
    for start in (0, 1, 3, 7, 17):
        rows = log.fetch(start, max_records=100).rows
        assert rows.column("offset").to_pylist() == list(range(start, 18))
        assert rows.column("value").to_pylist() == values[start:]
        assert rows.schema.names == PARTITION_SCHEMA.names


def test_S1_4_fetch_record_budget(root, topic):
    """S1.4: max_records bounds the rows returned, exactly, also across files."""
    log = open_partition(root, topic(), 0)
    for i in range(4):
        log.append(numbered(f"r{i}-", 3))
    assert log.fetch(0, max_records=1).rows.column("offset").to_pylist() == [0]
    assert log.fetch(1, max_records=4).rows.column("offset").to_pylist() == [1, 2, 3, 4]
    assert log.fetch(2, max_records=7).rows.column("offset").to_pylist() == list(range(2, 9))
    assert log.fetch(10, max_records=7).rows.column("offset").to_pylist() == [10, 11]


def test_S1_4_fetch_byte_budget_returns_at_least_one_record(root, topic):
    """S1.4: a byte budget smaller than one record still returns the first record (progress), from the start offset."""
    log = open_partition(root, topic(), 0)
    for i in range(3):
        log.append(batch(bytes([i]) * 10_000))
    for start in (0, 1, 2):
        rows = log.fetch(start, max_bytes=1).rows
        assert rows.column("offset").to_pylist() == [start]
        assert rows.column("value").to_pylist() == [bytes([start]) * 10_000]


def test_S1_4_fetch_byte_budget_bounds_result_past_the_first_batch(root, topic):
    """S1.4: past the first batch, a fetch stops before the batch that would exceed max_bytes."""
    log = open_partition(root, topic(), 0)
    for i in range(4):
        log.append(batch(bytes([i]) * 10_000))
    # One record is ~10 KB; a 15 KB budget has room for one, a 25 KB budget for two.
    assert log.fetch(0, max_bytes=15_000).rows.column("offset").to_pylist() == [0]
    assert log.fetch(0, max_bytes=25_000).rows.column("offset").to_pylist() == [0, 1]


def test_S1_4_fetch_out_of_range(root, topic):
    """S1.4: a start beyond LEO or before the log start offset is OffsetOutOfRange; start = LEO is empty."""
    log = open_partition(root, topic(), 0)
    assert log.fetch(0).rows.num_rows == 0
    log.append(numbered("o", 3))
    before = table_fingerprint(log.table.uri)
    empty = log.fetch(3).rows
    assert empty.num_rows == 0 and empty.schema.names == PARTITION_SCHEMA.names
    for start in (4, 1000, -1):
        with pytest.raises(OffsetOutOfRange) as raised:
            log.fetch(start)
        assert (raised.value.log_start_offset, raised.value.log_end_offset) == (0, 3)
    for budget in ({"max_records": 0}, {"max_bytes": 0}):
        with pytest.raises(OffsetOutOfRange):
            log.fetch(0, **budget)
    assert table_fingerprint(log.table.uri) == before


def test_S1_4_fetch_beyond_stale_leo_reloads(root, topic):
    """S1.4: an offset beyond the handle's LEO is only out of range if it is beyond the latest LEO."""
    name = topic()
    reader = open_partition(root, name, 0)
    writer = open_partition(root, name, 0)
    writer.append(numbered("w", 4))
    assert reader.fetch(2).rows.column("offset").to_pylist() == [2, 3]
    with pytest.raises(OffsetOutOfRange):
        reader.fetch(5)


# -- S8.3 every refused request leaves the table as it was -------------------------


REFUSALS = {
    "OffsetMismatch": (OffsetMismatch, BatchHeader(expected_offset=7)),
    "OutOfOrderSequence": (OutOfOrderSequence, BatchHeader(producer_id=1, producer_epoch=1, base_sequence=9)),
    "InvalidProducerEpoch": (InvalidProducerEpoch, BatchHeader(producer_id=1, producer_epoch=0, base_sequence=2)),
    "ProducerFenced": (ProducerFenced, BatchHeader(producer_id=1, producer_epoch=0, base_sequence=2, is_transactional=True)),
    "UnknownProducerId": (UnknownProducerId, BatchHeader(producer_id=2, producer_epoch=0, base_sequence=1)),
}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_S8_3_refused_append_leaves_table_unchanged(root, topic, kind):
    """S8.3: each refusal of the log layer leaves every file of the table byte-for-byte as it was."""
    error, header = REFUSALS[kind]
    log = open_partition(root, topic(), 0)
    log.append(numbered("a", 2), BatchHeader(producer_id=1, producer_epoch=1, base_sequence=0))
    refuses(log, error, numbered("refused", 3), header)
    assert all_rows(log).column("value").to_pylist() == [b"a0", b"a1"]


def test_S8_3_policy_violation_leaves_table_unchanged(root, topic):
    log = open_partition(root, topic({"check.expected.offsets": True}), 0)
    log.append(batch(b"a"), BatchHeader(expected_offset=0))
    refuses(log, PolicyViolation, batch(b"refused"))
    refuses(log, PolicyViolation, payload_table([]), BatchHeader(expected_offset=1))


def test_S1_4_a_handle_reads_its_own_small_last_file_as_the_store_gives_it(root, topic):
    """The rows of the small file a handle just appended (a marker, a coordinator's record) are served from
    memory: the same schema and values, projection and filter as reading the file gives. A large file is read."""
    import pyarrow.compute as pc

    from lakelog.store.delta.table import WRITTEN_ROWS_KEPT

    log = open_partition(root, topic(), 0)
    producer_id = allocate_producer_id(root)
    payload = payload_table([b"a", None, b"c"], keys=[b"k", None, b"k"], headers=[[("h", b"1")], None, [("h", None)]])
    log.append(payload, BatchHeader(producer_id, 0, 0))
    log.append_marker(producer_id, 1, ControlType.COMMIT)
    disk = open_partition_fresh(log)
    filters = [(None, None), (["offset", "control"], None), (None, pc.field("offset") >= 1), (["value"], pc.field("offset") < 2)]
    for entry in partition_files(log.table):
        for columns, predicate in filters:
            mine, read = log.table.read_file(entry, columns, predicate), disk.table.read_file(entry, columns, predicate)
            assert mine.schema == read.schema and mine.to_pylist() == read.to_pylist(), (entry.path, columns)
    last = partition_files(log.table)[-1]
    assert log.table._written is not None and log.table._written[0] == last.path
    log.append(payload_table([b"x"] * (WRITTEN_ROWS_KEPT + 1)))
    assert log.table._written is None
    assert [row["value"] for row in log.fetch(0, max_records=10_000).rows.to_pylist()][4:] == [b"x"] * (WRITTEN_ROWS_KEPT + 1)
