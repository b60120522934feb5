"""S9.1, S9.2, S8.2: retention and delete_records run beside appenders and each other, as real processes.

Two appender processes append batches to one partition while two processes
enforce `retention.bytes` in a loop and one moves the log start with
delete_records. Whatever the interleaving: every append lands once with dense
offsets, the log start recorded in the table only moves forward from commit to
commit, every offset from the log start to the log end is in exactly one
active file with the row its appender wrote, and no file at or above the LSO
was removed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lakelog.log import create_topic, open_partition
from lakelog.log.partition import LOG_START_OFFSET_APP_ID
from lakelog.log.partition_file import partition_files

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
BATCHES = 25

APPENDER = """
import sys
from lakelog.log import open_partition, payload_table
root, topic, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log = open_partition(root, topic, 0)
for n in range(count):
    result = log.append(payload_table([f"{name}-{n}-0".encode(), f"{name}-{n}-1".encode()]))
    print(result.base_offset, f"{name}-{n}", flush=True)
"""

TRIMMER = """
import sys
from lakelog.log import open_partition
from lakelog.log.retention import delete_records, enforce_retention
root, topic, mode, end = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log = open_partition(root, topic, 0)
done = False
while not done:  # until the appenders are through, and once more after
    log.refresh()
    done = log.log_end_offset() >= end
    if mode == "retention":
        trim = enforce_retention(log, 0)
        print("retention", None if trim is None else trim.log_start_offset, flush=True)
    else:
        target = (log.log_start_offset() + log.last_stable_offset()) // 2
        print("delete_records", target, delete_records(log, target), flush=True)
"""


def run(code: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_S9_1_S8_2_retention_and_delete_records_beside_appenders(root):
    create_topic(root, "busy", 1, {"retention.ms": -1, "retention.bytes": 30_000})
    appenders = [run(APPENDER, root, "busy", name, BATCHES) for name in ("a", "b")]
    trimmers = [run(TRIMMER, root, "busy", mode, 4 * BATCHES) for mode in ("retention", "retention", "delete_records")]
    landed = {}
    for process in appenders:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        for line in out.splitlines():
            base, batch = line.split()
            landed[int(base)] = batch
    for process in trimmers:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        print(out)

    # Every append landed once, with dense offsets.
    assert len(landed) == 2 * BATCHES and sorted(landed) == list(range(0, 4 * BATCHES, 2))
    log = open_partition(root, "busy", 0)
    assert log.log_end_offset() == 4 * BATCHES
    start = log.log_start_offset()
    assert start > 0  # retention.bytes and delete_records both had work
    # Each offset from the log start to the end is in exactly one active file, holding its appender's row.
    rows = log.fetch(start, max_records=1_000_000, max_bytes=1 << 30).rows.to_pylist()
    assert [row["offset"] for row in rows] == list(range(start, 4 * BATCHES))
    for row in rows:
        base = row["offset"] - row["offset"] % 2
        assert row["value"] == f"{landed[base]}-{row['offset'] % 2}".encode()
    files = partition_files(log.table)
    assert all(earlier.max_offset + 1 == later.min_offset for earlier, later in zip(files, files[1:], strict=False))
    assert files[0].min_offset <= start <= files[0].max_offset + 1
    # The log start only moved forward, commit by commit (S9.1).
    recorded = []
    for entry in sorted(log.table.io.list(log.table.child_uri("_delta_log")), key=lambda entry: entry.name):
        if entry.name.endswith(".json"):
            for line in log.table.io.read(entry.uri).decode().splitlines():
                action = json.loads(line)
                if "txn" in action and action["txn"]["appId"] == LOG_START_OFFSET_APP_ID:
                    recorded.append(action["txn"]["version"])
    assert recorded and recorded == sorted(recorded) and recorded[-1] <= start
