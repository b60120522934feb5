"""A transform run's input: the planned partition scans read in slices of rows, partition after partition, and
how its offsets read in log lines."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa

from lakelog.log.scan import PartitionScan

# How much of a partition's files one read takes at a time (a bound on memory beside the record budget).
READ_BYTES = 16 << 20


@dataclass
class Slice:
    """Rows of one input partition (None: the partition's end was reached) and the offset after them."""

    partition: int
    rows: pa.Table | None
    next_offset: int
    outputs: list[pa.Table] | None = None


class Reader:
    """The plan's rows, partition after partition, in slices of a size the caller chooses."""

    def __init__(self, scans: list[PartitionScan]) -> None:
        self._chunks = _chunks(scans)
        self._rows: pa.Table | None = None
        self._partition = 0
        self._at = 0

    def next_slice(self, limit: int) -> Slice | None:
        """Up to `limit` rows of the partition being read; a slice without rows at each partition's end; None at the end."""
        if self._rows is None or self._at >= self._rows.num_rows:
            chunk = next(self._chunks, None)
            if chunk is None:
                return None
            scan, rows = chunk
            if rows is None:
                return Slice(scan.partition, None, scan.end_offset)
            self._rows, self._partition, self._at = rows, scan.partition, 0
        rows = self._rows.slice(self._at, limit)
        self._at += rows.num_rows
        return Slice(self._partition, rows, rows.column("offset")[-1].as_py() + 1)


def _chunks(scans: list[PartitionScan]) -> Iterator[tuple[PartitionScan, pa.Table | None]]:
    for scan in scans:
        for rows in scan.read_kafka_rows(READ_BYTES):
            yield scan, rows
        yield scan, None


def span(rows: pa.Table) -> str:
    """The offsets a slice of rows covers, as log lines show them."""
    offsets = rows.column("offset")
    return f"[{offsets[0].as_py()}, {offsets[-1].as_py()}]"


def offset_text(offset: int | None) -> str:
    """An offset as log lines show it (`none` where there is none)."""
    return "none" if offset is None else str(offset)


def offsets_text(topic: str, offsets: Mapping[int, int | None]) -> str:
    """Each partition's offset, as log lines show them."""
    return ", ".join(f"{topic}-{p} at {offset_text(offset)}" for p, offset in sorted(offsets.items()))
