"""The transaction log folder: bounded by count and retention, deleted in ascending order, checkpoints by lakelog (S9.5).

`cleanup_log` deletes only log files both behind the kept checkpoints and older than the retention
(`delta.log.retention.ms`), in ascending version order and stopping at the first kept, so a missing
(N-1).json is implied by a missing N.json. `Table._commit` relies on that after every put: a commit file
that refilled a hole is found in the past and is a lost race, never a success. Checkpoints are written by
lakelog after that check, never by delta-rs's post-commit hook from a writer's own state.
"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

from lakelog.errors import CommitConflict, KafkaStorageError
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.store import Location, Table
from lakelog.store.delta.commit import Commit, Conflict, Unknown
from lakelog.store.delta.table_create import created_in_the_log
from lakelog.store.upkeep.maintenance import cleanup_log, log_retention_seconds

pytestmark = pytest.mark.roots("local", "s3")

INTERVAL = 5


@pytest.fixture
def partition(root):
    create_topic(root, "t", 1, {"checkpoint.interval.commits": INTERVAL, "delta.log.retention.ms": 0})
    return open_partition(root, "t", 0)


def log_versions(table: Table, suffix: str = ".json") -> list[int]:
    folder = Location.of(table.uri) / "_delta_log"
    return sorted(int(entry.name[:20]) for entry in folder.list() if entry.name.endswith(suffix) and entry.name[:20].isdigit())


def append(partition, count: int) -> None:
    for index in range(count):
        partition.append(payload_table([f"r{index}".encode()]))


def test_the_topic_retention_is_the_tables_and_defaults_to_hours(root):
    create_topic(root, "default", 1)
    assert log_retention_seconds(open_partition(root, "default", 0).table) == 6 * 3600
    create_topic(root, "short", 1, {"delta.log.retention.ms": 90_000})
    assert log_retention_seconds(open_partition(root, "short", 0).table) == 90


def test_S9_5_lakelog_writes_the_checkpoints_on_the_interval(partition):
    append(partition, 3 * INTERVAL)
    assert log_versions(partition.table, ".checkpoint.parquet") == [4, 9, 14]
    assert Table.open(partition.table.location).version == 3 * INTERVAL


def test_S9_5_cleanup_deletes_in_ascending_order_only_what_is_past_the_count_and_the_retention(partition, monkeypatch):
    table = partition.table
    append(partition, 4 * INTERVAL)  # checkpoints at 4, 9, 14, 19
    assert cleanup_log(table, keep_checkpoints=2, retention_s=3600) == 0, "young files stay, whatever the count"
    # Files older than the retention behind the 2nd-latest checkpoint (14) go, oldest first.
    assert cleanup_log(table, keep_checkpoints=2, retention_s=60, now=time.time() + 120) > 0
    assert log_versions(table) == list(range(14, 4 * INTERVAL + 1))
    assert log_versions(table, ".checkpoint.parquet") == [14, 19]
    # Deleted oldest first, a version's commit file after its checkpoint: "N.json gone" implies "(N-1).json gone".
    append(partition, 2 * INTERVAL)  # checkpoints at 24, 29
    deleted: list[str] = []
    delete = table.io.delete

    def recording_delete(uri: str) -> bool:
        deleted.append(uri.rsplit("/", 1)[-1])
        return delete(uri)

    monkeypatch.setattr(table.io, "delete", recording_delete)
    assert cleanup_log(table, keep_checkpoints=2, retention_s=0) == len(deleted) > 0
    assert deleted == sorted(deleted, key=lambda name: (name[:20], name.endswith(".json")))
    assert [name for name in deleted if name.endswith(".json")] == [f"{version:020d}.json" for version in range(14, 24)]
    assert Table.open(table.location).version == 6 * INTERVAL


def test_S9_5_cleanup_finds_the_files_to_delete_by_name_without_listing_the_log(partition, monkeypatch):
    """The kept checkpoints come from `_last_checkpoint` and the interval, the oldest commit and the last one past the
    retention by bisection: no listing, and lookups that grow with the log's length only as its logarithm."""
    table = partition.table
    listed: list[str] = []
    looked: list[str] = []
    original_list, original_info, original_exists = table.io.list, table.io.info, table.io.file_exists
    monkeypatch.setattr(table.io, "list", lambda uri, **kw: listed.append(uri) or original_list(uri, **kw))
    monkeypatch.setattr(table.io, "info", lambda uri: looked.append(uri) or original_info(uri))
    monkeypatch.setattr(table.io, "file_exists", lambda uri: looked.append(uri) or original_exists(uri))
    append(partition, 4 * INTERVAL)  # checkpoints at 4, 9, 14, 19
    assert cleanup_log(table, keep_checkpoints=2, retention_s=3600) == 0, "young files stay"
    assert cleanup_log(table, keep_checkpoints=2, retention_s=0) == 14 + 2  # versions 0-13 and checkpoints 4, 9
    assert listed == []
    assert log_versions(table) == list(range(14, 4 * INTERVAL + 1))
    assert log_versions(table, ".checkpoint.parquet") == [14, 19]
    # A long log: what is looked up grows with log2 of its length, not with the commit files kept.
    append(partition, 20 * INTERVAL)
    listed.clear()
    looked.clear()
    assert cleanup_log(table, keep_checkpoints=2, retention_s=3600) == 0
    assert listed == [] and len(looked) <= 2 * (table.version.bit_length() + 2), looked
    assert cleanup_log(table, keep_checkpoints=2, retention_s=0) > 0
    assert listed == []
    checkpoints = log_versions(table, ".checkpoint.parquet")
    assert len(checkpoints) == 2 and log_versions(table) == list(range(checkpoints[0], table.version + 1))
    assert Table.open(table.location).version == table.version


