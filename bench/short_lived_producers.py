"""Short-lived producers: a new producer's produce + flush after 5,000 producers on one partition, against after 50.

Each producer is the public idempotent `Producer` (no transactional.id), used once: one
record to partition 0, `flush()`, then dropped, as an hourly task or a `lakelog produce`
per file would. Each allocates a new producer id (a commit to `__producer_ids`) and
appends its record to the partition (a commit to the partition table), whose row is
its producer state (S9.4): nothing per producer goes to the partition's Delta log. A sample is the
time of a new producer's first `produce` + `flush` (id allocation, partition open,
the decision and the commit); building the `Producer` object is not in it.

Samples are taken over a window of new producers once the partition has seen 50
producers and once it has seen 5,000 (500 with --quick). The late window runs
interleaved with a control root that has seen only 50 producers, so a change of
machine load between the two windows shows in one ratio and not the other; both
are judged. Target: <= 1.2 (a producer that is gone must cost nothing once it has expired).

Then where the time goes, through lakelog.log (same steps as the Producer's first
batch): allocate a producer id, open the partition, append one record with that id.
Printed at the end: the size of the partition's latest checkpoint and the number of
`txn` actions in it (the LEO's alone, whatever the number of producers: before S9.4,
two per producer carried its state).
"""

from __future__ import annotations

import re
import time

from bench import _common
from lakelog import AdminClient, NewTopic, Producer
from lakelog.log import BatchHeader, allocate_producer_id, open_partition, payload_table
from lakelog.store import Location

TOPIC = "short-lived"
EARLY = 50
LATE = 5_000
LATE_QUICK = 500
WINDOW = 20
BREAKDOWN = 10
TARGET = 1.2
VALUE = b"v" * 100
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")


class _Root:
    """One root with one single-partition topic, and the short-lived producers it has seen."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.producers = 0
        AdminClient({"lakelog.root": uri}).create_topics([NewTopic(TOPIC, num_partitions=1)])

    def new_producer(self) -> float:
        """One short-lived producer: one record, flushed; returns the seconds of produce + flush."""
        producer = Producer({"lakelog.root": self.uri})
        delivered: list[object] = []
        t0 = time.perf_counter()
        producer.produce(TOPIC, VALUE, partition=0, on_delivery=lambda err, msg: delivered.append(err))
        left = producer.flush()
        elapsed = time.perf_counter() - t0
        if left or delivered != [None]:
            raise RuntimeError(f"producer {self.producers} was not delivered: {delivered}, {left} left")
        self.producers += 1
        return elapsed

    def grow_to(self, count: int, started: float) -> None:
        while self.producers < count:
            self.new_producer()
            if self.producers % 500 == 0:
                print(f"   ... {self.producers:,} producers, {time.perf_counter() - started:.0f} s", flush=True)

    def breakdown(self) -> dict[str, float]:
        """The Producer's first batch step by step (lakelog.log); seconds per step."""
        steps: dict[str, float] = {}
        t0 = time.perf_counter()
        producer_id = allocate_producer_id(self.uri, "bench-short-lived")
        t1 = time.perf_counter()
        log = open_partition(self.uri, TOPIC, 0)
        t2 = time.perf_counter()
        log.append(payload_table([VALUE]), BatchHeader(producer_id, 0, 0))
        t3 = time.perf_counter()
        self.producers += 1
        steps["allocate producer id"], steps["open partition"], steps["append (decide + commit)"] = t1 - t0, t2 - t1, t3 - t2
        return steps

    def checkpoint_facts(self) -> tuple[str, int, int]:
        """(name, bytes, txn actions) of the partition table's latest checkpoint."""
        log = open_partition(self.uri, TOPIC, 0)
        statuses = log.table.io.list(log.table.child_uri("_delta_log"))
        checkpoints = sorted((s for s in statuses if _CHECKPOINT.match(s.name)), key=lambda s: s.name)
        if not checkpoints:
            return "none", 0, 0
        parts = [s for s in checkpoints if s.name[:20] == checkpoints[-1].name[:20]]
        txns = sum(log.table.io.read_parquet(s.uri, ["txn"]).column("txn").drop_null().length() for s in parts)
        return checkpoints[-1].name, sum(s.size for s in parts), txns

    def log_end_offset(self) -> int:
        return open_partition(self.uri, TOPIC, 0).log_end_offset()


