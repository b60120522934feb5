"""Retention and delete-records on real Delta tables (S9.1, S9.2, S8.3), with a passed-in clock and no sleeps."""

from __future__ import annotations

import logging

import pytest
from helpers import table_fingerprint

from lakelog.errors import OffsetOutOfRange, PolicyViolation
from lakelog.log import READ_COMMITTED, BatchHeader, ControlType, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.log.retention import delete_records, enforce_retention
from lakelog.log.topic_config import TopicConfig
from lakelog.log.transactions import TransactionIndex
from lakelog.log.verification import _UNVERIFIED
from lakelog.store.io.retry import RetryPolicy

DAY_MS = 86_400_000
T0 = 1_700_000_000_000
# Lost races in these tests are retried at once.
NO_WAIT = RetryPolicy(0, 0)


class Clock:
    def __init__(self, now_ms: int = T0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def append(log, values, at_ms, header=BatchHeader()):
    """One batch (one file) whose records carry the timestamp `at_ms`."""
    return log.append(payload_table(values, timestamps_ms=[at_ms] * len(values)), header, transaction=_UNVERIFIED)


def data(log, count=3, at_ms=T0, prefix=b"v"):
    return append(log, [prefix + str(i).encode() for i in range(count)], at_ms)


def txn(producer_id, sequence, epoch=0):
    return BatchHeader(producer_id, epoch, sequence, is_transactional=True)


def values(rows):
    return [row["value"] for row in rows.to_pylist()]


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def open_log(root, clock):
    def make(name):
        return open_partition(root, name, 0, clock)

    return make


@pytest.mark.roots("local", "s3", "azure", "gcs", release=("azure", "gcs"))
def test_s9_1_retention_ms_removes_whole_files_past_it_and_moves_the_log_start(topic, open_log, caplog):
    name = topic({"retention.ms": DAY_MS})
    log = open_log(name)
    for day in range(4):  # four files of 3 records, a day apart
        data(log, at_ms=T0 + day * DAY_MS, prefix=f"d{day}-".encode())
    before = log.version
    # Day 0 and 1 are more than a day old at T0 + 2 days + 1 ms; day 2 is exactly a day old: kept.
    with caplog.at_level(logging.INFO, logger="lakelog.log.retention"):
        trim = enforce_retention(log, T0 + 3 * DAY_MS)
    assert trim is not None and trim.version == before + 1 and trim.files_removed == 2
    assert "retention removed 2 file(s)" in caplog.text
    fresh = open_log(name)
    assert fresh.log_start_offset() == trim.log_start_offset == 6
    assert values(fresh.fetch(6).rows) == [b"d2-0", b"d2-1", b"d2-2", b"d3-0", b"d3-1", b"d3-2"]
    with pytest.raises(OffsetOutOfRange):
        fresh.fetch(5)
    # Idempotent: nothing more is due at the same time, and nothing is committed.
    assert enforce_retention(log, T0 + 3 * DAY_MS) is None
    assert log.version == before + 1
    assert enforce_retention(log, T0 + 3 * DAY_MS + 1).log_start_offset == 9


def test_s9_1_retention_bytes_removes_the_oldest_files_down_to_the_limit(topic, open_log):
    name = topic({"retention.ms": -1})
    log = open_log(name)
    for _ in range(3):
        data(log)
    sizes = [entry.size_bytes for entry in partition_files(log.table)]
    # The limit is the newest two files' size: dropping the second too would go below it.
    log.config = TopicConfig.load({"retention.ms": -1, "retention.bytes": sizes[1] + sizes[2]})
    trim = enforce_retention(log, T0)
    assert trim.files_removed == 1 and open_log(name).log_start_offset() == 3
    assert enforce_retention(log, T0) is None
    # retention.bytes=0 removes every file below the LSO; the log start is then the log end offset.
    log.config = TopicConfig.load({"retention.ms": -1, "retention.bytes": 0})
    trim = enforce_retention(log, T0)
    assert trim.files_removed == 2 and trim.log_start_offset == 9
    fresh = open_log(name)
    assert fresh.log_start_offset() == fresh.log_end_offset() == fresh.last_stable_offset() == 9
    assert fresh.fetch(9).rows.num_rows == 0
    data(fresh)
    assert values(open_log(name).fetch(9).rows) == [b"v0", b"v1", b"v2"]


def test_retention_off_by_config_commits_nothing(topic, open_log):
    for config in ({"retention.ms": -1, "retention.bytes": -1}, {"cleanup.policy": "compact", "retention.bytes": 0}):
        log = open_log(topic(config))
        data(log, at_ms=0)
        version = log.version
        assert enforce_retention(log, T0) is None
        assert log.version == version


def test_s9_2_an_open_transactions_rows_survive_retention(topic, open_log, clock):
    name = topic({"retention.ms": 0})
    log = open_log(name)
    data(log, at_ms=0)  # 0-2
    append(log, [b"t0", b"t1"], 0, txn(7, 0))  # 3-4: the transaction stays open
    data(log, at_ms=0)  # 5-7
    trim = enforce_retention(log, T0)
    assert trim.files_removed == 1 and trim.log_start_offset == 3
    fresh = open_log(name)
    assert fresh.last_stable_offset() == 3 and fresh.open_transactions() == {7: 3}
    # delete_records may not pass the LSO either, and a refusal leaves the table as it was (S8.3).
    before = table_fingerprint(fresh.table.uri)
    with pytest.raises(OffsetOutOfRange, match="last stable offset 3"):
        delete_records(fresh, 4)
    with pytest.raises(OffsetOutOfRange):
        delete_records(fresh, -1)
    assert table_fingerprint(fresh.table.uri) == before
    clock.now_ms = 0
    log.append_marker(7, 1, ControlType.COMMIT)  # 8
    assert enforce_retention(log, T0).log_start_offset == 9
    assert open_log(name).fetch(9).rows.num_rows == 0


@pytest.mark.roots("local", "s3", "azure", "gcs", release=("azure", "gcs"))
def test_s9_1_delete_records_moves_the_log_start_into_a_file_and_removes_files_below_it(topic, open_log):
    name = topic({"retention.ms": -1})
    log = open_log(name)
    for _ in range(3):
        data(log)  # files 0-2, 3-5, 6-8
    assert delete_records(log, 4) == 4
    fresh = open_log(name)
    assert fresh.log_start_offset() == 4 and [entry.min_offset for entry in partition_files(fresh.table)] == [3, 6]
    assert values(fresh.fetch(4).rows) == [b"v1", b"v2", b"v0", b"v1", b"v2"]
    with pytest.raises(OffsetOutOfRange):
        fresh.fetch(3)
    # Only forward (S9.1): an offset at or below the log start commits nothing and reports the log start.
    version = fresh.version
    assert delete_records(fresh, 2) == 4 and delete_records(fresh, 4) == 4
    assert fresh.version == version
    # -1 is the high watermark: everything goes.
    assert delete_records(fresh, -1) == 9
    again = open_log(name)
    assert again.log_start_offset() == 9 and partition_files(again.table) == []


@pytest.mark.parametrize("offset", [10, -2])
def test_s8_3_delete_records_outside_the_log_is_refused_unchanged(topic, open_log, offset):
    log = open_log(topic())
    for _ in range(3):
        data(log)
    before = table_fingerprint(log.table.uri)
    with pytest.raises(OffsetOutOfRange):
        delete_records(log, offset)
    assert table_fingerprint(log.table.uri) == before


def test_s8_3_delete_records_on_a_compacted_topic_is_refused_unchanged(topic, open_log):
    log = open_log(topic({"cleanup.policy": "compact"}))
    data(log)
    before = table_fingerprint(log.table.uri)
    with pytest.raises(PolicyViolation):
        delete_records(log, 1)
    assert table_fingerprint(log.table.uri) == before


def test_s9_2_read_committed_after_trimming_inside_an_aborted_transaction(topic, open_log, clock):
    """The index never refers below the log start; a cold index (files below it gone) reads the same rows."""
    name = topic({"retention.ms": -1})
    log = open_log(name)
    data(log, prefix=b"a")  # 0-2
    append(log, [b"x0", b"x1"], T0, txn(5, 0))  # 3-4: aborted below
    data(log, prefix=b"b")  # 5-7
    append(log, [b"x2", b"x3"], T0, txn(5, 2))  # 8-9
    log.append_marker(5, 1, ControlType.ABORT)  # 10
    append(log, [b"c0"], T0, txn(6, 0))  # 11: committed below
    log.append_marker(6, 1, ControlType.COMMIT)  # 12
    data(log, prefix=b"d")  # 13-15
    assert log.aborted_transactions(0, 16)[0].first_offset == 3
    expected = [b"b0", b"b1", b"b2", b"c0", b"d0", b"d1", b"d2"]
    assert delete_records(log, 4) == 4
    # The handle that trimmed: its index drops what is below the first active file (3) and starts there.
    assert [(t.first_offset, t.marker_offset) for t in log.aborted_transactions(4, 16)] == [(3, 10)]
    assert values(log.fetch(4, isolation_level=READ_COMMITTED).rows) == expected
    assert delete_records(log, 6) == 6
    assert [(t.first_offset, t.marker_offset) for t in log.aborted_transactions(6, 16)] == [(5, 10)]
    assert log.last_stable_offset() == 16
    assert values(log.fetch(6, isolation_level=READ_COMMITTED).rows) == expected[1:]
    # Vacuum deletes the removed files once no snapshot may read them: a cold index must not need them.
    cold = open_log(name)
    assert [entry.min_offset for entry in partition_files(cold.table)] == [5, 8, 10, 11, 12, 13]
    assert vacuum_all(cold) == 2
    assert cold.last_stable_offset() == 16 and cold.open_transactions() == {}
    assert all(found.first_offset >= 5 for found in cold.aborted_transactions(6, 16))
    assert values(cold.fetch(6, isolation_level=READ_COMMITTED).rows) == expected[1:]


def vacuum_all(log):
    """Delete every data file no longer active, as vacuum does after its grace."""
    active = {entry.path for entry in partition_files(log.table)}
    deleted = 0
    for entry in log.table.io.list(log.table.uri):
        name = entry.uri.rsplit("/", 1)[-1]
        if name.endswith(".parquet") and name not in active:
            deleted += log.table.io.delete(entry.uri)
    return deleted


def test_a_transaction_index_behind_the_floor_starts_over_there(topic, open_log, clock):
    name = topic({"retention.ms": -1})
    log = open_log(name)
    append(log, [b"x0"], T0, txn(5, 0))  # 0
    log.append_marker(5, 1, ControlType.ABORT)  # 1
    data(log)  # 2-4
    behind = open_log(name)
    assert behind.aborted_transactions(0, 5) != []
    delete_records(log, 2)
    data(log)  # 5-7
    assert vacuum_all(log) == 2
    behind.refresh()
    assert behind.last_stable_offset() == 8 and behind.aborted_transactions(0, 8) == []
    index = TransactionIndex(snapshot_every_offsets=0)
    index.catch_up(behind.table, 8)
    assert (index.position, index.floor, index.open_transactions()) == (8, 2, {})


def test_s9_1_admin_delete_records_as_confluent_kafka(root, topic, open_log):
    from lakelog import AdminClient
    from lakelog.client.admin.types import DeletedRecords
    from lakelog.client.types import TopicPartition
    from lakelog.errors import InvalidRequest, UnknownTopicOrPartition

    name = topic(partitions=2)
    for partition in (0, 1):
        log = open_partition(root, name, partition)
        data(log)
        data(log)
    admin = AdminClient({"lakelog.root": root})
    middle, end, beyond = TopicPartition(name, 0, 4), TopicPartition(name, 1, -1), TopicPartition(name, 1, 7)
    futures = admin.delete_records([middle, beyond])
    assert futures[middle].result() == DeletedRecords(low_watermark=4)
    with pytest.raises(OffsetOutOfRange):
        futures[beyond].result()
    assert admin.delete_records([end])[end].result().low_watermark == 6
    missing = TopicPartition(name, 2, 0)
    with pytest.raises(UnknownTopicOrPartition):
        admin.delete_records([missing])[missing].result()
    with pytest.raises(InvalidRequest):
        admin.delete_records([middle, TopicPartition(name, 0, 5)])
    assert [open_partition(root, name, p).log_start_offset() for p in (0, 1)] == [4, 6]


@pytest.mark.parametrize(
    ("deleted_to", "removed", "loads_snapshot", "aborted"),
    [(2, 0, True, [(5, 3, 5)]), (6, 3, True, []), (12, 5, False, [])],
)
def test_s9_2_a_cold_index_uses_a_snapshot_only_at_or_above_the_floor(
    topic, open_log, deleted_to, removed, loads_snapshot, aborted
):
    name = topic({"retention.ms": -1})
    log = open_log(name)
    data(log)  # 0-2
    append(log, [b"x0", b"x1"], T0, txn(5, 0))  # 3-4
    log.append_marker(5, 1, ControlType.ABORT)  # 5
    data(log)  # 6-8
    writer = TransactionIndex(snapshot_every_offsets=4)
    writer.catch_up(log.table, 9)
    assert writer.snapshot_position == 9  # a sidecar snapshot of the state at offset 9
    data(log)  # 9-11
    data(log)  # 12-14
    delete_records(log, deleted_to)
    assert vacuum_all(log) == removed
    # A snapshot below the floor needs rows that are gone: skipped, the index folds from the floor.
    cold = TransactionIndex(snapshot_every_offsets=100)
    cold.catch_up(log.table, 15)
    assert cold.snapshot_position == (9 if loads_snapshot else 0)
    assert [(t.producer_id, t.first_offset, t.marker_offset) for t in cold.aborted_transactions(0, 15)] == aborted
    assert cold.position == 15 and cold.last_stable_offset() == 15


@pytest.mark.parametrize("isolation_level", ["read_uncommitted", READ_COMMITTED])
def test_s9_1_a_fetch_on_a_handle_behind_a_trim_whose_files_are_gone_is_out_of_range(topic, open_log, isolation_level):
    """S9.1: a start the log start passed while this handle was behind, its files since vacuumed: OffsetOutOfRange."""
    name = topic({"retention.ms": -1})
    behind = open_log(name)
    for _ in range(3):
        data(behind)  # files 0-2, 3-5, 6-8
    trimmer = open_log(name)
    assert delete_records(trimmer, 6) == 6
    assert vacuum_all(trimmer) == 2
    with pytest.raises(OffsetOutOfRange) as raised:
        behind.fetch(0, isolation_level=isolation_level)  # in range on its snapshot; its file is gone
    assert raised.value.log_start_offset == 6
    assert values(behind.fetch(6, isolation_level=isolation_level).rows) == [b"v0", b"v1", b"v2"]
