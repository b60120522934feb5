"""Maintenance on a passed-in clock (issue 12.6): vacuum's grace and log cleanup's retention are measured to the
`now_ms` the caller passes, so a test moves time on instead of sleeping (S9.1: removed files stay readable for
`file.delete.delay.ms`; S9.5: no safety rests on either).
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.partition import wall_clock_ms
from lakelog.log.partition_file import partition_files
from lakelog.store import Location
from lakelog.store.upkeep import maintenance
from lakelog.store.upkeep.maintenance import maintain, vacuum

pytestmark = pytest.mark.roots("local", "s3")

GRACE_MS = 60_000


@pytest.fixture
def log(root):
    create_topic(root, "t", 1, {"file.delete.delay.ms": GRACE_MS, "delete.retention.ms": GRACE_MS})
    partition = open_partition(root, "t", 0)
    partition.append(payload_table([b"kept"]))
    return partition


def names(table) -> set[str]:
    return {entry.name for entry in Location.of(table.uri).list() if entry.name.endswith(".parquet")}


def test_S9_1_vacuum_deletes_a_file_no_commit_holds_only_once_its_grace_passed_on_the_passed_in_clock(log):
    """A dead writer's file (written, never committed) may still be on its way to a commit: it stays for the
    table's grace, measured to the passed-in clock, then goes; the active file stays throughout."""
    table = log.table
    orphan = f"part-{table.version + 1:020d}-{uuid.uuid4().hex}.parquet"
    table.io.write_parquet(payload_table([b"never committed"]), table.child_uri(orphan))
    written_ms = wall_clock_ms()
    active = {entry.path for entry in partition_files(table)}
    assert vacuum(table, now_ms=written_ms + GRACE_MS - 5_000) == []
    assert names(table) == active | {orphan}
    assert vacuum(table, dry_run=True, now_ms=written_ms + GRACE_MS + 5_000) == [orphan]
    assert names(table) == active | {orphan}
    assert vacuum(table, now_ms=written_ms + GRACE_MS + 5_000) == [orphan]
    assert names(table) == active


def test_maintain_reads_the_passed_in_clock_for_log_cleanup(root):
    """At a checkpoint, maintain deletes commit files behind the kept checkpoints once they are older than the
    table's log retention on the clock it is given: none at now, the old ones an hour later."""
    create_topic(root, "c", 1, {"checkpoint.interval.commits": 2, "delta.log.retention.ms": 60_000})
    log_ = open_partition(root, "c", 0)
    for index in range(7):  # checkpoints at versions 1, 3, 5, 7: versions 0-4 are behind the two kept
        log_.append(payload_table([f"r{index}".encode()]))
    table = log_.table
    assert table.version == 7
    policy = dataclasses.replace(log_.maintenance, log_keep_checkpoints=2, log_keep_commits=2)
    assert maintain(table, policy, now_ms=wall_clock_ms()).log_files_deleted == 0
    assert maintain(table, policy, now_ms=wall_clock_ms() + 3_600_000).log_files_deleted > 0


def test_S9_1_vacuum_runs_every_so_many_commits_whatever_the_checkpoint_interval(root, monkeypatch):
    """Vacuum lists the data folder, so maintain runs it at the checkpoint that reaches each `vacuum_every_commits`
    commits: every 4th checkpoint at an interval of 5, every 2nd at 10, the same commits."""
    ran: list[int] = []
    monkeypatch.setattr(maintenance, "vacuum", lambda table, **kw: ran.append(table.version) or [])
    for interval in (5, 10):
        create_topic(root, f"i{interval}", 1, {"checkpoint.interval.commits": interval})
        log_ = open_partition(root, f"i{interval}", 0)
        policy = dataclasses.replace(log_.maintenance, vacuum_every_commits=20)
        ran.clear()
        for index in range(45):
            log_.append(payload_table([f"r{index}".encode()]))
            maintain(log_.table, policy)
        assert ran == [19, 39], interval