def _window(roots: list[_Root], count: int) -> list[list[float]]:
    """`count` new producers on each root, alternating between them; samples per root."""
    samples: list[list[float]] = [[] for _ in roots]
    for _ in range(count):
        for i, root in enumerate(roots):
            samples[i].append(root.new_producer())
    return samples


def _breakdowns(roots: list[_Root], count: int) -> list[dict[str, list[float]]]:
    found: list[dict[str, list[float]]] = [{} for _ in roots]
    for _ in range(count):
        for i, root in enumerate(roots):
            for step, seconds in root.breakdown().items():
                found[i].setdefault(step, []).append(seconds)
    return found


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    late = LATE_QUICK if quick else LATE
    result = _common.Result("short_lived_producers")
    print(
        f"== short_lived_producers: one-record idempotent Producers, each used once, on one partition; "
        f"{WINDOW} new producers after {EARLY} and after {late:,}"
    )
    with _common.temp_root(root_parent, keep) as parent:
        base = Location.of(parent)
        grown = _Root((base / "grown").uri)
        control = _Root((base / "control").uri)
        started = time.perf_counter()
        grown.grow_to(EARLY, started)
        (early,) = _window([grown], WINDOW)
        (early_steps,) = _breakdowns([grown], BREAKDOWN)
        early_checkpoint = grown.checkpoint_facts()
        early_seen = grown.producers
        grown.grow_to(late, started)
        control.grow_to(EARLY, started)
        late_samples, control_samples = _window([grown, control], WINDOW)
        late_steps, control_steps = _breakdowns([grown, control], BREAKDOWN)
        late_checkpoint = grown.checkpoint_facts()
        elapsed = time.perf_counter() - started

        def p50_ms(values: list[float]) -> float:
            return _common.median(values) * 1e3

        _common.print_table(
            ["new producer's produce + flush", "producers before", "samples", "p50 ms", "p95 ms", "max ms"],
            [
                [label, before, len(values), p50_ms(values), _common.percentile(values, 95) * 1e3, max(values) * 1e3]
                for label, before, values in (
                    ("grown root, early (sequential)", EARLY, early),
                    ("control root, early (interleaved)", EARLY, control_samples),
                    ("grown root, late", late, late_samples),
                )
            ],
        )
        _common.print_table(
            [
                "first batch step by step (p50 ms)",
                f"grown @{early_seen - BREAKDOWN}",
                f"control @{EARLY + WINDOW}",
                f"grown @{late + WINDOW}",
            ],
            [[step] + [p50_ms(found[step]) for found in (early_steps, control_steps, late_steps)] for step in early_steps],
        )
        for label, (name, size, txns) in (
            (f"after {early_seen:,} producers", early_checkpoint),
            (f"after {grown.producers:,} producers", late_checkpoint),
        ):
            print(f"   partition checkpoint {label}: {name}, {size / 1024:,.1f} KiB, {txns:,} txn actions")
        records = grown.log_end_offset()
        if records != grown.producers:
            raise RuntimeError(f"the grown partition holds {records} records for {grown.producers} producers")
        print(f"   every record landed once ({records:,} on the grown partition); {elapsed:.0f} s in all")
        result.add(f"short_lived_producers p50 @{late}/@{EARLY}", _common.median(late_samples) / _common.median(early), TARGET)
        result.add(
            f"short_lived_producers p50 @{late}/control@{EARLY} interleaved",
            _common.median(late_samples) / _common.median(control_samples),
            TARGET,
        )
        result.add(f"short_lived_producers checkpoint bytes @{late}/@{EARLY}", late_checkpoint[1] / max(early_checkpoint[1], 1))
    return result


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
