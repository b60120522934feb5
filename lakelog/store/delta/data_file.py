"""One active data file of a Delta table, as its add action describes it (Delta's PROTOCOL.md, "Add File").

`DataFile` holds what Delta itself knows of a file: its path, size, modificationTime, tags and its statistics
(numRecords, and minValues / maxValues / nullCount by column), parsed from the add's `stats` once per file. It
knows no table's columns: a layer above reads the statistics of the columns it owns (the log reads `offset`).

A layer above may promise more of a file's rows than Delta does (that a column's values are strictly increasing
within the file's min and max); its files then answer `read_check` with a `RowCheck`, which `Table.read_file`
runs on the footer and on the rows read, before any row leaves the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq


class RowCheck(Protocol):
    """What a file's statistics promise of its rows, checked as `Table.read_file` reads them."""

    @property
    def column(self) -> str:
        """The column the check reads (`read_file` reads it too when the caller asks for other columns)."""

    @property
    def where(self) -> str:
        """The file as errors name it."""

    def footer(self, metadata: pq.FileMetaData) -> None:
        """Raise unless the footer agrees with the promise (before any row is read)."""

    def rows(
        self, values: pa.ChunkedArray, *, whole: bool, row_groups: Sequence[int] | None, metadata: pq.FileMetaData | None
    ) -> None:
        """Raise unless the `column` values read agree: the whole file (`whole`), its `row_groups`, or rows a
        predicate kept (neither)."""


@dataclass(frozen=True)
class DataFile:
    """One active data file of a snapshot: its add action, statistics parsed (missing ones read as 0 or empty)."""

    path: str
    size_bytes: int = 0
    num_records: int = 0
    # The add action's modificationTime: when the file was committed, by the clock its writer passed in.
    modification_time_ms: int = 0
    # The add action's `tags` (what its writer said of the file), sorted by key.
    tags: tuple[tuple[str, str], ...] = ()
    # The statistics by column name, as the add's `stats` give them.
    min_values: Mapping[str, Any] = field(default_factory=dict, repr=False)
    max_values: Mapping[str, Any] = field(default_factory=dict, repr=False)
    null_count: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __hash__(self) -> int:  # the statistics are maps: the file is its path, size and time
        return hash((self.path, self.size_bytes, self.modification_time_ms))

    def tag(self, key: str) -> str | None:
        for name, value in self.tags:
            if name == key:
                return value
        return None

    def read_check(self, table_uri: str, uri: str, schema: pa.Schema) -> RowCheck | None:
        """The check of this file's rows as they are read (None here: Delta promises nothing of them)."""
        return None


def data_file(add: Mapping[str, Any]) -> DataFile:
    """A `DataFile` from an add action's body."""
    stats = add.get("stats")
    parsed: Any = {}
    if isinstance(stats, str) and stats:
        try:
            parsed = json.loads(stats)
        except ValueError:
            parsed = {}
    if not isinstance(parsed, dict):
        parsed = {}
    return DataFile(
        path=add["path"],
        size_bytes=integer(add.get("size")),
        num_records=integer(parsed.get("numRecords")),
        modification_time_ms=integer(add.get("modificationTime")),
        tags=_tags(add.get("tags")),
        min_values=_values(parsed.get("minValues")),
        max_values=_values(parsed.get("maxValues")),
        null_count=_values(parsed.get("nullCount")),
    )


def integer(value: Any) -> int:
    """A statistic that must be an integer, or 0 (not a bool, nor anything else JSON gives)."""
    return value if type(value) is int else 0


def _values(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _tags(value: Any) -> tuple[tuple[str, str], ...]:
    """An add action's tags as sorted pairs (a map of strings; anything else reads as none)."""
    if not isinstance(value, dict) or not value:
        return ()
    return tuple(sorted((key, item) for key, item in value.items() if type(key) is str and type(item) is str))


def row_groups_of(rows: pa.Table, row_groups: Sequence[int], metadata: pq.FileMetaData | None) -> pa.Table:
    """The rows of a file's `row_groups`, from the rows it was written from (one row group when not known)."""
    if metadata is None:
        return rows
    starts = [0]
    for index in range(metadata.num_row_groups):
        starts.append(starts[-1] + metadata.row_group(index).num_rows)
    return pa.concat_tables([rows.slice(starts[group], starts[group + 1] - starts[group]) for group in row_groups])


__all__ = ["DataFile", "RowCheck", "data_file", "integer", "row_groups_of"]
