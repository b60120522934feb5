"""read_committed fetch vs a raw Parquet scan, and the cost of bringing the LSO up to date (S5).

(a) Four partitions of about 250,000 rows each (25,000 with --quick), written as
transactions of two interleaving producers (one in ten aborted) plus plain
batches. Each round reads every partition whole three ways, in turn, so load
hits all alike: `pyarrow.parquet.read_table` of the snapshot's active files (the
baseline: no offsets, no filtering), `PartitionLog.fetch` in read_committed
(with a caught-up transaction index) and in read_uncommitted. The ratios are
median fetch time / median raw scan time. Target: <= 1.2 for both. A cold
read_committed fetch (a freshly opened partition, which first folds every row's
header columns into its transaction index) is printed for information.

(b) Two partitions, one of 100 commits and one of 10,000 (1,000 with --quick),
each with a reader whose LSO is up to date. A writer then appends one commit at
a time to each in turn (a small transactional batch, then its marker); after
each, the reader reloads its snapshot and asks for the LSO. The ratio is the
median of that time on the long partition / on the short one. Target: <= 2.
"""

from __future__ import annotations

import time

import pyarrow.parquet as pq

from bench import _common
from lakelog.log import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    BatchHeader,
    ControlType,
    PartitionLog,
    create_topic,
    open_partition,
    payload_table,
)
from lakelog.log.partition_file import partition_files
from lakelog.log.verification import _UNVERIFIED

SCAN_TARGET = 1.2
CATCH_UP_TARGET = 2.0
PARTITIONS = 4
ROWS_PER_TXN = 2_500
TRANSACTIONS = 100
TRANSACTIONS_QUICK = 10
ROUNDS = 7
SHORT = 100
LONG = 10_000
LONG_QUICK = 1_000
SAMPLES = 60
TXN_ROWS = 10
ABORT_EVERY = 10
PLAIN_EVERY = 5


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("read_committed")
    with _common.temp_root(root_parent, keep) as root:
        _scan(root, TRANSACTIONS_QUICK if quick else TRANSACTIONS, result)
        _catch_up(root, LONG_QUICK if quick else LONG, result)
    return result


# -- (a) whole-partition fetch vs raw scan ---------------------------------------------


class _Writer:
    """Appends to one partition through PartitionLog as producers and a coordinator would."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.epochs: dict[int, int] = {}
        self.sequences: dict[int, int] = {}

    def txn(self, producer_id: int, values: list[bytes]) -> None:
        epoch, sequence = self.epochs.setdefault(producer_id, 0), self.sequences.get(producer_id, 0)
        self.log.append(
            payload_table(values), BatchHeader(producer_id, epoch, sequence, is_transactional=True), transaction=_UNVERIFIED
        )
        self.sequences[producer_id] = sequence + len(values)

    def marker(self, producer_id: int, control: ControlType) -> None:
        self.epochs[producer_id] = self.epochs.get(producer_id, 0) + 1
        self.sequences[producer_id] = 0
        self.log.append_marker(producer_id, self.epochs[producer_id], control)


def _fill(log: PartitionLog, transactions: int) -> None:
    """Transactions of two producers whose batches interleave, some aborted, with plain batches between."""
    writer = _Writer(log)
    value = b"v" * 100
    for n in range(transactions):
        producer_id = 1 + n % 2
        half = ROWS_PER_TXN // 2
        writer.txn(producer_id, [value] * half)
        if n % PLAIN_EVERY == 0:
            log.append(payload_table([value] * 100))
        writer.txn(producer_id, [value] * (ROWS_PER_TXN - half))
        writer.marker(producer_id, ControlType.ABORT if n % ABORT_EVERY == ABORT_EVERY - 1 else ControlType.COMMIT)


def _fetch_all(log: PartitionLog, isolation_level: str) -> int:
    """Rows a reader gets from the log start to the end of its isolation level, paging with next_offset."""
    offset, rows = log.log_start_offset(), 0
    end = log.last_stable_offset() if isolation_level == READ_COMMITTED else log.high_watermark()
    while offset < end:
        fetched = log.fetch(offset, max_records=1 << 40, max_bytes=1 << 40, isolation_level=isolation_level)
        rows += fetched.rows.num_rows
        offset = fetched.next_offset
    return rows


def _raw_scan(log: PartitionLog) -> int:
    return pq.read_table([log.table.file_path(entry) for entry in partition_files(log.table)]).num_rows


def _describe(log: PartitionLog) -> str:
    return f"version {log.version:,}, {len(partition_files(log.table)):,} active files, {log.high_watermark():,} rows"


def _timed(call) -> tuple[float, int]:
    started = time.perf_counter()
    rows = call()
    return time.perf_counter() - started, rows


def _scan(root: str, transactions: int, result: _common.Result) -> None:
    print(
        f"== read_committed (a): whole-partition fetch vs pyarrow.parquet.read_table, {PARTITIONS} partitions of "
        f"{transactions} transactions x {ROWS_PER_TXN:,} rows (1 in {ABORT_EVERY} aborted) + plain batches"
    )
    create_topic(root, "scan", PARTITIONS)
    started = time.perf_counter()
    logs = [open_partition(root, "scan", partition) for partition in range(PARTITIONS)]
    for log in logs:
        _fill(log, transactions)
    print(f"   written in {time.perf_counter() - started:.0f} s; partition 0: {_describe(logs[0])}")
    readers = [open_partition(root, "scan", partition) for partition in range(PARTITIONS)]
    counts = {"raw": 0, READ_COMMITTED: 0, READ_UNCOMMITTED: 0}
    for reader in readers:  # warm: page cache, and each reader's transaction index caught up
        counts["raw"] += _raw_scan(reader)
        counts[READ_COMMITTED] += _fetch_all(reader, READ_COMMITTED)
        counts[READ_UNCOMMITTED] += _fetch_all(reader, READ_UNCOMMITTED)
    times: dict[str, list[float]] = {name: [] for name in ("raw", READ_COMMITTED, READ_UNCOMMITTED, "cold")}
    for _ in range(ROUNDS):
        fresh = [open_partition(root, "scan", partition) for partition in range(PARTITIONS)]
        for name, call in (
            ("raw", lambda: sum(_raw_scan(reader) for reader in readers)),
            (READ_COMMITTED, lambda: sum(_fetch_all(reader, READ_COMMITTED) for reader in readers)),
            (READ_UNCOMMITTED, lambda: sum(_fetch_all(reader, READ_UNCOMMITTED) for reader in readers)),
            ("cold", lambda fresh=fresh: sum(_fetch_all(reader, READ_COMMITTED) for reader in fresh)),  # bound: this round's
        ):
            elapsed, rows = _timed(call)
            assert rows == counts.get(name, counts[READ_COMMITTED]), (name, rows)
            times[name].append(elapsed)
    raw = _common.median(times["raw"])
    rows = []
    for name, label in (
        ("raw", "pyarrow.parquet.read_table (raw)"),
        (READ_COMMITTED, "fetch read_committed"),
        (READ_UNCOMMITTED, "fetch read_uncommitted"),
        ("cold", "fetch read_committed, cold index"),
    ):
        median = _common.median(times[name])
        count = counts.get(name, counts[READ_COMMITTED])
        rows.append([label, count, median * 1e3, count / median / 1e6, median / raw])
    _common.print_table(["read", "rows", "p50 ms", "M rows/s", "/ raw"], rows)
    result.add("read_committed fetch/raw scan", _common.median(times[READ_COMMITTED]) / raw, SCAN_TARGET)
    result.add("read_uncommitted fetch/raw scan", _common.median(times[READ_UNCOMMITTED]) / raw, SCAN_TARGET)
    result.add("read_committed cold fetch/raw scan", _common.median(times["cold"]) / raw)


# -- (b) LSO catch-up after one commit ----------------------------------------------------


class _Partition:
    """A writer and a reader of one partition; the reader's LSO is kept up to date."""

    def __init__(self, root: str, partition: int, producer_id: int) -> None:
        self.writer = _Writer(open_partition(root, "lso", partition))
        self.reader = open_partition(root, "lso", partition)
        self.producer_id = producer_id
        self.commits = 0
        self.open = False

    def commit_one(self) -> None:
        """The next commit: a small transactional batch, or the marker that ends it (one in ten aborts)."""
        if self.open:
            aborts = self.commits % (2 * ABORT_EVERY) == 2 * ABORT_EVERY - 1
            self.writer.marker(self.producer_id, ControlType.ABORT if aborts else ControlType.COMMIT)
        else:
            self.writer.txn(self.producer_id, [b"v" * 100] * TXN_ROWS)
        self.open = not self.open
        self.commits += 1

    def catch_up(self) -> tuple[float, float]:
        """Seconds to reload the reader's snapshot and bring its LSO up to date, and of the LSO step alone."""
        started = time.perf_counter()
        self.reader.refresh()
        refreshed = time.perf_counter()
        lso = self.reader.last_stable_offset()
        done = time.perf_counter()
        assert lso == self.reader.high_watermark() - (TXN_ROWS if self.open else 0)
        return done - started, done - refreshed


