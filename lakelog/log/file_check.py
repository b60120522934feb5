"""A partition file's rows checked against its add action's statistics before any of them leaves the reader.

An add action says which offsets its file holds (first and last offset, row count). A file whose bytes
are another's (copied over it), or whose footer or rows disagree with those statistics, is damage, not
data: `CorruptRecord` naming the file and the offsets it should hold. The checks cost O(rows read): the
footer's row count and the offset column's statistics per row group, then the first and last offset and
the count of the rows read. A dense file holds every offset of its range; a key-compacted file (S9.3)
claims a range wider than its rows, which must lie inside it in strictly increasing order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import CorruptRecord

OFFSET = "offset"


class OffsetClaim(Protocol):
    """What a partition file's add action claims (lakelog.log.partition_file.PartitionFile)."""

    @property
    def num_records(self) -> int: ...

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...


@dataclass(frozen=True)
class FileCheck:
    """What `entry`'s add action says of the file at `path`; `where` names it in errors (a `RowCheck` of the store)."""

    entry: OffsetClaim
    where: str
    path: str
    column: str = OFFSET

    @staticmethod
    def applies(entry: OffsetClaim, schema: pa.Schema) -> bool:
        """Whether the add action has offset statistics to check (a partition's file; no other table's)."""
        return entry.num_records > 0 and entry.max_offset >= entry.min_offset and OFFSET in schema.names

    @property
    def dense(self) -> bool:
        return self.entry.num_records == self.entry.max_offset - self.entry.min_offset + 1

    def fail(self, found: str) -> CorruptRecord:
        entry = self.entry
        return CorruptRecord(
            f"{self.where} should hold {entry.num_records} records at offsets {entry.min_offset}-{entry.max_offset}, but {found}",
            path=self.path,
            min_offset=entry.min_offset,
            max_offset=entry.max_offset,
        )

    def footer(self, metadata: pq.FileMetaData) -> None:
        """The footer's row count and offset statistics against the add action's (before any row is read)."""
        if metadata.num_rows != self.entry.num_records:
            raise self.fail(f"its footer counts {metadata.num_rows} rows")
        bounds = offset_bounds(metadata)
        if bounds is None or not bounds:
            return
        low, high = min(b[0] for b in bounds), max(b[1] for b in bounds)
        outside = low < self.entry.min_offset or high > self.entry.max_offset
        if outside or (self.dense and (low, high) != (self.entry.min_offset, self.entry.max_offset)):
            raise self.fail(f"its footer holds offsets {low}-{high}")

    def rows(
        self, values: pa.ChunkedArray, *, whole: bool, row_groups: Sequence[int] | None, metadata: pq.FileMetaData | None
    ) -> None:
        """The offsets read: all of the file (`whole`), its `row_groups` (`metadata`: its footer), or rows a predicate
        kept (neither)."""
        self.offsets(values, whole, None if row_groups is None else span_of(metadata, row_groups))

    def offsets(self, offsets: pa.ChunkedArray, whole: bool, span: tuple[int, int] | None = None) -> None:
        """The offsets read: all of the file (`whole`), the row groups spanning `span`, or rows a predicate kept."""
        count = len(offsets)
        if whole and count != self.entry.num_records:
            raise self.fail(f"{count} rows were read")
        if not count:
            return
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        low, high = (self.entry.min_offset, self.entry.max_offset) if whole or span is None else span
        if whole and self.dense:
            if (first, last) != (low, high):
                raise self.fail(f"its rows hold offsets {first}-{last}")
            return
        if span is not None and self.dense and (first, last, count) != (low, high, high - low + 1):
            raise self.fail(f"its rows for offsets {low}-{high} hold {count} rows at {first}-{last}")
        if first < self.entry.min_offset or last > self.entry.max_offset:
            raise self.fail(f"its rows hold offsets {first}-{last}")
        if count > 1 and not bool(np.all(np.diff(offsets.to_numpy()) > 0)):
            raise self.fail("its offsets are not strictly increasing")


def offset_bounds(metadata: pq.FileMetaData) -> list[tuple[int, int]] | None:
    """Per row group, the (min, max) of the offset column its statistics give; None if any group lacks them."""
    schema = metadata.schema
    column = next((index for index in range(metadata.num_columns) if schema.column(index).path == OFFSET), None)
    if column is None:
        return None
    bounds = []
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if group.num_rows == 0:
            continue
        stats = group.column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        bounds.append((int(stats.min), int(stats.max)))
    return bounds


def span_of(metadata: pq.FileMetaData | None, row_groups: Sequence[int]) -> tuple[int, int] | None:
    """The offsets the row groups `row_groups` of a file hold, by its footer's statistics (None if unknown)."""
    if metadata is None or not row_groups:
        return None
    bounds = offset_bounds(metadata)
    if bounds is None or len(bounds) != metadata.num_row_groups:
        return None
    return bounds[row_groups[0]][0], bounds[row_groups[-1]][1]


__all__ = ["OFFSET", "FileCheck", "offset_bounds", "span_of"]
