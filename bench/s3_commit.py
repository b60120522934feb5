"""lakelog's own commit on an S3 store: requests per append, counted at the emulator, and latency against delta-rs.

The store is moto's S3 server on loopback (tests/s3emulator.py), started here. Requests are counted from
the server's own request log (one line per request: method, path, status), so the count is the store's,
not the client's.

(a) Storage requests per 1-record append in steady state, for `PartitionLog.append` and for a `Producer`
    produce + flush (target 3: PUT the Parquet file, PUT the commit with `If-None-Match: *`, HEAD of the
    previous version for S9.5), with plain delta-rs `write_deltalake(handle, ...)` printed beside.
(b) Append latency, p50, `PartitionLog.append` against plain delta-rs on the same emulator, alternating
    call by call, at 1 record and 10,000 (target <= 0.5 each), and through the Producer at 1 record.
"""

from __future__ import annotations

import collections
import os
import re
import sys
import time
import uuid

from deltalake import DeltaTable, write_deltalake

from bench import _common
from lakelog import Producer
from lakelog.log import BatchHeader, allocate_producer_id, create_topic, open_partition, payload_table
from lakelog.log.records import conform_payload, stamp
from lakelog.store import check_root

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from s3emulator import S3Emulator  # noqa: E402 - the emulator is test tooling, shared with the benchmark

BUCKET = "lakelog-bench-commit"
VALUE_BYTES = 100
COUNTED = 50
COUNTED_QUICK = 20
LATENCY = {1: 100, 10_000: 20}
LATENCY_QUICK = {1: 30, 10_000: 6}
_REQUEST = re.compile(r'"(GET|PUT|HEAD|POST|DELETE) (\S+) HTTP/[\d.]+" (\d{3})')


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("s3_commit")
    with S3Emulator() as emulator, emulator.exported():
        emulator.create_bucket(BUCKET)
        root = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
        print(f"== s3_commit: moto on {emulator.endpoint_url}, root {root}")
        check_root(root)
        _requests(emulator, root, COUNTED_QUICK if quick else COUNTED, result)
        _latency(root, LATENCY_QUICK if quick else LATENCY, result)
    return result


class RequestLog:
    """Requests the emulator logged since `mark()`, by method (and LIST for a GET of a bucket listing)."""

    def __init__(self, emulator: S3Emulator) -> None:
        self.path = emulator.log_path
        self.offset = 0

    def mark(self) -> None:
        self.offset = os.path.getsize(self.path)

    def since(self) -> collections.Counter[str]:
        time.sleep(0.1)  # the server writes its log line after answering
        with open(self.path, errors="replace") as log:
            log.seek(self.offset)
            text = log.read()
        counts: collections.Counter[str] = collections.Counter()
        for method, path, _status in _REQUEST.findall(text):
            if "/moto-api/" in path:
                continue
            listing = method == "GET" and ("list-type=" in path or path.rstrip("/").count("/") <= 1 or "prefix=" in path)
            counts["LIST" if listing else method] += 1
        return counts