def _catch_up(root: str, long: int, result: _common.Result) -> None:
    print(f"\n== read_committed (b): LSO up to date after one commit, partition of {SHORT:,} vs {long:,} commits")
    create_topic(root, "lso", 2)
    short_partition, long_partition = _Partition(root, 0, 11), _Partition(root, 1, 12)
    started = time.perf_counter()
    for partition, commits in ((short_partition, SHORT), (long_partition, long)):
        while partition.commits < commits:
            partition.commit_one()
            if partition.commits % 2000 == 0:
                print(f"   ... partition at commit {partition.commits:,}, {time.perf_counter() - started:.0f} s", flush=True)
        partition.catch_up()
    print(f"   written in {time.perf_counter() - started:.0f} s; long partition: {_describe(long_partition.writer.log)}")
    samples: dict[int, list[tuple[float, float]]] = {SHORT: [], long: []}
    for _ in range(SAMPLES):
        for size, partition in ((SHORT, short_partition), (long, long_partition)):
            partition.commit_one()
            samples[size].append(partition.catch_up())
    rows = []
    for size in (SHORT, long):
        totals = [total for total, _ in samples[size]]
        folds = [fold for _, fold in samples[size]]
        rows.append(
            [
                f"{size:,} commits",
                len(totals),
                _common.median(totals) * 1e3,
                _common.percentile(totals, 95) * 1e3,
                _common.median(folds) * 1e3,
            ]
        )
    _common.print_table(["partition", "samples", "p50 ms", "p95 ms", "LSO step p50 ms"], rows)
    short_total = _common.median([total for total, _ in samples[SHORT]])
    long_total = _common.median([total for total, _ in samples[long]])
    result.add(f"LSO catch-up p50 @{long}/@{SHORT} commits", long_total / short_total, CATCH_UP_TARGET)
    short_fold = _common.median([fold for _, fold in samples[SHORT]])
    long_fold = _common.median([fold for _, fold in samples[long]])
    result.add(f"LSO step alone p50 @{long}/@{SHORT} commits", long_fold / short_fold)


def main(argv: list[str] | None = None) -> None:
    options = _common.parser(__doc__.splitlines()[0]).parse_args(argv)
    run(options.quick, options.root, options.keep)


if __name__ == "__main__":
    main()
