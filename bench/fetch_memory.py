"""Peak memory of a consumer reading a large partition with a small fetch budget (fetch.max.bytes = 64 KB).

Two partitions of the same records (200 MB of 1 KB random values, 20 MB with --quick) in files of 50 MB:
one written as lakelog writes data files (row groups of ROW_GROUP_BYTES, lakelog.store.io.fileio), one with
each file a single row group (as compaction wrote them before). A fresh process per partition reads it
whole through a Consumer with fetch.max.bytes = 64 KB and prints its peak RSS during the read (Linux's
VmHWM, reset before its first poll), less its RSS before it (the interpreter, its imports, and what a
first read of a small topic started: the read pool's threads, their allocator heaps). A fetch of a file
of one row group decodes the whole file: its memory follows the file; a fetch by row group follows the
budget (and a row group, ROW_GROUP_BYTES). The ratio
is the row-grouped read's peak above the baseline / the one-group read's. Target: <= 0.25. Also printed:
each peak against the budget, and the time of each read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench import _common
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.store.io import fileio

TARGET = 0.25
BUDGET = 64 << 10
VALUE_BYTES = 1000
FILE_BYTES = 50 << 20
TOTAL_BYTES = 200 << 20
TOTAL_QUICK = 20 << 20
FILE_QUICK = 5 << 20
WARM_UP_RECORDS = 2000


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    total, per_file = (TOTAL_QUICK, FILE_QUICK) if quick else (TOTAL_BYTES, FILE_BYTES)
    with _common.session("fetch_memory", f"peak RSS of a {BUDGET >> 10} KB-budget consumer", root_parent, keep) as (
        result,
        root,
    ):
        _write(root, "grouped", total, per_file, fileio.ROW_GROUP_BYTES)
        _write(root, "warm_up", WARM_UP_RECORDS * VALUE_BYTES, WARM_UP_RECORDS * VALUE_BYTES, fileio.ROW_GROUP_BYTES)
        _write(root, "one_group", total, per_file, 1 << 40)
        rows = []
        peaks = {}
        for topic in ("one_group", "grouped"):
            measured = _measure(root, topic)
            peaks[topic] = measured["peak_mb"] - measured["start_mb"]
            rows.append(
                [
                    topic,
                    measured["files"],
                    measured["row_groups"],
                    measured["records"],
                    measured["start_mb"],
                    measured["peak_mb"],
                    peaks[topic],
                    f"{measured['seconds']:.1f}",
                ]
            )
        _common.print_table(
            ["partition", "files", "row groups", "records", "RSS at start MB", "peak RSS MB", "peak above start MB", "read s"],
            rows,
        )
        print(f"budget: fetch.max.bytes = {BUDGET} bytes; partition: {total >> 20} MB of values in files of {per_file >> 20} MB")
        result.add(
            "fetch_memory peak above start, by row group / whole file", peaks["grouped"] / max(peaks["one_group"], 1e-9), TARGET
        )
    return result


def _write(root: str, topic: str, total: int, per_file: int, row_group_bytes: int) -> None:
    """`total` bytes of random values in files of `per_file` bytes, with row groups of `row_group_bytes` (decoded)."""
    create_topic(root, topic, 1)
    log = open_partition(root, topic, 0)
    per_batch = per_file // VALUE_BYTES
    kept, fileio.ROW_GROUP_BYTES = fileio.ROW_GROUP_BYTES, row_group_bytes
    try:
        for _ in range(total // per_file):
            blob = os.urandom(per_batch * VALUE_BYTES)
            log.append(payload_table([blob[i * VALUE_BYTES : (i + 1) * VALUE_BYTES] for i in range(per_batch)]))
    finally:
        fileio.ROW_GROUP_BYTES = kept


_READER = """
import json, sys, time
from lakelog import Consumer, TopicPartition
from lakelog.log import open_partition
root, topic, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
WARM_UP_RECORDS = int(sys.argv[4])
def _status(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))
log = open_partition(root, topic, 0)
files = partition_files(log.table)
groups = sum(log.table.io.parquet_metadata(log.table.file_path(entry)).num_row_groups for entry in files)
end = log.log_end_offset()
config = {"lakelog.root": root, "fetch.max.bytes": budget, "max.partition.fetch.bytes": budget}
with Consumer(config) as consumer:
    # A first read of a small topic starts what every read needs (the read pool's threads, lazy imports).
    consumer.assign([TopicPartition("warm_up", 0, 0)])
    warm = 0
    while warm < WARM_UP_RECORDS:
        warm += sum(1 for message in consumer.consume(1000, timeout=1) if message.error() is None)
    consumer.assign([TopicPartition(topic, 0, 0)])
    start_kb = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as reset:  # the peak (VmHWM) counts from here
        reset.write("5")
    started = time.perf_counter()
    records = 0
    while records < end:
        for message in consumer.consume(1000, timeout=1):
            if message.error() is None:
                records += 1
    seconds = time.perf_counter() - started
peak_kb = _status("VmHWM")
print(json.dumps({"files": len(files), "row_groups": groups, "records": records, "seconds": seconds,
                  "start_mb": round(start_kb / 1024, 1), "peak_mb": round(peak_kb / 1024, 1)}))
"""


def _measure(root: str, topic: str) -> dict:
    """Read `topic` whole in a fresh process: what it read and its peak RSS (MB)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _READER, root, topic, str(BUDGET), str(WARM_UP_RECORDS)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reading {topic} failed after {time.perf_counter() - started:.0f} s: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
