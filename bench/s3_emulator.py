"""Roots on an S3 store: append, read_committed and commit rates against baselines on the same emulator.

The store is moto's S3 server on loopback (tests/s3emulator.py), started here; every number is a ratio
against a baseline run in the same process on the same emulator, so the emulator's own speed cancels out.

(a) Idempotent `PartitionLog.append` vs a plain `write_deltalake(handle, rows, mode="append")` of the same
    stamped rows to a Delta table on the same emulator, alternating batch by batch, at 1 record
    (target <= 1.3) and 10k records (target <= 1.1) per batch.
(b) A read_committed `PartitionLog.fetch` of a whole partition (transactions of two producers, one in ten
    aborted) vs a raw pyarrow scan of the snapshot's active files through the same S3 filesystem
    (`pyarrow.dataset`, all threads). Target <= 1.2.
(c) Commits per second on one partition: 1 writer alone, then 4 writer processes at once (idempotent
    1-record appends, lost races retried as the log does). Printed, no target: a conditional put on an
    object store serialises one partition's commits (FINDINGS.md: tens per second at best on S3).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import uuid

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable, write_deltalake

from bench import _common
from lakelog.log import (
    READ_COMMITTED,
    BatchHeader,
    ControlType,
    PartitionLog,
    allocate_producer_id,
    create_topic,
    open_partition,
    payload_table,
)
from lakelog.log.partition_file import partition_files
from lakelog.log.records import PARTITION_SCHEMA, conform_payload, stamp
from lakelog.log.verification import _UNVERIFIED
from lakelog.store import check_root
from lakelog.store.upkeep.maintenance import is_checkpoint_version

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from s3emulator import S3Emulator  # noqa: E402 - the emulator is test tooling, shared with the benchmark

BUCKET = "lakelog-bench"
APPEND_SIZES = {1: 1.3, 10_000: 1.1}
APPEND_BATCHES = {1: 120, 10_000: 30}
APPEND_BATCHES_QUICK = {1: 30, 10_000: 8}
SCAN_TARGET = 1.2
SCAN_TRANSACTIONS = 60
SCAN_TRANSACTIONS_QUICK = 12
SCAN_ROWS_PER_TXN = 5_000
SCAN_ROUNDS = 5
RATE_SECONDS = 20
RATE_SECONDS_QUICK = 6
WRITERS = 4
VALUE_BYTES = 100


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("s3_emulator")
    with S3Emulator() as emulator, emulator.exported():
        emulator.create_bucket(BUCKET)
        root = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
        print(f"== s3_emulator: moto on {emulator.endpoint_url} (started in {emulator.start_seconds:.1f} s), root {root}")
        started = time.perf_counter()
        check_root(root)
        print(f"   store check (a conditional put made twice): {(time.perf_counter() - started) * 1e3:.0f} ms")
        _appends(root, APPEND_BATCHES_QUICK if quick else APPEND_BATCHES, result)
        _scan(root, SCAN_TRANSACTIONS_QUICK if quick else SCAN_TRANSACTIONS, result)
        _commit_rates(root, RATE_SECONDS_QUICK if quick else RATE_SECONDS)
    return result


# -- (a) append vs write_deltalake -----------------------------------------------------------------------


def _appends(root: str, batches: dict[int, int], result: _common.Result) -> None:
    producer_id = allocate_producer_id(root, "bench-s3")
    rows = []
    for size, target in APPEND_SIZES.items():
        topic = f"append-{size}"
        config = create_topic(root, topic)
        log = open_partition(root, topic, 0)
        # delta-rs's own table (one lakelog created declares a writer feature delta-rs refuses to write).
        baseline = check_root(root) / f"baseline-{size}"
        options = baseline.io.delta_options()
        handle = DeltaTable.create(
            baseline.uri, PARTITION_SCHEMA, configuration=config.table_configuration(), storage_options=options
        )
        interval = config.values["checkpoint.interval.commits"]
        payload = payload_table([b"v" * VALUE_BYTES] * size)
        conformed = conform_payload(payload)
        lakelog_times, baseline_times = [], []
        sequence = 0
        for batch in range(2 + batches[size]):
            header = BatchHeader(producer_id, 0, sequence)
            stamped = stamp(conformed, sequence, header, time.time_ns() // 1000)

            def lakelog_append(
                log: PartitionLog = log, payload: pa.Table = payload, header: BatchHeader = header
            ) -> float:  # defaults bind this iteration's values (called within it)
                started = time.perf_counter()
                log.append(payload, header)
                return time.perf_counter() - started

            def baseline_append(  # defaults bind this iteration's values (called within it)
                stamped: pa.Table = stamped,
                interval: int = interval,
                baseline_uri: str = baseline.uri,
                options: dict[str, str] = options,
            ) -> float:
                nonlocal handle
                started = time.perf_counter()
                write_deltalake(handle, stamped, mode="append")
                if is_checkpoint_version(handle.version(), interval):
                    handle = DeltaTable(baseline_uri, storage_options=options)
                return time.perf_counter() - started

            if batch % 2:
                took = (lakelog_append(), baseline_append())
            else:
                took = tuple(reversed((baseline_append(), lakelog_append())))
            if batch >= 2:
                lakelog_times.append(took[0])
                baseline_times.append(took[1])
            sequence += size
        ratio = sum(lakelog_times) / sum(baseline_times)
        rows.append(
            [
                f"{size:,}",
                batches[size],
                _common.median(lakelog_times) * 1e3,
                _common.median(baseline_times) * 1e3,
                _common.percentile(lakelog_times, 95) * 1e3,
                _common.percentile(baseline_times, 95) * 1e3,
                ratio,
            ]
        )
        result.add(f"s3 append time lakelog/write_deltalake @{size}", ratio, target)
    _common.print_table(
        ["records/batch", "batches", "lakelog p50 ms", "baseline p50 ms", "lakelog p95 ms", "baseline p95 ms", "ratio"], rows
    )


# -- (b) read_committed fetch vs a raw scan through the same filesystem -----------------------------------


def _scan(root: str, transactions: int, result: _common.Result) -> None:
    create_topic(root, "scan")
    log = open_partition(root, "scan", 0)
    epochs = {10_001: 0, 10_002: 0}
    for number in range(transactions):
        producer_id = 10_001 + number % 2
        values = [f"{number}-{index}".encode().ljust(VALUE_BYTES, b".") for index in range(SCAN_ROWS_PER_TXN)]
        log.append(
            payload_table(values),
            BatchHeader(producer_id, epochs[producer_id], 0, is_transactional=True),
            transaction=_UNVERIFIED,
        )
        epochs[producer_id] += 1
        control = ControlType.ABORT if number % 10 == 9 else ControlType.COMMIT
        log.append_marker(producer_id, epochs[producer_id], control)
    reader = open_partition(root, "scan", 0)
    reader.last_stable_offset()  # the transaction index caught up, as a consumer's would be
    table = reader.table
    paths = [table.io.path(table.file_path(entry)) for entry in partition_files(table)]
    filesystem = table.io.filesystem
    fetch_times, raw_times = [], []
    for _ in range(SCAN_ROUNDS):
        started = time.perf_counter()
        raw = ds.dataset(paths, format="parquet", filesystem=filesystem).to_table()
        raw_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        offset, returned = reader.log_start_offset(), 0
        end = reader.last_stable_offset()
        while offset < end:
            fetched = reader.fetch(offset, max_records=1 << 30, max_bytes=64 << 20, isolation_level=READ_COMMITTED)
            returned += fetched.rows.num_rows
            offset = fetched.next_offset
        fetch_times.append(time.perf_counter() - started)
    ratio = _common.median(fetch_times) / _common.median(raw_times)
    print(
        f"   scan: {len(paths)} files, {raw.num_rows:,} rows raw, {returned:,} read_committed; "
        f"median raw {_common.median(raw_times) * 1e3:.0f} ms, fetch {_common.median(fetch_times) * 1e3:.0f} ms"
    )
    result.add("s3 read_committed fetch / raw pyarrow scan", ratio, SCAN_TARGET)


# -- (c) commits per second on one partition -------------------------------------------------------------


def _writer(root: str, topic: str, seconds: float, start_at: float, counts) -> None:
    log = open_partition(root, topic, 0)
    producer_id = allocate_producer_id(root, "bench-rate")
    while time.time() < start_at:
        time.sleep(0.005)
    sequence, committed = 0, 0
    deadline = start_at + seconds
    while time.time() < deadline:
        log.append(payload_table([b"r" * VALUE_BYTES]), BatchHeader(producer_id, 0, sequence))
        sequence += 1
        committed += 1
    counts.put(committed)


def _commit_rates(root: str, seconds: float) -> None:
    context = multiprocessing.get_context("spawn")
    rows = []
    for writers in (1, WRITERS):
        topic = f"rate-{writers}"
        create_topic(root, topic)
        counts = context.Queue()
        start_at = time.time() + 8  # spawned interpreters import lakelog first
        processes = [context.Process(target=_writer, args=(root, topic, seconds, start_at, counts)) for _ in range(writers)]
        for process in processes:
            process.start()
        committed = [counts.get(timeout=seconds + 120) for _ in processes]
        for process in processes:
            process.join()
        leo = open_partition(root, topic, 0).log_end_offset()
        if leo != sum(committed):
            raise AssertionError(f"{writers} writers acknowledged {sum(committed)} commits, the log holds {leo}")
        rows.append([writers, seconds, sum(committed), sum(committed) / seconds])
    _common.print_table(["writers", "seconds", "commits", "commits/s"], rows)
    print(f"   {WRITERS} writers together: {rows[1][3] / rows[0][3]:.2f}x the commits/s of one")


def main(argv: list[str] | None = None) -> None:
    options = _common.parser(__doc__.splitlines()[0]).parse_args(argv)
    run(options.quick, options.root, options.keep)


if __name__ == "__main__":
    main()
