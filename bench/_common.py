"""Shared helpers: arguments, a temporary root, percentiles, tables, ratio lines."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import lakelog.log.partition as partition_module
from lakelog.log import PartitionLog
from lakelog.store import maintenance


def parser(description: str) -> argparse.ArgumentParser:
    args = argparse.ArgumentParser(description=description)
    args.add_argument("--quick", action="store_true", help="a small run (seconds, not minutes)")
    args.add_argument("--root", help="folder to create the temporary root in (default: the system temp folder)")
    args.add_argument("--keep", action="store_true", help="keep the temporary root (its path is printed)")
    return args


@contextlib.contextmanager
def temp_root(parent: str | None = None, keep: bool = False, prefix: str = "lakelog-bench-") -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield path
    finally:
        if keep:
            print(f"(root kept at {path})")
        else:
            shutil.rmtree(path, ignore_errors=True)


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
    name: str
    value: float
    target: float | None = None

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "INFO"
        return "PASS" if self.value <= self.target else "MISS"

    def line(self) -> str:
        target = f" (target <= {self.target:g})" if self.target is not None else " (no target)"
        return f"ratio {self.name}: {self.value:.3f}{target} {self.verdict}"


@dataclass
class Result:
    benchmark: str
    ratios: list[Ratio] = field(default_factory=list)

    def add(self, name: str, value: float, target: float | None = None) -> Ratio:
        ratio = Ratio(name, value, target)
        self.ratios.append(ratio)
        print(ratio.line())
        sys.stdout.flush()
        return ratio


# -- the maintenance hook -------------------------------------------------------

def log_maintains_itself() -> bool:
    """True once the log layer calls lakelog.store.maintenance itself after appends."""
    return hasattr(partition_module, "maintain") or hasattr(partition_module, "maintenance")


def maintenance_mode(requested: str) -> str:
    """'log' (PartitionLog does it), 'bench' (this benchmark calls it), or 'off'."""
    if requested == "auto":
        return "log" if log_maintains_itself() else "bench"
    return requested


def policy_for(log: PartitionLog) -> maintenance.MaintenancePolicy:
    values = log.config.values
    return maintenance.MaintenancePolicy(
        segment_files=int(values.get("segment.files", 200)),
        compression=str(values.get("compression.type", "snappy")),
    )


def after_append(log: PartitionLog, mode: str, policy: maintenance.MaintenancePolicy) -> None:
    """What the log's append path is expected to do after each commit (see maintenance.py)."""
    if mode == "bench":
        maintenance.maintain(log.table, policy)


def add_maintenance_flag(args: argparse.ArgumentParser) -> None:
    args.add_argument(
        "--maintenance",
        choices=("auto", "bench", "off"),
        default="auto",
        help="auto: call lakelog.store.maintenance.maintain after each append unless the log layer "
        "already does; bench: always call it here; off: never (shows the unmaintained cost)",
    )