def test_S9_5_cleanup_lists_the_log_when_last_checkpoint_is_gone_and_deletes_the_same(partition):
    table = partition.table
    append(partition, 4 * INTERVAL)
    table.io.delete(table.child_uri("_delta_log/_last_checkpoint"))
    assert cleanup_log(table, keep_checkpoints=2, retention_s=0) == 14 + 2
    assert log_versions(table) == list(range(14, 4 * INTERVAL + 1))
    assert Table.open(table.location).version == 4 * INTERVAL


def stray_commit(table: Table, version: int, commit_id: str) -> None:
    """What a paused writer's put leaves in a hole: a commit file of its own, with its commit id."""
    path = table.child_uri(f"_delta_log/{version:020d}.json")
    table.io.write(path, (f'{{"commitInfo":{{"lakelog.commit":"{commit_id}"}}}}\n').encode())


def check_after_put(table: Table, version: int, commit_id: str, added: list[str], owned: list[str]):
    """The check a commit of `version` (its id, the files it added and wrote) makes after its put (S9.5)."""
    commit = Commit(table, [], schema=table.schema, mode="append", decided_on=version - 1, owned=owned)
    commit.commit_id, commit.added = commit_id, added
    return commit._check_not_in_the_past()


def test_S9_5_a_commit_file_that_refilled_a_hole_is_a_lost_race_and_is_removed(partition):
    table = partition.table
    stale = Table.open(table.location)
    append(partition, 3 * INTERVAL)
    cleanup_log(table, keep_checkpoints=2, retention_s=0)
    assert 0 not in log_versions(table) and 1 not in log_versions(table)
    # The stale writer's put of version 1 (its data file written first) lands in the hole.
    name = f"part-{uuid.uuid4().hex}.parquet"
    stale.io.write_parquet(pa.table({"offset": pa.array([0], pa.int64())}), stale.child_uri(name))
    commit_id = uuid.uuid4().hex
    stray_commit(stale, 1, commit_id)
    outcome = check_after_put(stale, 1, commit_id, [name], [stale.child_uri(name)])
    assert isinstance(outcome, Conflict) and outcome.long_ago
    with pytest.raises(CommitConflict):
        outcome.result()
    assert 1 not in log_versions(table), "the stray commit file is removed"
    assert not stale.io.exists(stale.child_uri(name)), "and the writer's file"
    assert stale.version == 3 * INTERVAL
    # A commit of no file in a hole cannot be told from one long committed: unknown outcome (S12.3).
    stray_commit(stale, 1, commit_id)
    outcome = check_after_put(stale, 1, commit_id, [], [])
    assert isinstance(outcome, Unknown)
    with pytest.raises(KafkaStorageError, match="unknown"):
        outcome.result()


