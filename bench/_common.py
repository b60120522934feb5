"""Shared helpers: arguments, a temporary root, percentiles, tables, ratio lines, maintenance summaries."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog import AdminClient, NewTopic, Producer
from lakelog.client.admin.groups import ConsumerGroupState, group_state
from lakelog.log import PartitionLog
from lakelog.log.partition_file import partition_files
from lakelog.store import Location, initialise_root


def parser(description: str) -> argparse.ArgumentParser:
    args = argparse.ArgumentParser(description=description)
    args.add_argument("--quick", action="store_true", help="a small run (seconds, not minutes)")
    args.add_argument("--root", help="folder to create the temporary root in (default: the system temp folder)")
    args.add_argument("--keep", action="store_true", help="keep the temporary root (its path is printed)")
    return args


def cli(run: Callable[[bool, str | None, bool], object], doc: str, argv: list[str] | None = None) -> None:
    """A benchmark module's `main`: parse the common arguments (the docstring's first line as description), run."""
    options = parser(doc.splitlines()[0]).parse_args(argv)
    run(options.quick, options.root, options.keep)


@contextlib.contextmanager
def temp_root(parent: str | None = None, keep: bool = False, prefix: str = "lakelog-bench-") -> Iterator[str]:
    if parent is not None:
        os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        initialise_root(path)  # as `lakelog init` does: the clients take no folder that is not a root
        yield path
    finally:
        if keep:
            print(f"(root kept at {path})")
        else:
            location = Location.of(path)
            location.io.delete_tree(location.uri)


@contextlib.contextmanager
def session(benchmark: str, headline: str, parent: str | None = None, keep: bool = False) -> Iterator[tuple[Result, str]]:
    """A benchmark's run: its Result, its `== benchmark: headline` line, and a temporary root for its body."""
    result = Result(benchmark)
    print(f"== {benchmark}: {headline}")
    with temp_root(parent, keep) as root:
        yield result, root


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers]] + [[_format(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print(
            "  ".join(c.ljust(w) if n == 0 or i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False)))
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _format(value: object) -> str:
    if isinstance(value, float):
        if value >= 1000:
            return f"{value:,.0f}"
        if value >= 100:
            return f"{value:.0f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@dataclass
class Ratio:
    """A measured ratio and its target: at most the target, or at least it when `higher_is_better`."""

    name: str
    value: float
    target: float | None = None
    higher_is_better: bool = False

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "INFO"
        met = self.value >= self.target if self.higher_is_better else self.value <= self.target
        return "PASS" if met else "MISS"

    def line(self) -> str:
        bound = ">=" if self.higher_is_better else "<="
        target = f" (target {bound} {self.target:g})" if self.target is not None else " (no target)"
        return f"ratio {self.name}: {self.value:.3f}{target} {self.verdict}"


@dataclass
class Result:
    benchmark: str
    ratios: list[Ratio] = field(default_factory=list)

    def add(self, name: str, value: float, target: float | None = None, *, higher_is_better: bool = False) -> Ratio:
        ratio = Ratio(name, value, target, higher_is_better)
        self.ratios.append(ratio)
        print(ratio.line())
        sys.stdout.flush()
        return ratio


# -- what the log's own maintenance did ------------------------------------------


@dataclass
class MaintenanceTally:
    """Sums of the `PartitionLog.last_maintenance` reports of one log over a run."""

    appends: int = 0
    reopens: int = 0
    log_files_deleted: int = 0
    files_vacuumed: int = 0
    compactions: int = 0
    files_compacted: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, log: PartitionLog) -> None:
        """Count the report of the append `log` just made (call once after each append)."""
        report = log.last_maintenance
        self.appends += 1
        if report is None:
            return
        self.reopens += report.reopened
        self.log_files_deleted += report.log_files_deleted
        self.files_vacuumed += report.files_vacuumed
        if report.compaction is not None:
            self.compactions += 1
            self.files_compacted += report.compaction.files_removed
        self.errors.extend(report.errors)

    def line(self) -> str:
        errors = f"{len(self.errors)} errors (first: {self.errors[0]})" if self.errors else "no errors"
        return (
            f"maintenance over {self.appends:,} appends: {self.reopens} handle reopens, "
            f"{self.log_files_deleted:,} log files deleted, {self.files_vacuumed:,} data files vacuumed, "
            f"{self.compactions} compactions of {self.files_compacted:,} files, {errors}"
        )


def table_line(log: PartitionLog) -> str:
    """The partition table's size now: version, active data files, files in _delta_log."""
    log_files = log.table.io.list(log.table.child_uri("_delta_log"))
    return f"version {log.version:,}, {len(partition_files(log.table)):,} active files, {len(log_files):,} files in _delta_log"


# -- shared workloads -------------------------------------------------------------


def transactional_and_idempotent_rounds(
    root: str,
    size: int,
    partitions: int,
    value: bytes,
    topic_prefix: str,
    transactional_id: str,
) -> tuple[Callable[[], float], Callable[[], float]]:
    """Two producers writing `size` records over `partitions` new partitions per round: a transactional one
    (begin, produce, commit) and an idempotent one (produce, flush), each on its own topic
    (`{topic_prefix}txn-{size}`, `{topic_prefix}idem-{size}`), both warmed up once. Returns their round
    functions, each returning the round's seconds."""
    conf = {"lakelog.root": root, "linger.ms": 60_000, "batch.num.messages": 1_000_000, "batch.size": 1 << 30}
    topics = {kind: f"{topic_prefix}{kind}-{size}" for kind in ("txn", "idem")}
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(name, num_partitions=partitions) for name in topics.values()])
    transactional = Producer({**conf, "transactional.id": transactional_id})
    transactional.init_transactions()
    idempotent = Producer(conf)
    per_partition = size // partitions

    def produce_all(producer: Producer, topic: str) -> None:
        for partition in range(partitions):
            for _ in range(per_partition):
                producer.produce(topic, value, partition=partition)

    def transactional_round() -> float:
        t0 = time.perf_counter()
        transactional.begin_transaction()
        produce_all(transactional, topics["txn"])
        transactional.commit_transaction()
        return time.perf_counter() - t0

    def idempotent_round() -> float:
        t0 = time.perf_counter()
        produce_all(idempotent, topics["idem"])
        idempotent.flush()
        return time.perf_counter() - t0

    transactional_round(), idempotent_round()  # warm-up: open handles, allocate ids
    return transactional_round, idempotent_round


def settle_group(describe: Callable[[], object], members: Iterable[str], beat: Callable[[str], None]) -> tuple[int, int]:
    """Heartbeat every member (`beat`) round after round until `describe()` shows the group STABLE.
    Returns (heartbeats, rounds)."""
    heartbeats = rounds = 0
    while group_state(describe()) is not ConsumerGroupState.STABLE:
        for member_id in list(members):
            beat(member_id)
            heartbeats += 1
        rounds += 1
    return heartbeats, rounds


class Floor:
    """The floor: the Parquet file written as lakelog writes it, then a ~1 KB commit file created O_EXCL."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        os.makedirs(folder, exist_ok=True)
        self.commit = json.dumps({"commitInfo": {"x": "y" * 900}}).encode()
        self.version = 0

    def append(self, rows: pa.Table) -> float:
        started = time.perf_counter()
        sink = pa.BufferOutputStream()
        pq.write_table(rows, sink, compression="snappy")
        with open(f"{self.folder}/part-{uuid.uuid4().hex}.parquet", "wb") as out:
            out.write(sink.getvalue())
        descriptor = os.open(f"{self.folder}/{self.version:020d}.json", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(descriptor, self.commit)
        os.close(descriptor)
        self.version += 1
        return time.perf_counter() - started
