"""S9.5: a writer paused for any time between its decision and its commit's put cannot commit into the past.

Log cleanup deletes commit files behind the kept checkpoints once they are older than the retention. A
writer that decided on version v and is then stopped (SIGSTOP, at the store's own stop point between the
last read and the put of v+1.json, for as long as the test likes) may find v+1.json deleted when it
resumes, and its put-if-absent of v+1.json succeeds into the hole. Nothing between the decision and the
put reads the log, so the one guard is the check after the put (`Commit._check_not_in_the_past`): a HEAD
of v.json, which cleanup deleted first, then the latest snapshot. The resumed writer must see a lost
race: the refill WARNING is logged, its stray commit file and its Parquet file are removed, and it
decides again on the latest snapshot (or its append is refused); no checkpoint is built from its stale
state. Real processes, real tables, a tiny retention, no sleep standing in for a bound.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.store import Location
from lakelog.store.delta.commit import STOP_BEFORE_COMMIT_PUT
from lakelog.store.upkeep.maintenance import cleanup_log
from processes.pause_workers import append_paused_before_the_put

pytestmark = [pytest.mark.roots("local", "s3"), pytest.mark.slow]

INTERVAL = 5
LATER_COMMITS = 3 * INTERVAL
REFILL_WARNING = "refilled a commit file log cleanup had deleted"


def all_rows(root: str, topic: str) -> list[dict]:
    log = open_partition(root, topic, 0)
    rows: list[dict] = []
    offset = log.log_start_offset()
    while offset < log.log_end_offset():
        fetched = log.fetch(offset, max_records=1_000_000, max_bytes=1 << 30)
        rows.extend(fetched.rows.to_pylist())
        offset = fetched.next_offset
    return rows


def stopped(pid: int) -> bool:
    """Whether the process is stopped (state T in /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def wait_until_stopped(process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not stopped(process.pid):
        assert process.is_alive(), "the writer exited before its stop point"
        assert time.monotonic() < deadline, "the writer never reached its stop point"
        time.sleep(0.05)


def test_S9_5_a_writer_stopped_before_its_put_past_log_cleanup_cannot_commit_into_the_hole(root, monkeypatch):
    create_topic(root, "t", 1, {"checkpoint.interval.commits": INTERVAL, "delta.log.retention.ms": 0})
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    table_uri = open_partition(root, "t", 0).table.uri
    # The spawned writer inherits this environment: it stops itself before its first commit put to the table.
    monkeypatch.setenv(STOP_BEFORE_COMMIT_PUT, table_uri)
    writer = context.Process(target=append_paused_before_the_put, args=(root, "t", b"paused", reports), daemon=True)
    writer.start()
    monkeypatch.delenv(STOP_BEFORE_COMMIT_PUT)
    try:
        wait_until_stopped(writer, 120)
        # The writer decided on version 0 and will put 1.json. Meanwhile: three checkpoints, then cleanup.
        log = open_partition(root, "t", 0)
        acknowledged = {}
        for index in range(LATER_COMMITS):
            value = f"later-{index}".encode()
            acknowledged[value] = log.append(payload_table([value])).base_offset
        cleanup_log(log.table, keep_checkpoints=2, retention_s=0)
        delta_log = Location.of(log.table.uri) / "_delta_log"
        assert not (delta_log / f"{0:020d}.json").exists() and not (delta_log / f"{1:020d}.json").exists(), (
            "cleanup left the version the writer decided on, or the one it will put"
        )
        os.kill(writer.pid, signal.SIGCONT)
        report = reports.get(timeout=120)
        assert report[0] != "crashed", report[1]
        assert reports.get(timeout=30) == ("done",)
        writer.join(30)
    finally:
        if writer.is_alive():
            os.kill(writer.pid, signal.SIGCONT)
            writer.kill()
    *_, attempts, warnings = report
    assert attempts[0] == 0, attempts
    assert any(REFILL_WARNING in warning for warning in warnings), warnings
    rows = all_rows(root, "t")
    values = [row["value"] for row in rows]
    if report[0] == "appended":
        # Told of the lost race, the writer decided again on the latest snapshot (S9.5): its record is there.
        offset, version = report[1], report[2]
        acknowledged[b"paused"] = offset
        assert len(attempts) >= 2 and version > LATER_COMMITS, (attempts, version)
    else:
        # Refused: its record must not be in the log.
        assert b"paused" not in values, report
    assert sorted(values) == sorted(acknowledged), "every acknowledged record exactly once, nothing else"
    assert {row["value"]: row["offset"] for row in rows} == acknowledged
    # The stray commit file was removed again, and the log loads from its checkpoints.
    assert not (delta_log / f"{1:020d}.json").exists()
    table = open_partition(root, "t", 0).table
    assert table.version == (report[2] if report[0] == "appended" else LATER_COMMITS)
    # Its Parquet file was removed: every data file in the folder is an active file of the latest snapshot.
    active = {entry.path for entry in partition_files(table)}
    on_disk = {entry.name for entry in Location.of(table.uri).list() if entry.name.endswith(".parquet")}
    assert on_disk == active, on_disk - active