def test_S9_5_a_commit_whose_predecessor_is_gone_is_found_by_its_files(partition):
    table = partition.table
    append(partition, 3 * INTERVAL)
    first = partition_files(table)[0]  # committed as version 1
    cleanup_log(table, keep_checkpoints=2, retention_s=0)
    assert check_after_put(table, 1, "any", [first.path], []) is None
    # The fast path: (N-1).json is there, so N.json was never deleted before the put.
    assert check_after_put(table, table.version, "any", [], []) is None


def test_S9_5_a_create_that_refilled_version_0_is_not_a_create(partition, root):
    table = partition.table
    append(partition, 3 * INTERVAL)
    cleanup_log(table, keep_checkpoints=2, retention_s=0)
    assert 0 not in log_versions(table)
    # A creator that looked for the table before the cleanup and put its 0.json after it: its own table id.
    elsewhere, _ = Table.create(Location.of(root) / "elsewhere", table.schema, {})
    zero = f"_delta_log/{0:020d}.json"
    table.io.write(table.child_uri(zero), elsewhere.io.read(elsewhere.child_uri(zero)))
    creator = Table(table.location, elsewhere._snapshot)
    assert not created_in_the_log(creator._log, creator.table_id)
    assert 0 not in log_versions(table), "the stray 0.json is removed"
    assert Table.open(table.location).version == 3 * INTERVAL
    # A real create is one.
    assert created_in_the_log(elsewhere._log, elsewhere.table_id)


def test_S9_5_opening_a_table_whose_version_0_was_cleaned_up_puts_nothing_into_the_hole(partition, root, caplog):
    """The create-or-open of the tables every process opens (producer ids, views, status, the root's identity, a
    topic's partition 0) opens an existing table first: no 0.json is put into the hole cleanup left, and no
    WARNING about one is logged; a table that is absent is still created."""
    table = partition.table
    append(partition, 3 * INTERVAL)
    cleanup_log(table, keep_checkpoints=2, retention_s=0)
    assert 0 not in log_versions(table)
    puts: list[str] = []
    original = type(table.io).put_if_absent

    def put_if_absent(io, uri, data):
        puts.append(uri)
        return original(io, uri, data)

    type(table.io).put_if_absent = put_if_absent
    try:
        with caplog.at_level("WARNING", logger="lakelog.store.delta.table"):
            opened, created = Table.open_or_create(table.location, table.schema, {})
        assert not created and opened.version == table.version and puts == []
        assert not [record for record in caplog.records if "hole" in record.getMessage()]
        fresh, created = Table.open_or_create(Location.of(root) / "absent", table.schema, {})
        assert created and fresh.version == 0 and len(puts) == 1
    finally:
        type(table.io).put_if_absent = original
    assert 0 not in log_versions(table)


def test_S9_5_a_new_process_allocating_a_producer_id_after_cleanup_puts_nothing_into_the_hole(root, monkeypatch, caplog):
    """__producer_ids cleans its log behind its checkpoints; a process that opens it afterwards (here: this
    process with its table cache emptied) allocates the next id without a create's put into the hole."""
    from lakelog.log import producer_ids

    first = [producer_ids.allocate_producer_id(root) for _ in range(3 * producer_ids.CHECKPOINT_INTERVAL)]
    table, _ = producer_ids._table(root)
    assert 0 not in log_versions(table), "cleanup removed version 0"
    monkeypatch.setattr(producer_ids, "_tables", {})
    with caplog.at_level("WARNING", logger="lakelog.store.delta.table"):
        assert producer_ids.allocate_producer_id(root) == first[-1] + 1
    assert not [record for record in caplog.records if "hole" in record.getMessage()]
    assert 0 not in log_versions(table)
