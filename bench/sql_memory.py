"""Peak memory of `lakelog sql`'s `SELECT count(*)` over a large topic: the topic loaded whole into Arrow (as
`lakelog sql` read topics before its tables were streams) against the stream DuckDB reads now (lakelog.sql).

One topic of 200 MB of 1 KB random values (20 MB with --quick) in files of 50 MB (5 MB). A fresh process per way
runs the count and prints its peak RSS during the query (Linux's VmHWM, reset just before it), less its RSS before
it (the interpreter, its imports, the root opened). The ratio is the stream's peak above start / the whole
table's. Target: <= 0.25. Also printed: each peak, the topic's size and the time of each query.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench import _common
from lakelog.log import create_topic, open_partition, payload_table

TARGET = 0.25
VALUE_BYTES = 1000
FILE_BYTES = 50 << 20
TOTAL_BYTES = 200 << 20
TOTAL_QUICK = 20 << 20
FILE_QUICK = 5 << 20
TOPIC = "big"


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    total, per_file = (TOTAL_QUICK, FILE_QUICK) if quick else (TOTAL_BYTES, FILE_BYTES)
    with _common.session("sql_memory", "peak RSS of lakelog sql's count(*) over a large topic", root_parent, keep) as (
        result,
        root,
    ):
        _write(root, total, per_file)
        rows, peaks = [], {}
        for way in ("whole", "stream"):
            measured = _measure(root, way)
            peaks[way] = measured["peak_mb"] - measured["start_mb"]
            rows.append(
                [way, measured["count"], measured["start_mb"], measured["peak_mb"], peaks[way], f"{measured['seconds']:.1f}"]
            )
        _common.print_table(["table", "count(*)", "RSS at start MB", "peak RSS MB", "peak above start MB", "query s"], rows)
        print(f"topic: {total >> 20} MB of values in files of {per_file >> 20} MB")
        result.add("sql_memory count(*) peak above start, stream / whole", peaks["stream"] / max(peaks["whole"], 1e-9), TARGET)
    return result


def _write(root: str, total: int, per_file: int) -> None:
    create_topic(root, TOPIC, 1)
    log = open_partition(root, TOPIC, 0)
    per_batch = per_file // VALUE_BYTES
    for _ in range(total // per_file):
        blob = os.urandom(per_batch * VALUE_BYTES)
        log.append(payload_table([blob[i * VALUE_BYTES : (i + 1) * VALUE_BYTES] for i in range(per_batch)]))


_QUERY = """
import json, sys, time
import duckdb
from lakelog import sql
from lakelog.store import open_root
root, topic, way = open_root(sys.argv[1]), sys.argv[2], sys.argv[3]
def _status(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))
sql.query(root, "SELECT 1")  # imports and the root's first listing happen before the start
start_kb = _status("VmRSS")
with open("/proc/self/clear_refs", "w") as reset:  # the peak (VmHWM) counts from here
    reset.write("5")
started = time.perf_counter()
if way == "whole":  # as lakelog sql registered a topic before: its rows read into one Arrow table
    with duckdb.connect() as connection:
        connection.register(topic, sql.read_committed(root, topic))
        count = connection.sql(f"SELECT count(*) FROM {topic}").fetchall()[0][0]
else:
    count = sql.query(root, f"SELECT count(*) AS n FROM {topic}").column("n")[0].as_py()
seconds = time.perf_counter() - started
peak_kb = _status("VmHWM")
print(json.dumps({"count": count, "seconds": seconds, "start_mb": round(start_kb / 1024, 1), "peak_mb": round(peak_kb / 1024, 1)}))
"""


def _measure(root: str, way: str) -> dict:
    """Count the topic's rows one way in a fresh process: the count, its time and its RSS (MB)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _QUERY, root, TOPIC, way], capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {way} count failed after {time.perf_counter() - started:.0f} s: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
