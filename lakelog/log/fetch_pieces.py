"""What a fetch reads in one go: a whole file, or, of a file larger than the fetch's budget, one row group.

A fetch's memory follows its budget, not the partition: a file larger than `max_bytes` (a compacted one,
S9.3) is read row group by row group, those its footer's offset statistics place in the range, so a
64 KB fetch of a 100 MB file decodes one row group, not the file. Footers are kept for the few large files
read last (data files never change under their name), so the next fetch of that file reads no footer, and
so are the last few row groups decoded, so a fetch that stops inside one (its record budget) costs the next
one no second decode.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import CorruptRecord
from lakelog.log.file_check import offset_bounds
from lakelog.log.partition_file import PartitionFile
from lakelog.store import Table

# Footers kept, of the large files read last (a footer of 100 row groups is some 100 KB).
FOOTERS_KEPT = 16
_footers: collections.OrderedDict[str, pq.FileMetaData] = collections.OrderedDict()
# Row groups decoded last (ROW_GROUP_BYTES each, lakelog.store.io.fileio), for fetches that stop inside one.
ROWS_KEPT = 4
_rows: collections.OrderedDict[tuple[str, tuple[int, ...] | None], pa.Table] = collections.OrderedDict()
_lock = threading.Lock()


@dataclass(frozen=True)
class Piece:
    """Offsets first..last of `entry` (all of it if `row_groups` is None), with its size on disk and rows."""

    entry: PartitionFile
    first: int
    last: int
    size_bytes: int
    num_records: int
    row_groups: tuple[int, ...] | None = None
    metadata: pq.FileMetaData | None = None


def pieces(table: Table, files: Iterator[PartitionFile], start: int, end: int, max_bytes: int) -> Iterator[Piece]:
    """The pieces holding [start, end) of `files` in order: files up to `max_bytes` whole, larger ones by row group."""
    for entry in files:
        if entry.size_bytes <= max_bytes:
            yield Piece(entry, entry.min_offset, entry.max_offset, entry.size_bytes, entry.num_records)
            continue
        metadata = footer(table, entry)
        bounds = offset_bounds(metadata) if metadata.num_row_groups > 1 else None
        if bounds is None or len(bounds) != metadata.num_row_groups:
            yield Piece(entry, entry.min_offset, entry.max_offset, entry.size_bytes, entry.num_records)
            continue
        last_group = len(bounds) - 1
        for group, (low, _) in enumerate(bounds):
            # A compacted file's range runs past its rows: its first and last groups claim the file's ends.
            first = entry.min_offset if group == 0 else low
            last = entry.max_offset if group == last_group else bounds[group + 1][0] - 1
            if last < start or first >= end:
                continue
            row_group = metadata.row_group(group)
            yield Piece(entry, first, last, row_group.total_byte_size, row_group.num_rows, (group,), metadata)


def read_piece(table: Table, piece: Piece) -> pa.Table:
    """The rows of a row-group piece, whole (checked against the footer by Table.read_file), kept for the next fetch.

    A fetch may stop inside a row group (its record budget); the next one starts there and takes the
    rows just decoded, not a second decode (the last ROWS_KEPT pieces are kept, ROW_GROUP_BYTES each).
    """
    key = (table.file_path(piece.entry), piece.row_groups)
    with _lock:
        found = _rows.get(key)
        if found is not None:
            _rows.move_to_end(key)
            return found
    rows = table.read_file(piece.entry, row_groups=piece.row_groups, metadata=piece.metadata)
    with _lock:
        _rows[key] = rows
        while len(_rows) > ROWS_KEPT:
            _rows.popitem(last=False)
    return rows


def footer(table: Table, entry: PartitionFile) -> pq.FileMetaData:
    """The footer of `entry`'s file (kept for the last FOOTERS_KEPT large files); CorruptRecord if unreadable."""
    path = table.file_path(entry)
    with _lock:
        found = _footers.get(path)
        if found is not None:
            _footers.move_to_end(path)
            return found
    try:
        metadata = table.io.parquet_metadata(path)
    except FileNotFoundError as error:
        raise CorruptRecord(f"data file {entry.path} of {table.uri} is missing", path=path) from error
    except pa.ArrowException as error:
        raise CorruptRecord(f"data file {entry.path} of {table.uri} has an unreadable footer: {error}", path=path) from error
    with _lock:
        _footers[path] = metadata
        while len(_footers) > FOOTERS_KEPT:
            _footers.popitem(last=False)
    return metadata


__all__ = ["FOOTERS_KEPT", "ROWS_KEPT", "Piece", "footer", "pieces", "read_piece"]
