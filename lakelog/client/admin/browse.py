"""Records of a partition as an operator browses them, and a group's lag counted in records a consumer would get.

Both read the partition's log through the same fetch a consumer makes (S5.2, S5.3), so what they show is what a
consumer of each isolation level sees:
- `browse` reads a page of every row (read_uncommitted, control rows included) and marks each as a consumer of
  read_committed would treat it: `committed`, `aborted` (its transaction's marker aborted it), `open` (at or past
  the LSO: its transaction is undecided), or `control` (a commit or abort marker, never delivered);
- `records_lag` counts the records a consumer of the given isolation level would still be handed from its committed
  offset on: markers are never counted, nor, for read_committed, aborted records or those past the LSO (a lag
  measured as LSO - committed counts the markers, which a consumer never receives, so a drained group would show a
  lag forever). The count reads at most `max_offsets` offsets; past that it says so (`exact` False).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lakelog.log import PartitionLog, open_partition
from lakelog.log.fetch import READ_COMMITTED, READ_UNCOMMITTED
from lakelog.store import Location

PAGE_BYTES = 8 << 20
MAX_LAG_OFFSETS = 200_000

COMMITTED = "committed"
ABORTED = "aborted"
OPEN = "open"
CONTROL = "control"


@dataclass(frozen=True)
class BrowsedRecord:
    """One row of a partition with what a read_committed consumer makes of it (`status`)."""

    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    control: str | None
    status: str


@dataclass(frozen=True)
class BrowsedPage:
    records: list[BrowsedRecord]
    log_start_offset: int
    last_stable_offset: int
    high_watermark: int
    next_offset: int


@dataclass(frozen=True)
class RecordsLag:
    """Records a consumer would still be handed from `committed_offset` on; `exact` False: at least `records`."""

    records: int
    exact: bool


def browse(root: str | Location, topic: str, partition: int, start_offset: int | None = None, limit: int = 50) -> BrowsedPage:
    """Up to `limit` rows from `start_offset` (the log start when None, clamped into the log), each with its status."""
    log = open_partition(root, topic, partition)
    log_start, stable, high = log.log_start_offset(), log.last_stable_offset(), log.high_watermark()
    offset = log_start if start_offset is None else min(max(start_offset, log_start), high)
    rows: list[pa.Table] = []
    taken, next_offset = 0, offset
    while next_offset < high and taken < limit:
        fetched = log.fetch(next_offset, limit - taken, PAGE_BYTES, READ_UNCOMMITTED)
        if fetched.next_offset <= next_offset:
            break
        rows.append(fetched.rows)
        taken += fetched.rows.num_rows
        next_offset = fetched.next_offset
    every = pa.concat_tables(rows) if rows else None
    end = next_offset
    visible = _committed_offsets(log, offset, min(end, stable)) if every is not None else set()
    records = []
    for row in every.to_pylist() if every is not None else []:
        if row["control"] is not None:
            status = CONTROL
        elif row["offset"] >= stable:
            status = OPEN
        elif row["offset"] in visible:
            status = COMMITTED
        else:
            status = ABORTED
        stamp = row["timestamp"]
        records.append(
            BrowsedRecord(
                offset=row["offset"],
                timestamp_ms=None if stamp is None else int(stamp.timestamp() * 1000),
                key=row["key"],
                value=row["value"],
                headers=[(header["key"], header["value"]) for header in row["headers"] or []],
                producer_id=row["producer_id"],
                producer_epoch=row["producer_epoch"],
                is_transactional=row["is_transactional"],
                control=row["control"],
                status=status,
            )
        )
    return BrowsedPage(records, log_start, stable, high, end)


def records_lag(
    root: str | Location,
    topic: str,
    partition: int,
    committed_offset: int | None,
    isolation_level: str = READ_COMMITTED,
    max_offsets: int = MAX_LAG_OFFSETS,
) -> RecordsLag | None:
    """The records a consumer of `isolation_level` would still get from `committed_offset` on (None: no offset)."""
    if committed_offset is None:
        return None
    log = open_partition(root, topic, partition)
    end = log.last_stable_offset() if isolation_level == READ_COMMITTED else log.high_watermark()
    start = max(committed_offset, log.log_start_offset())
    if start >= end:
        return RecordsLag(0, True)
    stop = min(end, start + max_offsets)
    count, offset = 0, start
    while offset < stop:
        fetched = log.fetch(offset, 1 << 30, PAGE_BYTES, isolation_level)
        if fetched.next_offset <= offset:
            break
        offsets = fetched.rows.column("offset").to_pylist()
        controls = fetched.rows.column("control").to_pylist()
        count += sum(1 for at, control in zip(offsets, controls, strict=True) if control is None and at < stop)
        offset = fetched.next_offset
    return RecordsLag(count, stop == end)


def _committed_offsets(log: PartitionLog, start: int, end: int) -> set[int]:
    """Offsets in [start, end) a read_committed consumer is handed (data rows of no aborted transaction)."""
    offsets: set[int] = set()
    offset = start
    while offset < end:
        fetched = log.fetch(offset, 1 << 30, PAGE_BYTES, READ_COMMITTED)
        if fetched.next_offset <= offset:
            break
        offsets.update(at for at in fetched.rows.column("offset").to_pylist() if at < end)
        offset = fetched.next_offset
    return offsets
