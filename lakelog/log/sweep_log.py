"""`__sweeps`: one row per sweep of the root, so that an operator can see when the broker's timers last ran.

Kafka's broker runs its timers itself (transaction timeouts, session timeouts, the log cleaner); lakelog's run when
`lakelog coordinator sweep` (or the Airflow sweep) runs. A sweep that finds nothing to do changes no table, so it
leaves this row behind: when it started and ended, which steps it ran and how much each did. The row is a fact
about the past, never an input to a decision: no rule reads it, and no safety rests on when a sweep ran (S9.5).

One partition, compacted by key (S9.3): every row has the same key, so the log keeps the newest row or so; the sweep
that appends a row compacts the partition when it is due, as `__sink_batches` is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from lakelog.log.compaction import compact_partition
from lakelog.log.fetch import READ_UNCOMMITTED
from lakelog.log.records import payload_table
from lakelog.log.topics import existing_internal_partition, open_internal_partition
from lakelog.store import Location

SWEEPS_LOG = "__sweeps"
SWEEPS_CONFIG = {"cleanup.policy": "compact"}
SWEEP_KEY = b"sweep"
PAGE_BYTES = 1 << 20


@dataclass(frozen=True)
class SweepRow:
    """One sweep: when it ran (ms), the steps it ran, and how many things each step changed or reported."""

    started_ms: int
    finished_ms: int
    steps: list[str]
    counts: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        row = {"started_ms": self.started_ms, "finished_ms": self.finished_ms, "steps": self.steps, "counts": dict(self.counts)}
        return json.dumps(row, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes) -> SweepRow:
        row = json.loads(value)
        return cls(int(row["started_ms"]), int(row["finished_ms"]), list(row["steps"]), dict(row.get("counts") or {}))


def record_sweep(root: str | Location, row: SweepRow) -> None:
    """Append the sweep's row (one commit), then compact the log if it is due."""
    log = open_internal_partition(root, SWEEPS_LOG, 0, 1, config=SWEEPS_CONFIG)
    log.append(payload_table([row.to_json()], keys=[SWEEP_KEY], timestamps_ms=[row.finished_ms]))
    compact_partition(log, row.finished_ms)


def last_sweep(root: str | Location) -> SweepRow | None:
    """The newest sweep's row; None if no sweep has recorded one (or its row does not decode)."""
    log = existing_internal_partition(root, SWEEPS_LOG, 0)
    if log is None:
        return None
    end = log.high_watermark()
    if end <= log.log_start_offset():
        return None
    fetched = log.fetch(end - 1, 1, PAGE_BYTES, READ_UNCOMMITTED)
    values = [value for value in fetched.rows.column("value").to_pylist() if value is not None]
    if not values:
        return None
    try:
        return SweepRow.from_json(values[-1])
    except (ValueError, KeyError, TypeError):
        return None


__all__ = ["SWEEPS_LOG", "SweepRow", "last_sweep", "record_sweep"]
