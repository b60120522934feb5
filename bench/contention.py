"""Contention: 8 producer processes on one partition together, against one producer alone, in commits/s.

Every writer is a real process (multiprocessing, spawn) running the public idempotent `Producer` with
one record per flush, so each batch is one Delta commit that must be exactly the partition's next
version: with N writers, each version has one winner and up to N-1 losers, which reload, decide again
and retry (after the retry policy's backoff). Each process first produces one uncounted batch (its
producer id, the partition's handle), then all start together behind a barrier and produce the same
number of batches. One round is one producer alone, then 8 together, each on a fresh partition; rounds
repeat and the rates are summed over them, so machine load hits both sides alike.

Ratio: (8 together, commits/s) / (1 alone, commits/s); target >= 0.8. Every record is read back: the
partition holds each value exactly once (no loss, no duplicate). The table also shows where the time
goes: commit attempts per committed batch, the time spent in winning and in losing commit attempts,
and CPU seconds per committed batch (two cores serve all the writers).
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass

from bench import _common
from lakelog import AdminClient, NewTopic, Producer
from lakelog.errors import CommitConflict
from lakelog.log import READ_UNCOMMITTED, open_partition
from lakelog.store.delta import table as table_module

WRITERS = 8
BATCHES = 120
BATCHES_QUICK = 40
ROUNDS = 3
ROUNDS_QUICK = 1
TARGET = 0.8
START_TIMEOUT_S = 300.0


@dataclass
class WriterReport:
    """What one writer process measured between the barrier and its last flush."""

    writer: int
    batches: int
    started: float
    ended: float
    cpu_s: float
    attempts: int
    conflicts: int
    won_s: float
    lost_s: float
    errors: int


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    batches = BATCHES_QUICK if quick else BATCHES
    rounds = ROUNDS_QUICK if quick else ROUNDS
    result = _common.Result("contention")
    print(
        f"== contention: {WRITERS} idempotent producer processes on one partition vs 1 alone, "
        f"{batches} one-record batches each, {rounds} round(s)"
    )
    context = multiprocessing.get_context("spawn")
    totals = {1: [0, 0.0], WRITERS: [0, 0.0]}
    rows = []
    with _common.temp_root(root_parent, keep) as root:
        for round_number in range(rounds):
            for writers in (1, WRITERS):
                topic = f"contention-{round_number}-{writers}"
                AdminClient({"lakelog.root": root}).create_topics([NewTopic(topic, num_partitions=1)])
                reports = _run_writers(context, root, topic, writers, batches)
                _check_landed_once(root, topic, writers, batches)
                committed = sum(report.batches for report in reports)
                elapsed = max(report.ended for report in reports) - min(report.started for report in reports)
                totals[writers][0] += committed
                totals[writers][1] += elapsed
                attempts = sum(report.attempts for report in reports)
                rows.append(
                    [
                        round_number + 1,
                        writers,
                        committed,
                        elapsed,
                        committed / elapsed,
                        attempts / committed,
                        sum(report.won_s for report in reports) / committed * 1e3,
                        sum(report.lost_s for report in reports) / committed * 1e3,
                        sum(report.cpu_s for report in reports) / committed * 1e3,
                    ]
                )
    _common.print_table(
        [
            "round",
            "writers",
            "commits",
            "seconds",
            "commits/s",
            "attempts/commit",
            "won ms/commit",
            "lost ms/commit",
            "cpu ms/commit",
        ],
        rows,
    )
    alone = totals[1][0] / totals[1][1]
    together = totals[WRITERS][0] / totals[WRITERS][1]
    print(f"   every record landed once: {rounds} x ({batches} + {WRITERS} x {batches}) batches read back")
    result.add(f"contention {WRITERS} together/1 alone commits/s", together / alone, TARGET, higher_is_better=True)
    return result


def _run_writers(context, root: str, topic: str, writers: int, batches: int) -> list[WriterReport]:
    barrier = context.Barrier(writers)
    reports = context.Queue()
    processes = [
        context.Process(target=_writer, args=(root, topic, writer, batches, barrier, reports), daemon=True)
        for writer in range(writers)
    ]
    for process in processes:
        process.start()
    try:
        out = [reports.get(timeout=START_TIMEOUT_S + batches * writers) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    failed = [process.exitcode for process in processes if process.exitcode != 0]
    if failed:
        raise AssertionError(f"writer processes exited with {failed}")
    return sorted(out, key=lambda report: report.writer)


def _writer(root: str, topic: str, writer: int, batches: int, barrier, reports) -> None:
    """One producer process: a warm-up batch, the barrier, then `batches` one-record flushes."""
    stats = {"attempts": 0, "conflicts": 0, "won_s": 0.0, "lost_s": 0.0}
    append = table_module.Table.append

    def counted_append(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            version = append(self, *args, **kwargs)
        except CommitConflict:
            stats["conflicts"] += 1
            stats["lost_s"] += time.perf_counter() - started
            raise
        finally:
            stats["attempts"] += 1
        stats["won_s"] += time.perf_counter() - started
        return version

    errors = []

    def on_delivery(error, message) -> None:
        if error is not None:
            errors.append(error)

    producer = Producer({"lakelog.root": root, "linger.ms": 0, "client.id": f"contention-{writer}"})
    producer.produce(topic, f"warm-{writer}".encode(), partition=0, on_delivery=on_delivery)
    producer.flush()
    table_module.Table.append = counted_append  # only this process's own appends are counted
    barrier.wait(timeout=START_TIMEOUT_S)
    started, cpu_started = time.monotonic(), time.process_time()
    for batch in range(batches):
        producer.produce(topic, f"{topic}/{writer}/{batch}".encode(), partition=0, on_delivery=on_delivery)
        producer.flush()
    ended = time.monotonic()
    reports.put(
        WriterReport(
            writer,
            batches,
            started,
            ended,
            time.process_time() - cpu_started,
            stats["attempts"],
            stats["conflicts"],
            stats["won_s"],
            stats["lost_s"],
            len(errors),
        )
    )
    if errors:
        raise SystemExit(f"writer {writer}: {len(errors)} delivery errors, the first {errors[0]}")


def _check_landed_once(root: str, topic: str, writers: int, batches: int) -> None:
    """Every produced value is in the partition exactly once, and nothing else is."""
    log = open_partition(root, topic, 0)
    values: list[bytes] = []
    offset = log.log_start_offset()
    while offset < log.high_watermark():
        fetched = log.fetch(offset, max_records=1 << 20, max_bytes=1 << 30, isolation_level=READ_UNCOMMITTED)
        values.extend(fetched.rows.column("value").to_pylist())
        offset = fetched.next_offset
    expected = {f"warm-{writer}".encode() for writer in range(writers)}
    expected |= {f"{topic}/{writer}/{batch}".encode() for writer in range(writers) for batch in range(batches)}
    if len(values) != len(expected) or set(values) != expected:
        duplicates = len(values) - len(set(values))
        raise AssertionError(
            f"{topic}: {len(values)} records read, {len(expected)} produced, {duplicates} duplicates, "
            f"{len(expected - set(values))} missing"
        )


def main(argv: list[str] | None = None) -> None:
    options = _common.parser(__doc__.splitlines()[0]).parse_args(argv)
    run(options.quick, options.root, options.keep)


if __name__ == "__main__":
    main()
