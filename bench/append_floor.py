"""An append against its physical floor: lakelog's own commit vs a synced Parquet put and one synced exclusive create.

The floor of a durable Delta append on a local root, measured in this process: pyarrow writes the Parquet
file (as lakelog does: to a buffer, then the file) and `fdatasync`s it, the table folder is `fsync`ed (the
file's name), a ~1 KB commit file is created with `O_CREAT|O_EXCL` (put-if-absent) in `_delta_log` and
`fdatasync`ed, and `_delta_log` is `fsync`ed (the commit's name): the syncs lakelog makes before it says a
record is there (lakelog/store/io/local_sync.py). The same floor without its syncs is printed beside ("floor
unsynced"; its ratio to the synced floor is what durability costs at the floor). Against the floor,
alternating call by call so machine load hits all alike:

(a) `PartitionLog.append` of 1 record (target p50 <= 2.0x the floor) and of a prepared 10,000-record
    batch (target <= 1.5x);
(b) `Producer.produce` + `flush` of 1 record (target <= 2.0x);
(c) plain delta-rs, `write_deltalake(handle, rows, mode="append")`, printed beside as the peer.

Each round runs the steps in a shuffled order (seeded): a fixed or alternating order would put one step
always right after delta-rs, whose threads are still winding down when it returns (on this 2-core
machine that step's p50 rose by half), so what one step leaves behind hits every step alike too.

Then (d): the append p50 of a partition with 100,000 commit files kept in `_delta_log` (none cleaned:
a retention longer than the run) against one with 100, interleaved (target <= 1.1): nothing in the append
path may grow with the log's length. The 100,000 commit files are written directly (a copy of one real
commit, with its own add action each), which is what a year of commits leaves; `--quick` keeps 10,000.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench import _common
from lakelog import Producer
from lakelog.log import BatchHeader, allocate_producer_id, create_topic, open_partition, payload_table
from lakelog.log.records import PARTITION_SCHEMA, conform_payload, stamp
from lakelog.store import Table
from lakelog.store.io.fileio import FileIO

ROUNDS = 300
ROUNDS_QUICK = 60
BIG = 10_000
BIG_ROUNDS = 30
BIG_ROUNDS_QUICK = 8
KEPT_MANY = 100_000
KEPT_MANY_QUICK = 10_000
KEPT_FEW = 100
LONG_LOG_ROUNDS = 200
LONG_LOG_ROUNDS_QUICK = 60
VALUE_BYTES = 100
# The steps' order in each round is shuffled with this seed (see the module docstring).
SEED = 22
# A long retention and interval: nothing is cleaned or checkpointed under the measured appends of (d).
NO_CLEANUP = {"delta.log.retention.ms": 30 * 86_400_000, "checkpoint.interval.commits": 1_000_000}


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    with _common.session(
        "append_floor", "lakelog's commit against the floor (synced Parquet put + synced O_EXCL create)", root_parent, keep
    ) as (
        result,
        root,
    ):
        rounds = ROUNDS_QUICK if quick else ROUNDS
        _single(root, rounds, result)
        _batch(root, BIG_ROUNDS_QUICK if quick else BIG_ROUNDS, result)
        _long_log(root, KEPT_MANY_QUICK if quick else KEPT_MANY, LONG_LOG_ROUNDS_QUICK if quick else LONG_LOG_ROUNDS, result)
    return result


class Plain:
    """Plain delta-rs: write_deltalake to a handle kept open (as FINDINGS.md measured it)."""

    def __init__(self, uri: str) -> None:
        # delta-rs's own table: one lakelog created declares a writer feature delta-rs refuses to write.
        self.handle = DeltaTable.create(uri, PARTITION_SCHEMA)

    def append(self, rows: pa.Table) -> float:
        started = time.perf_counter()
        write_deltalake(self.handle, rows, mode="append")
        return time.perf_counter() - started


class SyncedFloor:
    """The floor of a durable append: the Parquet file and its name synced, then the commit file and its name.

    The file is encoded as lakelog encodes a data file (`FileIO._parquet_bytes`: page checksums and all), so
    the floor moves with the encoding; `synced=False` is the same floor without its four syncs.
    """

    def __init__(self, folder: str, synced: bool = True) -> None:
        self.folder = folder
        self.log = f"{folder}/_delta_log"
        os.makedirs(self.log, exist_ok=True)
        self.synced = synced
        self.commit = json.dumps({"commitInfo": {"x": "y" * 900}}).encode()
        self.version = 0

    def append(self, rows: pa.Table) -> float:
        started = time.perf_counter()
        data = FileIO._parquet_bytes(rows, "snappy")
        with open(f"{self.folder}/part-{uuid.uuid4().hex}.parquet", "xb") as out:
            out.write(data)
            if self.synced:
                out.flush()
                os.fdatasync(out.fileno())
        if self.synced:
            _sync_folder(self.folder)
        descriptor = os.open(f"{self.log}/{self.version:020d}.json", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(descriptor, self.commit)
        if self.synced:
            os.fdatasync(descriptor)
        os.close(descriptor)
        if self.synced:
            _sync_folder(self.log)
        self.version += 1
        return time.perf_counter() - started


def _sync_folder(folder: str) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(descriptor)
    os.close(descriptor)


def _timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _single(root: str, rounds: int, result: _common.Result) -> None:
    create_topic(root, "one")
    create_topic(root, "produced")
    log = open_partition(root, "one", 0)
    producer_id = allocate_producer_id(root, "bench-floor")
    producer = Producer({"lakelog.root": root, "linger.ms": 0, "client.id": "bench-floor"})
    floor, unsynced, plain = (
        SyncedFloor(f"{root}/floor-1"),
        SyncedFloor(f"{root}/unsynced-1", synced=False),
        Plain(f"{root}/plain-1"),
    )
    payload = payload_table([b"v" * VALUE_BYTES])
    rows = stamp(conform_payload(payload), 0, BatchHeader(), time.time_ns() // 1000)
    times: dict[str, list[float]] = {"floor": [], "floor unsynced": [], "append": [], "produce": [], "delta-rs": []}
    value = b"v" * VALUE_BYTES

    def produce() -> None:
        producer.produce("produced", value=value, partition=0)
        producer.flush()

    order = random.Random(SEED)
    for index in range(rounds + 5):
        header = BatchHeader(producer_id, 0, index)
        steps = [
            ("floor", lambda: floor.append(rows)),
            ("floor unsynced", lambda: unsynced.append(rows)),
            ("append", lambda header=header: _timed(lambda: log.append(payload, header))),
            ("produce", lambda: _timed(produce)),
            ("delta-rs", lambda: plain.append(rows)),
        ]
        order.shuffle(steps)
        for name, step in steps:
            took = step()
            if index >= 5:
                times[name].append(took)
    producer.close()
    p50 = {name: _common.median(values) for name, values in times.items()}
    _common.print_table(
        ["1 record", "p50 ms", "p95 ms", "x floor"],
        [[name, p50[name] * 1e3, _common.percentile(times[name], 95) * 1e3, p50[name] / p50["floor"]] for name in times],
    )
    result.add("append_floor PartitionLog.append/floor p50 @1", p50["append"] / p50["floor"], 2.0)
    result.add("append_floor Producer produce+flush/floor p50 @1", p50["produce"] / p50["floor"], 2.0)
    result.add("append_floor plain delta-rs/floor p50 @1 (the peer)", p50["delta-rs"] / p50["floor"], None)
    result.add("append_floor floor/floor unsynced p50 @1 (what the syncs cost)", p50["floor"] / p50["floor unsynced"], None)


def _batch(root: str, rounds: int, result: _common.Result) -> None:
    create_topic(root, "big")
    log = open_partition(root, "big", 0)
    floor, plain = SyncedFloor(f"{root}/floor-big"), Plain(f"{root}/plain-big")
    payload = conform_payload(payload_table([b"v" * VALUE_BYTES] * BIG))
    rows = stamp(payload, 0, BatchHeader(), time.time_ns() // 1000)
    times: dict[str, list[float]] = {"floor": [], "append": [], "delta-rs": []}
    order = random.Random(SEED)
    for index in range(rounds + 2):
        steps = [
            ("floor", lambda: floor.append(rows)),
            ("append", lambda: _timed(lambda: log.append(payload))),
            ("delta-rs", lambda: plain.append(rows)),
        ]
        order.shuffle(steps)
        for name, step in steps:
            took = step()
            if index >= 2:
                times[name].append(took)
    p50 = {name: _common.median(values) for name, values in times.items()}
    _common.print_table(
        [f"{BIG:,} records", "p50 ms", "x floor"], [[name, p50[name] * 1e3, p50[name] / p50["floor"]] for name in times]
    )
    result.add(f"append_floor PartitionLog.append/floor p50 @{BIG}", p50["append"] / p50["floor"], 1.5)
    result.add(f"append_floor plain delta-rs/floor p50 @{BIG} (the peer)", p50["delta-rs"] / p50["floor"], None)


def _long_log(root: str, kept: int, rounds: int, result: _common.Result) -> None:
    """Append p50 with `kept` commit files in the log against KEPT_FEW, interleaved."""
    logs = {}
    for name, count in (("long", kept), ("young", KEPT_FEW)):
        create_topic(root, name, 1, NO_CLEANUP)
        log = open_partition(root, name, 0)
        log.append(payload_table([b"first"]))
        _fill(log.table, count)
        logs[name] = open_partition(root, name, 0)
    payload = payload_table([b"v" * VALUE_BYTES])
    times: dict[str, list[float]] = {"long": [], "young": []}
    for index in range(rounds + 5):
        order = ("long", "young") if index % 2 else ("young", "long")
        for name in order:
            took = _timed(lambda log=logs[name]: log.append(payload))
            if index >= 5:
                times[name].append(took)
    p50 = {name: _common.median(values) for name, values in times.items()}
    print(
        f"   {kept:,} commit files kept: append p50 {p50['long'] * 1e3:.2f} ms; {KEPT_FEW} kept: {p50['young'] * 1e3:.2f} ms"
        f" (versions {logs['long'].version:,} / {logs['young'].version:,})"
    )
    result.add(f"append_floor append p50 {kept} commit files kept/{KEPT_FEW}", p50["long"] / p50["young"], 1.1)


def _fill(table: Table, count: int) -> None:
    """Commit files up to version `count`, each a copy of the table's last commit without its add action.

    Written directly into `_delta_log`: what `count` commits leave there (with compaction and retention keeping
    the active files few), at a fraction of the time. The state they leave is the table's as it was."""
    last = table.version
    text = table.io.read(table.child_uri(f"_delta_log/{last:020d}.json")).decode()
    actions = [json.loads(line) for line in text.splitlines() if line.strip()]
    text = "\n".join(json.dumps(action) for action in actions if "add" not in action)
    for version in range(last + 1, count + 1):
        with open(table.child_uri(f"_delta_log/{version:020d}.json"), "w") as out:
            out.write(text)


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