def _requests(emulator: S3Emulator, root: str, count: int, result: _common.Result) -> None:
    """Requests of each of `count` appends (a checkpoint's commit among them pays for the checkpoint too)."""
    requests = RequestLog(emulator)
    create_topic(root, "counted")
    create_topic(root, "produced")
    log = open_partition(root, "counted", 0)
    producer_id = allocate_producer_id(root, "bench-s3-commit")
    payload = payload_table([b"v" * VALUE_BYTES])
    producer = Producer({"lakelog.root": root, "linger.ms": 0, "client.id": "bench-s3-commit"})
    rows = stamp(conform_payload(payload), 0, BatchHeader(), time.time_ns() // 1000)
    # A table lakelog created refuses other writers (its writer feature): delta-rs writes to a table of its own.
    storage = log.table.io.delta_options()
    plain_uri = f"{root}/plain-delta-rs"
    write_deltalake(plain_uri, rows, mode="append", storage_options=storage)
    handle = DeltaTable(plain_uri, storage_options=storage)

    def produce() -> None:
        producer.produce("produced", value=b"v" * VALUE_BYTES, partition=0)
        producer.flush()

    sequence = iter(range(1 << 30))
    calls = {
        "PartitionLog.append": lambda: log.append(payload, BatchHeader(producer_id, 0, next(sequence))),
        "Producer produce+flush": produce,
        "plain delta-rs": lambda: write_deltalake(handle, rows, mode="append"),
    }
    counted: dict[str, list[collections.Counter[str]]] = {name: [] for name in calls}
    for name, call in calls.items():
        for _ in range(5):
            call()
        for _ in range(count):
            requests.mark()
            call()
            counted[name].append(requests.since())
    producer.close()

    def line(name: str) -> list[object]:
        each = [sum(counts.values()) for counts in counted[name]]
        total: collections.Counter[str] = sum(counted[name], collections.Counter())
        detail = ", ".join(f"{total[kind] / count:.2f} {kind}" for kind in sorted(total))
        return [name, _common.median(each), sum(each) / count, max(each), detail]

    lines = [line(name) for name in calls]
    _common.print_table(["1-record append", "p50 requests", "mean", "max", "mean by kind"], lines)
    print("   (the mean includes a checkpoint's commit: the checkpoint, _last_checkpoint and the log cleanup's listing)")
    for (name, p50, mean, _, _), target in zip(lines, (3.0, 3.0, None), strict=True):
        result.add(f"s3_commit requests per {name} @1, p50", p50, target)
        result.add(f"s3_commit requests per {name} @1, mean over {count}", mean, None)


def _latency(root: str, rounds: dict[int, int], result: _common.Result) -> None:
    producer_id = allocate_producer_id(root, "bench-s3-latency")
    producer = Producer({"lakelog.root": root, "linger.ms": 0, "client.id": "bench-s3-latency"})
    create_topic(root, "latency-produced")
    table_rows = []
    for size, batches in rounds.items():
        topic = f"latency-{size}"
        create_topic(root, topic)
        log = open_partition(root, topic, 0)
        payload = payload_table([b"v" * VALUE_BYTES] * size)
        rows = stamp(conform_payload(payload), 0, BatchHeader(), time.time_ns() // 1000)
        storage = log.table.io.delta_options()
        plain_uri = f"{root}/plain-latency-{size}"
        write_deltalake(plain_uri, rows, mode="append", storage_options=storage)
        handle = DeltaTable(plain_uri, storage_options=storage)
        times: dict[str, list[float]] = {"append": [], "produce": [], "delta-rs": []}
        sequence = 0

        def produce() -> None:
            producer.produce("latency-produced", value=b"v" * VALUE_BYTES, partition=0)
            producer.flush()

        for batch in range(batches + 3):
            header = BatchHeader(producer_id, 0, sequence)
            steps = [
                ("append", lambda log=log, payload=payload, header=header: log.append(payload, header)),
                ("delta-rs", lambda handle=handle, rows=rows: write_deltalake(handle, rows, mode="append")),
            ]
            if size == 1:
                steps.append(("produce", produce))
            if batch % 2:
                steps.reverse()
            for name, step in steps:
                started = time.perf_counter()
                step()
                if batch >= 3:
                    times[name].append(time.perf_counter() - started)
            sequence += size
        p50 = {name: _common.median(values) for name, values in times.items() if values}
        table_rows.append([f"{size:,}", *(p50.get(name, float("nan")) * 1e3 for name in ("append", "produce", "delta-rs"))])
        result.add(f"s3_commit PartitionLog.append/plain delta-rs p50 @{size}", p50["append"] / p50["delta-rs"], 0.5)
        if size == 1:
            result.add("s3_commit Producer produce+flush/plain delta-rs p50 @1", p50["produce"] / p50["delta-rs"], 0.5)
    producer.close()
    _common.print_table(["records", "append p50 ms", "produce+flush p50 ms", "plain delta-rs p50 ms"], table_rows)


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
