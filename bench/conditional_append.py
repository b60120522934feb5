"""Conditional append (KIP-27 expected offset = log end offset) vs plain append latency.

Partition 0 gets single-record appends carrying `expected_offset` equal to the
log end offset of the snapshot in hand; partition 1 gets plain single-record
appends (no producer id, no expected offset). The two are timed alternately,
append by append, so load hits both alike. Prints p50/p95 of each and the
ratios conditional/plain. Both sides include the maintenance the log runs
after each commit. No target was set: the ratios are informational (the
check is one integer comparison on state already in hand, so expect about 1).
"""

from __future__ import annotations

import time

from bench import _common
from lakelog.log import BatchHeader, create_topic, open_partition, payload_table

APPENDS = 500
APPENDS_QUICK = 100
WARMUP = 5


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    count = APPENDS_QUICK if quick else APPENDS
    headline = f"{count} single-record appends each, conditional (expected_offset=LEO) vs plain"
    with _common.session("conditional_append", headline, root_parent, keep) as (result, root):
        create_topic(root, "conditional", 2)
        conditional = open_partition(root, "conditional", 0)
        plain = open_partition(root, "conditional", 1)
        maintenance = {"conditional": _common.MaintenanceTally(), "plain": _common.MaintenanceTally()}
        payload = payload_table([b"v" * 100])
        samples: dict[str, list[float]] = {"conditional": [], "plain": []}

        def append_conditional() -> float:
            t0 = time.perf_counter()
            result = conditional.append(payload, BatchHeader(expected_offset=conditional.log_end_offset()))
            took = time.perf_counter() - t0
            assert not result.duplicate
            maintenance["conditional"].add(conditional)
            return took

        def append_plain() -> float:
            t0 = time.perf_counter()
            plain.append(payload)
            took = time.perf_counter() - t0
            maintenance["plain"].add(plain)
            return took

        for n in range(WARMUP + count):
            if n % 2:
                took_conditional, took_plain = append_conditional(), append_plain()
            else:
                took_plain, took_conditional = append_plain(), append_conditional()
            if n >= WARMUP:
                samples["conditional"].append(took_conditional)
                samples["plain"].append(took_plain)
        assert conditional.log_end_offset() == WARMUP + count
        rows = [
            [name, len(values), _common.median(values) * 1e3, _common.percentile(values, 95) * 1e3, max(values) * 1e3]
            for name, values in samples.items()
        ]
        _common.print_table(["append", "samples", "p50 ms", "p95 ms", "max ms"], rows)
        for name, log in (("conditional", conditional), ("plain", plain)):
            print(f"   {name} at the end: {_common.table_line(log)}; {maintenance[name].line()}")
        result.add(
            "conditional_append p50 conditional/plain",
            _common.median(samples["conditional"]) / _common.median(samples["plain"]),
        )
        result.add(
            "conditional_append p95 conditional/plain",
            _common.percentile(samples["conditional"], 95) / _common.percentile(samples["plain"], 95),
        )
    return result


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
