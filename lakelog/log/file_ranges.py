"""The rows of an offset range [start, end), read from the active files that hold them.

The transaction index (lakelog.log.transactions) and the producer index
(lakelog.log.producer_index) catch up the same way: from their position, they
read the files whose offset ranges tile [start, end), found by bisect. A
key-compacted file holds fewer rows than its offset range (S9.3), so the
ranges, not the row counts, must meet; ranges that stop short are a missing
file, CorruptRecord.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CorruptRecord
from lakelog.log.partition_file import PartitionFile
from lakelog.store import Table

logger = logging.getLogger(__name__)


def read_offset_range(
    table: Table,
    files: list[PartitionFile],
    start: int,
    end_offset: int,
    columns: list[str],
    *,
    none_held_message: bool = False,
    known: Callable[[PartitionFile], bool] | None = None,
) -> list[tuple[PartitionFile, pa.Table | None]]:
    """Each file holding offsets of [start, end_offset) with its `columns` rows in that range, in offset order.

    `known` is called on each file in order; a file wholly in the range for which it is True is not read: its rows are None (the caller
    knows what it needs of them from the file's add action).

    `files` are the snapshot's active files (partition_files(table)), ordered by first
    offset; `start` is at or above the first one's and below `end_offset`. The
    first file is read from `start` and the last one's rows at or past
    `end_offset` are dropped. CorruptRecord if a file is missing or unreadable, or
    if the files' ranges stop short of `end_offset`; with `none_held_message`,
    when no file holds `start` it says so ("no data file holds offsets ...").
    """
    # Files tile the offsets in order, so their max offsets are sorted too.
    first = bisect.bisect_left(files, start, key=lambda entry: entry.max_offset)
    chunks: list[tuple[PartitionFile, pa.Table | None]] = []
    covered = start
    for entry in files[first:]:
        if entry.min_offset >= end_offset or entry.min_offset > covered:
            break
        covered = entry.max_offset + 1
        # `known` sees every file in order (a stateful one follows them); only a file wholly in the range is skipped.
        if known is not None and known(entry) and entry.min_offset >= start and entry.max_offset < end_offset:
            chunks.append((entry, None))
            continue
        predicate = None if entry.min_offset >= start else pc.field("offset") >= start
        chunks.append((entry, table.read_file(entry, columns, predicate)))
    if not chunks and none_held_message:
        raise CorruptRecord(f"{table.uri}: no data file holds offsets {start}-{end_offset - 1}", path=table.uri)
    if covered < end_offset:
        raise CorruptRecord(
            f"{table.uri}: offsets {start}-{end_offset - 1} are not all held by data files (they stop at {covered - 1})",
            path=table.uri,
        )
    last, rows = chunks[-1]
    if rows is not None and rows.num_rows and rows.column("offset")[-1].as_py() >= end_offset:
        chunks[-1] = (last, rows.filter(pc.field("offset") < end_offset))
    return chunks
