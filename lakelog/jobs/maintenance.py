"""The coordinator sweep of a root, step by step: what `lakelog coordinator sweep`, the Airflow sweep operator and the
consume-transform-produce supervisor run, through one object instead of each building the coordinators itself.

Every step is idempotent and safe beside clients and other sweeps (each change is one strict commit, S4.7, S6.5,
S8.2, S9.1, S9.3, S9.4): overlapping or retried sweeps do no harm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from lakelog.coordinator.compaction.internal_compaction import InternalCompaction, compact_internal_logs
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.coordinator.transaction.coordinator import SweepReport, TransactionCoordinator
from lakelog.jobs.sink_records import SpentRecords, sweep_sink_records
from lakelog.jobs.spark_staging import StagingRemoval, clean_spark_staging
from lakelog.log.partition import wall_clock_ms
from lakelog.log.retention import PartitionCleaning, clean_topics
from lakelog.log.sweep_log import SweepRow, record_sweep
from lakelog.store import Location, open_root

# The sweep's steps, in the order `sweep` runs them; each may be skipped.
SWEEP_STEPS = ("transactions", "groups", "log-cleaner", "internal-compaction", "sink-records", "spark-staging")


class Sweeper:
    """The sweep's steps over one root. Kept across sweeps, each coordinator replays its log from where it last read."""

    def __init__(self, root: str | Location) -> None:
        self.root = open_root(root)
        self._transactions: TransactionCoordinator | None = None
        self._groups: GroupCoordinator | None = None

    def transactions(self) -> SweepReport:
        """Abort transactions past their timeout, complete decided ones, expire idle transactional ids (S4.5, S4.7)."""
        if self._transactions is None:
            self._transactions = TransactionCoordinator(self.root)
        return self._transactions.sweep()

    def groups(self) -> list[tuple[str, str]]:
        """Remove members past their session or rebalance timeout (S6.5): the (group, member id) pairs removed."""
        if self._groups is None:
            self._groups = GroupCoordinator(self.root)
        return self._groups.sweep()

    def log_cleaner(self, now_ms: int | None = None) -> list[PartitionCleaning]:
        """Retention and compaction of every topic by its cleanup.policy, on the wall clock (S9.1, S9.3)."""
        return clean_topics(self.root, wall_clock_ms() if now_ms is None else now_ms)

    def internal_compaction(self) -> list[InternalCompaction]:
        """Compact __consumer_offsets and __transaction_state by their record keys (S9.3)."""
        return compact_internal_logs(self.root)

    def sink_records(self, now_ms: int | None = None) -> list[SpentRecords]:
        """Tombstone batch records whose rows are all gone, then compact __sink_batches by key (S9.3, S9.4)."""
        return sweep_sink_records(self.root, wall_clock_ms() if now_ms is None else now_ms)

    def record(self, started_ms: int, steps: Iterable[str], report: Mapping[str, Any]) -> SweepRow:
        """Leave the sweep's row in `__sweeps` (lakelog.log.sweep_log): when it ran, its steps and how many things
        each list of `report` holds, for an operator to see (never read by a rule)."""
        counts: dict[str, int] = {}
        for key, value in report.items():
            for name, inner in value.items() if isinstance(value, Mapping) else [(key, value)]:
                if isinstance(inner, list):
                    counts[name] = len(inner)
        row = SweepRow(started_ms, wall_clock_ms(), list(steps), counts)
        record_sweep(self.root, row)
        return row

    def spark_staging(self, now_ms: int | None = None) -> list[StagingRemoval]:
        """Remove the staged files of Spark writes whose driver died before committing, past `staging.retention.ms`."""
        return clean_spark_staging(self.root, wall_clock_ms() if now_ms is None else now_ms)


def sweep(root: str | Location, skip: Iterable[str] = ()) -> dict[str, Any]:
    """One pass of every step but those in `skip` (names of SWEEP_STEPS), as `lakelog coordinator sweep` reports it."""
    left_out = set(skip)
    unknown = left_out - set(SWEEP_STEPS)
    if unknown:
        raise ValueError(f"unknown sweep step(s) {sorted(unknown)}; the steps are {', '.join(SWEEP_STEPS)}")
    sweeper = Sweeper(root)
    started_ms = wall_clock_ms()
    report: dict[str, Any] = {}
    if "transactions" not in left_out:
        report.update(dataclasses.asdict(sweeper.transactions()))
    if "groups" not in left_out:
        report["members_expired"] = [{"group": group, "member_id": member} for group, member in sweeper.groups()]
    if "log-cleaner" not in left_out:
        report["log_cleaner"] = [dataclasses.asdict(done) for done in sweeper.log_cleaner()]
    if "internal-compaction" not in left_out:
        report["internal_compaction"] = [dataclasses.asdict(done) for done in sweeper.internal_compaction()]
    if "sink-records" not in left_out:
        report["sink_records"] = [dataclasses.asdict(done) for done in sweeper.sink_records()]
    if "spark-staging" not in left_out:
        report["spark_staging"] = [dataclasses.asdict(done) for done in sweeper.spark_staging()]
    sweeper.record(started_ms, [step for step in SWEEP_STEPS if step not in left_out], report)
    return report


__all__ = ["SWEEP_STEPS", "Sweeper", "sweep"]
