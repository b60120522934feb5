"""Single-record append latency around commit 100 and around commit 10,000 of a partition.

Partition 0 gets single-record idempotent appends through PartitionLog.append.
Latency is sampled over a window of commits centred on commit 100 and on commit
10,000 (2,000 with --quick); each window is 100 commits wide, so each holds
the same number of checkpoints (ten at the default interval of 10). The log maintains its table after each commit
(lakelog.store.upkeep.maintenance), so that cost is part of every sample. The ratio
of the medians (late/early) says whether the append path stays O(1) in the
log's length. Target: <= 1.2.

The two windows of one partition are minutes apart, so a change of machine load
between them shows up in that ratio. As a same-time control, partition 1 is
brought to commit 50 and then appended to alternately with partition 0's late
window: its commits 50-149 run interleaved with partition 0's commits around
10,000, under the same load. Both ratios are printed and judged.

Then S3.5's recovery: a new process opens the partition and answers a retry
of the producer's last batch (its original offset back, nothing appended),
which needs the producer's state, recovered from the table alone. Timed cold
(a fresh handle each time) on partition 0 (about 10,050 commits) and
partition 1 (about 150), alternately. Target: <= 1.2 (flat in the log's length).
"""

from __future__ import annotations

import time

from bench import _common
from lakelog.log import BatchHeader, allocate_producer_id, create_topic, open_partition, payload_table

TARGET = 1.2
EARLY = 100
LATE = 10_000
LATE_QUICK = 2_000
WINDOW = 100
RECOVERY_ROUNDS = 30


class _Appender:
    """One partition, one producer, single-record appends."""

    def __init__(self, root: str, partition: int, producer_id: int) -> None:
        self.root, self.partition = root, partition
        self.log = open_partition(root, "latency", partition)
        self.maintenance = _common.MaintenanceTally()
        self.producer_id = producer_id
        self.sequence = 0
        self.payload = payload_table([b"v" * 100])

    @property
    def commits(self) -> int:
        return self.sequence

    def append(self) -> float:
        """Append one record (the partition's next commit); returns the seconds it took."""
        t0 = time.perf_counter()
        self.log.append(self.payload, BatchHeader(self.producer_id, 0, self.sequence))
        elapsed = time.perf_counter() - t0
        self.maintenance.add(self.log)
        self.sequence += 1
        return elapsed

    def recover(self) -> float:
        """A new handle answers a retry of the last batch from the table alone (S3.2, S3.5); returns the seconds."""
        t0 = time.perf_counter()
        log = open_partition(self.root, "latency", self.partition)
        result = log.append(self.payload, BatchHeader(self.producer_id, 0, self.sequence - 1))
        elapsed = time.perf_counter() - t0
        assert result.base_offset == self.sequence - 1 and log.log_end_offset() == self.sequence, result
        return elapsed


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    late = LATE_QUICK if quick else LATE
    result = _common.Result("append_latency")
    half = WINDOW // 2
    print(f"== append_latency: 1-record idempotent appends, {WINDOW}-commit windows around commit {EARLY} and {late:,}")
    with _common.temp_root(root_parent, keep) as root:
        create_topic(root, "latency", 2)
        producer_id = allocate_producer_id(root, "bench-latency")
        main = _Appender(root, 0, producer_id)
        twin = _Appender(root, 1, producer_id)
        started = time.perf_counter()
        early: list[float] = []
        while main.commits < late - half:
            elapsed = main.append()
            if EARLY - half <= main.commits < EARLY + half:
                early.append(elapsed)
            if main.commits % 2000 == 0:
                print(f"   ... partition 0 at commit {main.commits:,}, {time.perf_counter() - started:.0f} s", flush=True)
        while twin.commits < EARLY - half:
            twin.append()
        late_samples: list[float] = []
        twin_samples: list[float] = []
        for _ in range(WINDOW):
            late_samples.append(main.append())
            twin_samples.append(twin.append())
        rows = []
        for label, values in (
            (f"p0 ~{EARLY} (sequential)", early),
            (f"p1 ~{EARLY} (interleaved)", twin_samples),
            (f"p0 ~{late:,}", late_samples),
        ):
            rows.append(
                [label, len(values), _common.median(values) * 1e3, _common.percentile(values, 95) * 1e3, max(values) * 1e3]
            )
        _common.print_table(["window", "samples", "p50 ms", "p95 ms", "max ms"], rows)
        print(f"   partition 0 at the end: {_common.table_line(main.log)}; {time.perf_counter() - started:.0f} s in all")
        print(f"   partition 0 {main.maintenance.line()}")
        print(f"   partition 1 {twin.maintenance.line()}")
        recovery = {main: [], twin: []}
        for _ in range(RECOVERY_ROUNDS):
            for appender in (main, twin):
                recovery[appender].append(appender.recover())
        _common.print_table(
            ["cold open + retry of the last batch", "samples", "p50 ms", "p95 ms"],
            [
                [
                    f"partition {a.partition} ({a.commits:,} commits)",
                    len(v),
                    _common.median(v) * 1e3,
                    _common.percentile(v, 95) * 1e3,
                ]
                for a, v in recovery.items()
            ],
        )
        p50_late = _common.median(late_samples)
        p95_late = _common.percentile(late_samples, 95)
        result.add(f"append_latency p50 p0@{late}/p0@{EARLY}", p50_late / _common.median(early), TARGET)
        result.add(f"append_latency p50 p0@{late}/p1@{EARLY} interleaved", p50_late / _common.median(twin_samples), TARGET)
        result.add(
            f"append_latency S3.5 cold recovery p50 p0@{main.commits}/p1@{twin.commits}",
            _common.median(recovery[main]) / _common.median(recovery[twin]),
            TARGET,
        )
        result.add(f"append_latency p95 p0@{late}/p0@{EARLY}", p95_late / _common.percentile(early, 95))
        result.add(f"append_latency p95 p0@{late}/p1@{EARLY} interleaved", p95_late / _common.percentile(twin_samples, 95))
    return result


def main(argv: list[str] | None = None) -> None:
    options = _common.parser(__doc__.splitlines()[0]).parse_args(argv)
    run(options.quick, options.root, options.keep)


if __name__ == "__main__":
    main()
