"""Opening a table while a writer's log cleanup deletes old commits (lakelog.store.delta.log.DeltaLog.load).

A cold open reads `_last_checkpoint`, the checkpoint it names, then the commits after it; cleanup may
delete what it chose in between (seen once in the main job with delta-rs's opener). It deletes only
behind a newer checkpoint, so opening again loads. A `_last_checkpoint` that is missing or names a
checkpoint that is gone sends the open to one listing of the log. A snapshot whose next commit files
cleanup deleted (a reader idle past the log retention) is reloaded from the newest checkpoint.
"""

from __future__ import annotations

import json

import pytest

from lakelog.errors import KafkaStorageError
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.store.delta import log as delta_log_module
from lakelog.store.delta.log import LOAD_ATTEMPTS, DeltaLog
from lakelog.store.delta.table import Table
from lakelog.store.upkeep.maintenance import cleanup_log

INTERVAL = 5


@pytest.fixture
def log(root):
    create_topic(root, "t", 1, {"checkpoint.interval.commits": INTERVAL})
    log = open_partition(root, "t", 0)
    for index in range(3 * INTERVAL):
        log.append(payload_table([b"%d" % index]))
    return log


def test_a_last_checkpoint_naming_a_deleted_checkpoint_opens_from_the_newest(log):
    table = log.table
    cleanup_log(table, keep_checkpoints=2, retention_s=0)
    table.io.write(table.child_uri("_delta_log/_last_checkpoint"), json.dumps({"version": INTERVAL - 1, "size": 1}).encode())
    opened = Table.open(table.location)
    assert opened.version == table.version and partition_files(opened) == partition_files(table)


def test_a_missing_last_checkpoint_after_cleanup_is_found_by_one_listing(log):
    table = log.table
    cleanup_log(table, keep_checkpoints=2, retention_s=0)
    table.io.delete(table.child_uri("_delta_log/_last_checkpoint"))
    listings = []
    names = DeltaLog.names

    def counted(self):
        listings.append(self.uri)
        return names(self)

    DeltaLog.names = counted
    try:
        opened = Table.open(table.location)
    finally:
        DeltaLog.names = names
    assert opened.version == table.version and partition_files(opened) == partition_files(table)
    assert len(listings) == 1


def test_a_checkpoint_that_vanished_under_the_open_is_opened_again_then_given_up(log, monkeypatch):
    table = log.table
    read = DeltaLog._read_checkpoint
    calls = []

    def vanishing(times):
        def read_checkpoint(self, version, parts):
            calls.append(version)
            if len(calls) <= times:
                raise delta_log_module._Vanished(f"checkpoint {version}")
            return read(self, version, parts)

        return read_checkpoint

    monkeypatch.setattr(DeltaLog, "_read_checkpoint", vanishing(LOAD_ATTEMPTS - 1))
    assert Table.open(table.location).version == table.version
    assert len(calls) == LOAD_ATTEMPTS
    calls.clear()
    monkeypatch.setattr(DeltaLog, "_read_checkpoint", vanishing(LOAD_ATTEMPTS))
    with pytest.raises(KafkaStorageError, match="deleted under each"):
        Table.open(table.location)
    assert len(calls) == LOAD_ATTEMPTS


def test_a_snapshot_whose_next_commits_were_cleaned_up_reloads_to_the_latest(log, root):
    idle = Table.open(log.table.location)
    behind = idle.version
    for index in range(3 * INTERVAL):
        log.append(payload_table([b"later-%d" % index]))
    cleanup_log(log.table, keep_checkpoints=2, retention_s=0)
    assert not idle.io.exists(idle.child_uri(f"_delta_log/{behind + 1:020d}.json"))
    assert idle.refresh() == log.table.version
    assert partition_files(idle) == partition_files(log.table)
