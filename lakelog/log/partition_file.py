"""A partition's data file: the offsets, producer ids and null keys its Delta statistics give, and the offset order.

The store's `DataFile` knows Delta's statistics by column name and no partition's columns. A `PartitionFile` is
that file read as a partition log's: its first and last offset (a key-compacted file claims the whole range of
the files it replaced, S9.3), its lowest and highest producer id, its rows with a null key; and its rows are
checked against them as they are read (lakelog.log.file_check).

`partition_files(table)` is the snapshot's files in offset order (then path), the index every append, fetch and
LSO computation walks. It is kept on the store's snapshot as a derived value (`Table.derived`), once per version,
rather than in a cache of this layer: the snapshot is the one thing that knows when its files change, and it
moves the index across an append's commit as it applies it (the new files only: no sort of the whole list), so
the index can never be stale for a version nor outlive its snapshot (a handle replaced by a cold open drops it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakelog.log.file_check import OFFSET, FileCheck
from lakelog.store import DataFile, FileChange, MergeOrder, Table
from lakelog.store.delta.data_file import integer
from lakelog.store.delta.snapshot import Snapshot

PRODUCER_ID = "producer_id"
KEY = "key"


@dataclass(frozen=True, eq=False, kw_only=True)
class PartitionFile(DataFile):
    """One active file of a partition log, with the offset and producer-id ranges its statistics give."""

    min_offset: int = 0
    max_offset: int = 0
    min_producer_id: int = 0
    max_producer_id: int = 0
    # Rows whose key is null, from the statistics (-1: not recorded): a file of markers only has no keyed row.
    null_keys: int = -1

    def read_check(self, table_uri: str, uri: str, schema: pa.Schema) -> FileCheck | None:
        """The rows' offsets held to the file's range and count (lakelog.log.file_check)."""
        if not FileCheck.applies(self, schema):
            return None
        return FileCheck(self, f"data file {self.path} of {table_uri} (offsets {self.min_offset}-{self.max_offset})", uri)


def partition_file(file: DataFile) -> PartitionFile:
    """`file` read as a partition's (statistics a file lacks read as 0, and null keys as -1)."""
    if isinstance(file, PartitionFile):
        return file
    minimums, maximums = file.min_values, file.max_values
    null_keys = file.null_count.get(KEY)
    return PartitionFile(
        path=file.path,
        size_bytes=file.size_bytes,
        num_records=file.num_records,
        modification_time_ms=file.modification_time_ms,
        tags=file.tags,
        min_values=minimums,
        max_values=maximums,
        null_count=file.null_count,
        min_offset=integer(minimums.get(OFFSET)),
        max_offset=integer(maximums.get(OFFSET)),
        min_producer_id=integer(minimums.get(PRODUCER_ID)),
        max_producer_id=integer(maximums.get(PRODUCER_ID)),
        null_keys=null_keys if type(null_keys) is int else -1,
    )


def partition_files(table: Table | Snapshot) -> list[PartitionFile]:
    """The active files of a table's snapshot (or of a snapshot) in offset order (then path), made once per
    snapshot version: the list is shared, never to be changed."""
    return table.derived(_INDEX, _index, _step)


def _order(file: PartitionFile) -> tuple[int, str]:
    return file.min_offset, file.path


def _index(files: list[DataFile]) -> list[PartitionFile]:
    ordered = [partition_file(file) for file in files]
    ordered.sort(key=_order)
    return ordered


def _step(ordered: list[PartitionFile], change: FileChange) -> list[PartitionFile] | None:
    """The index across a commit that only adds files after the last one (an append's); None for any other."""
    if change.removed:
        return None
    if not change.added:
        return ordered
    added = sorted((partition_file(file) for file in change.added), key=_order)
    if ordered and _order(added[0]) < _order(ordered[-1]):
        return None
    return ordered + added


# The snapshot's key of the index (an object of this module: no other layer's value can take it).
_INDEX: Any = object()

# The small-file merge keeps offset order: files are merged with their neighbours in `partition_files`.
PARTITION_ORDER = MergeOrder(OFFSET, partition_files)


__all__ = ["KEY", "OFFSET", "PARTITION_ORDER", "PRODUCER_ID", "PartitionFile", "partition_file", "partition_files"]
