"""Does delta-rs drop old `txn` (app transaction) actions? A probe of the deltalake package, not a benchmark.

Run: `nice -n 19 ./dev sh python -m bench.delta_txn_expiry_probe` (about 10 s, a temp folder); run it again after a
deltalake upgrade. Output and conclusions: docs/decisions/bounded-state.md ("Why not delta-rs's own expiry").

Three tables, each with `delta.logRetentionDuration = interval 1 seconds` (so
`cleanup_metadata` really deletes the commits behind a checkpoint):

- default:  no `delta.setTransactionRetentionDuration`
- interval: `delta.setTransactionRetentionDuration = interval 1 seconds`
- bare:     `delta.setTransactionRetentionDuration = 1 seconds` (no "interval")

Version 1 commits txn actions for app ids
  none   (last_updated not given)
  old    (last_updated = now - 10 days)
  fresh  (last_updated = now)
  future (last_updated = now + 1 day)
  bulk.0 .. bulk.1999 (last_updated = now - 10 days): what a checkpoint's size is made of
A first checkpoint is written at once, then the probe sleeps 2 s, commits
version 2 (no txn) and writes a second checkpoint, then runs cleanup_metadata.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

IDS = ("none", "old", "fresh", "future")
BULK = 2000
DAY_MS = 86_400_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def versions(dt: DeltaTable) -> str:
    return " ".join(f"{app_id}={dt.transaction_version(app_id)}" for app_id in IDS + ("bulk.0",))


def checkpoint_facts(path: str, version: int) -> str:
    name = os.path.join(path, "_delta_log", f"{version:020d}.checkpoint.parquet")
    rows = pq.read_table(name, columns=["txn"]).column("txn").combine_chunks()
    txns = [t for t in rows.to_pylist() if t is not None]
    last = {t["appId"]: t["lastUpdated"] for t in txns if t["appId"] in IDS}
    return f"checkpoint v{version}: {os.path.getsize(name):,} bytes, {len(txns)} txn rows, lastUpdated of probe ids {last}"


def probe(kind: str, configuration: dict[str, str], root: str) -> None:
    path = os.path.join(root, kind)
    data = pa.table({"x": pa.array([1], pa.int64())})
    try:
        dt = DeltaTable.create(path, data.schema, configuration=configuration)
    except Exception as error:  # the probe reports what delta-rs refuses
        print(f"[{kind}] create refused: {type(error).__name__}: {error}")
        return
    print(f"[{kind}] configuration {dict(dt.metadata().configuration)}")
    t0 = now_ms()
    txns = [
        Transaction("none", 11),
        Transaction("old", 12, t0 - 10 * DAY_MS),
        Transaction("fresh", 13, t0),
        Transaction("future", 14, t0 + DAY_MS),
    ] + [Transaction(f"bulk.{i}", i, t0 - 10 * DAY_MS) for i in range(BULK)]
    write_deltalake(dt, data, mode="append", commit_properties=CommitProperties(app_transactions=txns))
    commit = [json.loads(line) for line in open(os.path.join(path, "_delta_log", f"{1:020d}.json"))]
    written = {a["txn"]["appId"]: a["txn"].get("lastUpdated") for a in commit if "txn" in a and a["txn"]["appId"] in IDS}
    print(f"[{kind}] commit 1 writes txn lastUpdated {written} (t0={t0})")
    print(f"[{kind}] same handle, right after the commit:      {versions(dt)}")
    dt.create_checkpoint()
    print(f"[{kind}] {checkpoint_facts(path, 1)}")
    time.sleep(2.0)
    print(f"[{kind}] same handle, 2 s later:                   {versions(dt)}")
    print(f"[{kind}] fresh handle, 2 s later (checkpoint v1):   {versions(DeltaTable(path))}")
    write_deltalake(dt, data, mode="append")
    dt.create_checkpoint()
    print(f"[{kind}] {checkpoint_facts(path, 2)}")
    dt.cleanup_metadata()
    left = sorted(os.listdir(os.path.join(path, "_delta_log")))
    print(f"[{kind}] after cleanup_metadata, _delta_log holds {left}")
    print(f"[{kind}] same handle after checkpoint v2 + cleanup: {versions(dt)}")
    print(f"[{kind}] fresh handle after checkpoint v2 + cleanup: {versions(DeltaTable(path))}")


def lookup_cost(root: str) -> None:
    """What one transaction_version of an absent id costs as the checkpoint's txn rows grow."""
    data = pa.table({"x": pa.array([1], pa.int64())})
    for count in (10, 10_000):
        path = os.path.join(root, f"cost-{count}")
        dt = DeltaTable.create(path, data.schema)
        txns = [Transaction(f"lakelog.producer.{i}.state", i) for i in range(count)]
        write_deltalake(dt, data, mode="append", commit_properties=CommitProperties(app_transactions=txns))
        dt.create_checkpoint()
        dt = DeltaTable(path)
        samples = []
        for i in range(30):
            started = time.perf_counter()
            dt.transaction_version(f"absent.{i}")
            samples.append(time.perf_counter() - started)
        samples.sort()
        print(f"[cost] {count:>6,} txn ids in the checkpoint: transaction_version(absent id) p50 {samples[15] * 1e3:.2f} ms")


def main() -> None:
    root = tempfile.mkdtemp(prefix="lakelog-txn-probe-")
    try:
        log = {"delta.logRetentionDuration": "interval 1 seconds"}
        probe("default", log, root)
        probe("interval", {**log, "delta.setTransactionRetentionDuration": "interval 1 seconds"}, root)
        probe("bare", {**log, "delta.setTransactionRetentionDuration": "1 seconds"}, root)
        lookup_cost(root)
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
