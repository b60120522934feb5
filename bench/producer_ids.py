"""Producer-id allocation after 2,000 ids against after 50: `__producer_ids` stays O(1) in the ids ever allocated.

Two roots: one whose `__producer_ids` has handed out 50 ids, one 2,000 (500 with --quick),
each allocated by `allocate_producer_id` itself (a commit of the counter alone; the table's
log checkpointed every 20 commits and cleaned behind the two latest). Then `allocate_producer_id`
is timed alternately on both, in this process (the table is opened once per process and
root, as a long-lived client does), so a change of machine load hits both alike. Also timed:
a cold allocation (a fresh process's first: open + allocate), by clearing the cache.
Target: <= 1.2 for both ratios. Printed: log files and data files of each table.
"""

from __future__ import annotations

import time

from bench import _common
from lakelog.log import allocate_producer_id, producer_ids
from lakelog.store import Location, Table, check_root

EARLY = 50
LATE = 2_000
LATE_QUICK = 500
SAMPLES = 40
TARGET = 1.2


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    late = LATE_QUICK if quick else LATE
    headline = f"allocate_producer_id after {late:,} ids vs after {EARLY}"
    with _common.session("producer_ids", headline, root_parent, keep) as (result, parent):
        roots = {count: f"{parent}/ids-{count}" for count in (EARLY, late)}
        started = time.perf_counter()
        for count, root in roots.items():
            for _ in range(count):
                allocate_producer_id(root, "filler")
        filled = time.perf_counter() - started
        warm: dict[int, list[float]] = {count: [] for count in roots}
        cold: dict[int, list[float]] = {count: [] for count in roots}
        for _ in range(SAMPLES):
            for count, root in roots.items():
                t0 = time.perf_counter()
                allocate_producer_id(root, "probe")
                warm[count].append(time.perf_counter() - t0)
                producer_ids._tables.pop((check_root(root) / producer_ids.PRODUCER_IDS_DIR).uri, None)
                t0 = time.perf_counter()
                allocate_producer_id(root, "probe")
                cold[count].append(time.perf_counter() - t0)
        rows = []
        for count, root in roots.items():
            table = Table.open(check_root(root) / producer_ids.PRODUCER_IDS_DIR)
            log_files = len((Location.of(table.uri) / "_delta_log").list())
            rows.append(
                [
                    f"after {count:,} ids",
                    _common.median(warm[count]) * 1e3,
                    _common.percentile(warm[count], 95) * 1e3,
                    _common.median(cold[count]) * 1e3,
                    log_files,
                    len(table.data_files()),
                ]
            )
        _common.print_table(["table", "warm p50 ms", "warm p95 ms", "cold p50 ms", "_delta_log files", "data files"], rows)
        print(f"   filling both took {filled:.0f} s")
        result.add(
            f"producer_ids allocate p50 @{late}/@{EARLY}", _common.median(warm[late]) / _common.median(warm[EARLY]), TARGET
        )
        result.add(
            f"producer_ids cold allocate p50 @{late}/@{EARLY}", _common.median(cold[late]) / _common.median(cold[EARLY]), TARGET
        )
    return result


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
