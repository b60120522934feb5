"""S9.5: a writer paused for any time between its decision and its put cannot commit into the past.

Log cleanup deletes commit files behind the kept checkpoints once they are older than the retention. A
writer that decided on version v and is then paused (here SIGSTOP, for as long as the test likes) may
find v+1.json deleted when it resumes, and its put-if-absent of v+1.json would succeed into the hole.
`Table._commit` checks after every put that the file is the log's version (a HEAD of v.json, which
cleanup deletes first, then the latest snapshot), so the writer sees a lost race and decides again on
the latest snapshot; no checkpoint is built from its stale state (lakelog writes checkpoints itself,
after the check). Real processes, real tables, a tiny retention, no sleep standing in for a bound.
"""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest

from lakelog.log import create_topic, open_partition, payload_table
from lakelog.store import Location
from lakelog.store.maintenance import cleanup_log
from processes.pause_workers import append_paused_before_the_put

pytestmark = [pytest.mark.roots("local", "s3"), pytest.mark.slow]

INTERVAL = 5
LATER_COMMITS = 3 * INTERVAL


def all_rows(root: str, topic: str) -> list[dict]:
    log = open_partition(root, topic, 0)
    rows: list[dict] = []
    offset = log.log_start_offset()
    while offset < log.log_end_offset():
        fetched = log.fetch(offset, max_records=1_000_000, max_bytes=1 << 30)
        rows.extend(fetched.rows.to_pylist())
        offset = fetched.next_offset
    return rows


def test_S9_5_a_writer_paused_past_log_cleanup_cannot_commit_into_the_hole_it_left(root):
    create_topic(root, "t", 1, {"checkpoint.interval.commits": INTERVAL, "delta.log.retention.ms": 0})
    context = multiprocessing.get_context("spawn")
    paused, reports = context.Event(), context.Queue()
    writer = context.Process(target=append_paused_before_the_put, args=(root, "t", b"paused", paused, reports), daemon=True)
    writer.start()
    try:
        assert paused.wait(120), "the writer never reached its pause point"
        # The writer decided on version 0 and will put 1.json. Meanwhile: three checkpoints, then cleanup.
        log = open_partition(root, "t", 0)
        acknowledged = {}
        for index in range(LATER_COMMITS):
            value = f"later-{index}".encode()
            acknowledged[value] = log.append(payload_table([value])).base_offset
        cleanup_log(log.table, keep_checkpoints=2, retention_s=0)
        delta_log = Location.of(log.table.uri) / "_delta_log"
        assert not (delta_log / f"{1:020d}.json").exists(), "cleanup left the version the writer will put"
        os.kill(writer.pid, signal.SIGCONT)
        report = reports.get(timeout=120)
        assert report[0] != "crashed", report[1]
        assert reports.get(timeout=30) == ("done",)
        writer.join(30)
    finally:
        if writer.is_alive():
            os.kill(writer.pid, signal.SIGCONT)
            writer.kill()
    rows = all_rows(root, "t")
    values = [row["value"] for row in rows]
    if report[0] == "appended":
        # Told of the lost race, the writer decided again on the latest snapshot (S9.5): its record is there.
        _, offset, version, attempts = report
        acknowledged[b"paused"] = offset
        assert attempts[0] == 0 and len(attempts) >= 2, attempts
        assert version > LATER_COMMITS
    else:
        # Refused: its record must not be in the log.
        assert b"paused" not in values, report
    assert sorted(values) == sorted(acknowledged), "every acknowledged record exactly once, nothing else"
    assert {row["value"]: row["offset"] for row in rows} == acknowledged
    # The stray commit file was removed again, and the log loads from its checkpoints.
    assert not (delta_log / f"{1:020d}.json").exists()
    assert open_partition(root, "t", 0).table.version == (report[2] if report[0] == "appended" else LATER_COMMITS)
