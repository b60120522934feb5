"""Scan plans (lakelog.log.scan): offsets resolved as Spark's Kafka source resolves them, read through fetch."""

from __future__ import annotations

import pickle

import pytest

from lakelog.errors import InvalidRequest, OffsetOutOfRange, UnknownTopicOrPartition
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, BatchHeader, ControlType, create_topic, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.log.scan import EARLIEST, LATEST, parse_offsets_json, plan_scan
from lakelog.log.verification import _UNVERIFIED

pytestmark = pytest.mark.roots("local", "s3")


@pytest.fixture
def topic(root):
    """p0: a, b (aborted txn), c, its ABORT marker, d (open txn): HW 5, LSO 4. p1: x."""
    create_topic(root, "t", 2)
    log = open_partition(root, "t", 0)
    log.append(payload_table([b"a"]))
    log.append(payload_table([b"b"]), BatchHeader(1, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    log.append(payload_table([b"c"]))
    log.append_marker(1, 1, ControlType.ABORT)
    log.append(payload_table([b"d"]), BatchHeader(2, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    open_partition(root, "t", 1).append(payload_table([b"x"]))
    return "t"


def values(scan):
    return [value for rows in scan.read() for value in rows.column("value").to_pylist()]


def test_ends_are_cut_at_the_isolation_levels_limit_and_rows_come_from_fetch(root, topic):
    committed, other = plan_scan(root, topic)
    assert (committed.start_offset, committed.end_offset, committed.last_stable_offset, committed.high_watermark) == (0, 4, 4, 5)
    assert [(t.producer_id, t.first_offset, t.marker_offset) for t in committed.aborted] == [(1, 1, 3)]
    assert values(committed) == [b"a", b"c"] and values(other) == [b"x"]
    uncommitted, _ = plan_scan(root, topic, READ_UNCOMMITTED)
    assert (uncommitted.end_offset, uncommitted.aborted) == (5, ())
    assert values(uncommitted) == [b"a", b"b", b"c", b"d"]  # no marker rows
    # A pinned scan travels (to a Spark executor) and reads the same snapshot after new commits.
    shipped = pickle.loads(pickle.dumps(committed))
    open_partition(root, "t", 0).append(payload_table([b"later"]))
    assert values(shipped) == [b"a", b"c"]


def test_offsets_per_partition(root, topic):
    scan, _ = plan_scan(root, topic, READ_COMMITTED, {0: 2, 1: EARLIEST}, {0: 100, 1: LATEST})
    assert (scan.start_offset, scan.end_offset) == (2, 4) and values(scan) == [b"c"]
    past_lso, _ = plan_scan(root, topic, READ_COMMITTED, {0: 5, 1: 0}, LATEST)
    assert (past_lso.start_offset, past_lso.end_offset) == (5, 5) and values(past_lso) == []
    with pytest.raises(OffsetOutOfRange, match="ending offset 1 is before the starting offset 2"):
        plan_scan(root, topic, READ_COMMITTED, {0: 2, 1: 0}, {0: 1, 1: LATEST})
    with pytest.raises(OffsetOutOfRange, match="starting offset 7 is outside"):
        plan_scan(root, topic, READ_COMMITTED, {0: 7, 1: 0})
    with pytest.raises(OffsetOutOfRange, match="latest"):
        plan_scan(root, topic, READ_COMMITTED, LATEST)
    with pytest.raises(UnknownTopicOrPartition, match="every partition"):
        plan_scan(root, topic, READ_COMMITTED, {0: 0})
    with pytest.raises(InvalidRequest):
        plan_scan(root, topic, "dirty")


def test_offsets_json_as_sparks_kafka_source_takes_it():
    assert parse_offsets_json("startingOffsets", "earliest", ["a", "b"]) == {"a": EARLIEST, "b": EARLIEST}
    assert parse_offsets_json("endingOffsets", " LATEST ", ["a"]) == {"a": LATEST}
    assert parse_offsets_json("startingOffsets", '{"a": {"0": 23, "1": -2}}', ["a"]) == {"a": {0: 23, 1: -2}}
    with pytest.raises(InvalidRequest, match="neither"):
        parse_offsets_json("startingOffsets", "{'a': 1}", ["a"])
    with pytest.raises(UnknownTopicOrPartition, match="must give offsets for topic b"):
        parse_offsets_json("startingOffsets", '{"a": {"0": 1}}', ["a", "b"])
    with pytest.raises(UnknownTopicOrPartition, match="not a partition number"):
        parse_offsets_json("startingOffsets", '{"a": {"zero": 1}}', ["a"])


def test_S1_4_a_scan_reads_only_the_files_that_hold_its_offsets(root, topic):
    """Files are pruned by their offset statistics: files wholly outside the range are never opened."""
    log = open_partition(root, topic, 0)
    assert len(partition_files(log.table)) == 5  # one file per batch: a, b, c, marker, d
    scan, _ = plan_scan(root, topic, READ_COMMITTED, {0: 2, 1: EARLIEST}, {0: 3, 1: LATEST})
    assert [(entry.min_offset, entry.max_offset) for entry in scan.files] == [(2, 2)]
    for entry in partition_files(log.table):
        if entry.max_offset < 2 or entry.min_offset >= 3:
            log.table.io.write(log.table.file_path(entry), b"not parquet")
    assert values(scan) == [b"c"]


def txn(log, producer_id, value):
    log.append(payload_table([value]), BatchHeader(producer_id, 0, 0, is_transactional=True), transaction=_UNVERIFIED)


def aborted_of(scan):
    return [(t.producer_id, t.first_offset, t.marker_offset) for t in scan.aborted]


def test_S5_1_S5_3_a_later_plan_folds_only_the_rows_appended_since_the_last_one(root, topic):
    """The transaction state is kept between plans of a process: the next one reads only the new rows' headers,
    and its LSO and aborted transactions are those of its own snapshot."""
    first, _ = plan_scan(root, topic)
    log = open_partition(root, topic, 0)
    earlier = list(partition_files(log.table))
    log.append_marker(2, 1, ControlType.COMMIT)  # 5: closes d's transaction (4)
    txn(log, 3, b"e")  # 6: aborted below
    log.append_marker(3, 1, ControlType.ABORT)  # 7
    txn(log, 4, b"f")  # 8: stays open
    # The rows the first plan folded cannot be read any more: a plan that re-read them would fail.
    for entry in earlier:
        log.table.io.write(log.table.file_path(entry), b"not parquet")
    scan, _ = plan_scan(root, topic)
    assert (scan.end_offset, scan.last_stable_offset, scan.high_watermark) == (8, 8, 9)
    assert aborted_of(scan) == [(1, 1, 3), (3, 6, 7)]
    assert aborted_of(plan_scan(root, topic, READ_COMMITTED, {0: 4, 1: EARLIEST})[0]) == [(3, 6, 7)]
    assert (first.end_offset, aborted_of(first)) == (4, [(1, 1, 3)])


def test_S5_3_a_kept_state_ahead_of_the_snapshot_is_not_used(root, topic):
    """A plan on an older snapshot (one that raced a newer plan) gets that snapshot's state, not the newer one's."""
    from lakelog.log.partition import PartitionLog
    from lakelog.log.scan_state import transaction_state
    from lakelog.store import Table

    log = open_partition(root, topic, 0)
    older = log.table.version
    log.append_marker(2, 1, ControlType.ABORT)  # 5: aborts d (4)
    plan_scan(root, topic)  # keeps the state at offset 6
    old = PartitionLog(Table.open(log.table.location, older), topic, 0, log.config)
    lso, aborted = transaction_state(old)
    assert (lso, [(t.producer_id, t.first_offset, t.marker_offset) for t in aborted]) == (4, [(1, 1, 3)])


def test_S5_3_a_kept_state_trimmed_past_the_snapshots_first_file_is_not_used(root, topic):
    """delete_records (S9.1) trims the kept state; a plan on a snapshot from before it still drops the aborted rows."""
    from lakelog.log.partition import PartitionLog
    from lakelog.log.retention import delete_records
    from lakelog.log.scan_state import transaction_state
    from lakelog.store import Table

    log = open_partition(root, topic, 0)
    before = log.table.version
    plan_scan(root, topic)
    assert delete_records(log, 4) == 4  # removes the files of offsets 0-3, the aborted transaction's among them
    [scan, _] = plan_scan(root, topic)  # keeps the state trimmed at offset 4
    assert (scan.start_offset, scan.aborted) == (4, ())
    old = PartitionLog(Table.open(log.table.location, before), topic, 0, log.config)
    lso, aborted = transaction_state(old)
    assert (lso, [(t.producer_id, t.first_offset, t.marker_offset) for t in aborted]) == (4, [(1, 1, 3)])


def test_S5_3_a_topic_created_again_under_its_name_is_planned_from_its_own_rows(root):
    """The kept state is a table's (by its Delta table id): a new topic of the same name does not inherit it."""
    from lakelog.log.topic_changes import delete_topic

    create_topic(root, "again", 1)
    log = open_partition(root, "again", 0)
    txn(log, 1, b"a")
    log.append_marker(1, 1, ControlType.ABORT)
    [scan] = plan_scan(root, "again")
    assert aborted_of(scan) == [(1, 0, 1)]
    delete_topic(root, "again")
    create_topic(root, "again", 1)
    log = open_partition(root, "again", 0)
    for value in (b"x", b"y", b"z"):
        log.append(payload_table([value]))
    [scan] = plan_scan(root, "again")
    assert (scan.end_offset, aborted_of(scan), values(scan)) == (3, [], [b"x", b"y", b"z"])


def test_small_partitions_share_read_tasks_and_every_record_is_read_once(root):
    from pyspark_lakelog.source import read_scans, scan_tasks

    create_topic(root, "wide", 12)
    for partition in range(12):
        open_partition(root, "wide", partition).append(payload_table([f"{partition}-{i}".encode() for i in range(3)]))
    scans = plan_scan(root, "wide")
    tasks = scan_tasks(scans, 128 << 20)
    # 12 tiny partitions: about Spark's minimum of tasks (greedy packing of files of a few bytes' difference), not
    # one task each; minPartitions asks for more.
    assert 2 <= len(tasks) <= 3 and len(tasks[0]) >= 5
    assert 6 <= len(scan_tasks(scans, 128 << 20, min_partitions=6)) <= 7
    read = [value for task in tasks for batch in read_scans(task) for value in batch.column("value").to_pylist()]
    assert sorted(read) == sorted(f"{p}-{i}".encode() for p in range(12) for i in range(3))
    # Nothing to read is one task that reads an empty range.
    create_topic(root, "empty", 3)
    [empty] = scan_tasks(plan_scan(root, "empty"), 128 << 20)
    assert len(empty) == 1 and list(read_scans(empty)) == []


def test_min_partitions_is_a_positive_topic_read_option(root):
    import pytest

    from lakelog.errors import InvalidConfig
    from pyspark_lakelog.options import ReadOptions

    create_topic(root, "t", 1)
    assert ReadOptions.parse({"root": str(root), "topic": "t", "minPartitions": "8"}).min_partitions == 8
    assert ReadOptions.parse({"root": str(root), "topic": "t"}).min_partitions is None
    with pytest.raises(InvalidConfig, match="minpartitions must be positive"):
        ReadOptions.parse({"root": str(root), "topic": "t", "minPartitions": "0"})
    with pytest.raises(InvalidConfig, match="applies to topic reads"):
        ReadOptions.parse({"root": str(root), "view": "t", "minPartitions": "8"})


def test_S5_2_a_plan_made_again_refreshes_its_kept_handles_to_the_latest_rows_and_partitions(root):
    """Handles kept between plans (lakelog.log.plan_handles) are refreshed before a plan pins them: rows appended
    since the last plan are read, a partition added since is planned, and a deleted topic is unknown, as to a
    process that never planned it."""
    from lakelog.log import plan_handles
    from lakelog.log.topic_changes import create_partitions, delete_topic

    create_topic(root, "kept", 2)
    for partition in range(2):
        open_partition(root, "kept", partition).append(payload_table([b"first"]))
    assert [values(scan) for scan in plan_scan(root, "kept")] == [[b"first"], [b"first"]]
    open_partition(root, "kept", 1).append(payload_table([b"second"]))
    create_partitions(root, "kept", 3)
    open_partition(root, "kept", 2).append(payload_table([b"third"]))
    assert [values(scan) for scan in plan_scan(root, "kept")] == [[b"first"], [b"first", b"second"], [b"third"]]
    plan_handles.forget()
    assert [values(scan) for scan in plan_scan(root, "kept")] == [[b"first"], [b"first", b"second"], [b"third"]]
    delete_topic(root, "kept")
    with pytest.raises(UnknownTopicOrPartition):
        plan_scan(root, "kept")


def test_S12_3_a_topic_deleted_and_made_again_to_the_same_version_is_read_afresh_and_fences_old_handles(root):
    """A kept handle, and a writer's handle, of a topic deleted and made again up to the very version they hold: the
    refresh reads the commit in hand again and finds another table's, so the plan reads the new topic's rows (not
    the deleted one's, from files gone) and the old handle is told its partition is unknown."""
    from lakelog.log.topic_changes import delete_topic

    create_topic(root, "again", 1)
    open_partition(root, "again", 0).append(payload_table([b"old"]))
    held = open_partition(root, "again", 0)
    assert [values(scan) for scan in plan_scan(root, "again")] == [[b"old"]]
    delete_topic(root, "again")
    create_topic(root, "again", 1)
    open_partition(root, "again", 0).append(payload_table([b"new"]))
    assert open_partition(root, "again", 0).version == held.version  # the same version, another table
    assert [values(scan) for scan in plan_scan(root, "again")] == [[b"new"]]
    with pytest.raises(UnknownTopicOrPartition):
        held.refresh()
