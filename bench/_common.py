"""Shared helpers: arguments, a temporary root, percentiles, tables, ratio lines, maintenance summaries."""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from lakelog.log import PartitionLog
from lakelog.store import Location


def parser(description: str) -> argparse.ArgumentParser:
    args = argparse.ArgumentParser(description=description)
    args.add_argument("--quick", action="store_true", help="a small run (seconds, not minutes)")
    args.add_argument("--root", help="folder to create the temporary root in (default: the system temp folder)")
    args.add_argument("--keep", action="store_true", help="keep the temporary root (its path is printed)")
    return args


@contextlib.contextmanager
def temp_root(parent: str | None = None, keep: bool = False, prefix: str = "lakelog-bench-") -> Iterator[str]:
    if parent is not None:
        os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield path
    finally:
        if keep:
            print(f"(root kept at {path})")
        else:
            location = Location.of(path)
            location.io.delete_tree(location.uri)


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
        print("  ".join(c.ljust(w) if n == 0 or i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
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
    return (
        f"version {log.version:,}, {len(log.table.files()):,} active files, "
        f"{len(log_files):,} files in _delta_log"
    )
