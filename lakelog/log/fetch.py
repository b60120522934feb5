"""A partition's fetch: the isolation levels, what a fetch returns, and the read of an offset range file by file (S1.4, S5).

`PartitionLog.fetch` decides the range on the snapshot in hand (the high watermark, or the LSO and the aborted
transactions for read_committed) and `read_range` reads it: the files holding it in offset order, a few ahead
(lakelog.log.fetch_files), within the fetch's budgets; a file larger than the byte budget row group by row group
(lakelog.log.fetch_pieces). Every file read is checked against its add action (lakelog.log.file_check): a
damaged one is CorruptRecord, after the rows before it are returned.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CorruptRecord, InvalidRequest, OffsetOutOfRange
from lakelog.log.fetch_files import AbortedRows, contiguous, read_ahead
from lakelog.log.fetch_pieces import Piece, pieces, read_piece
from lakelog.log.partition_file import partition_files
from lakelog.store import Table

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


@dataclass(frozen=True)
class FetchResult:
    """What a fetch returns: rows in offset order, and the offset the next fetch starts from.

    `next_offset` is past every row the fetch read, also those it filtered out,
    so it may be beyond the last row returned plus one (S5.4).
    """

    rows: pa.Table
    next_offset: int


def check_fetch(start_offset: int, max_records: int, max_bytes: int, isolation_level: str) -> None:
    """OffsetOutOfRange for a start or budget that is no integer or a budget below 1; InvalidRequest for an unknown level."""
    for name, value in (("start_offset", start_offset), ("max_records", max_records), ("max_bytes", max_bytes)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise OffsetOutOfRange(f"{name} must be an integer, not {value!r}")
    if max_records < 1 or max_bytes < 1:
        raise OffsetOutOfRange(f"fetch budgets must be positive, got {max_records} records, {max_bytes} bytes")
    if isolation_level not in ISOLATION_LEVELS:
        raise InvalidRequest(f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation_level!r}")


def check_in_range(where: str, start_offset: int, log_start: int, leo: int) -> None:
    """OffsetOutOfRange unless start_offset is in [log start offset, LEO] (S9.1); `where` names the partition."""
    if not log_start <= start_offset <= leo:
        raise OffsetOutOfRange(
            f"{where}: offset {start_offset} is outside [{log_start}, {leo}]",
            log_start_offset=log_start,
            log_end_offset=leo,
        )


def read_range(
    table: Table,
    where: str,
    start_offset: int,
    end_offset: int,
    max_records: int,
    max_bytes: int,
    committed: AbortedRows | None,
) -> FetchResult:
    """Read [start_offset, end_offset) of `table`'s snapshot in hand file by file; `committed` filters for read_committed.

    CorruptRecord if no active file holds `start_offset` (compaction or retention removed it after the snapshot:
    the caller reloads once); `where` names the partition in that error.
    """
    chunks: list[pa.Table] = []
    records = size = 0
    next_offset = start_offset
    files = partition_files(table)
    # Offsets are dense and files do not overlap, so max offsets are sorted too.
    first = bisect.bisect_left(files, start_offset, key=lambda entry: entry.max_offset)
    in_range = (pc.field("offset") >= start_offset) & (pc.field("offset") < end_offset)

    def read(piece: Piece) -> pa.Table:
        whole = piece.first >= start_offset and piece.last < end_offset
        if piece.row_groups is None:
            return table.read_file(piece.entry) if whole else table.read_file(piece.entry, None, in_range)
        # Whole row groups are read (and checked against the footer's offsets), then cut to the range.
        rows = read_piece(table, piece)
        return rows if whole else rows.filter(in_range)

    wanted = pieces(table, contiguous(files[first:], start_offset, end_offset), start_offset, end_offset, max_bytes)
    try:
        for piece, rows in read_ahead(read, wanted, max_bytes, max_records):
            # Rows just read are no slices, so their buffers' total is their size (nbytes costs ~10x more).
            read_bytes = rows.get_total_buffer_size()
            if next_offset > start_offset and size + read_bytes > max_bytes:
                break
            size += read_bytes
            next_offset = min(piece.last + 1, end_offset)
            if committed is not None:
                rows = committed.filter(rows, piece.entry)
            if rows.num_rows:
                chunks.append(rows)
                records += rows.num_rows
            if records >= max_records or size >= max_bytes:
                break
    except CorruptRecord:
        if next_offset == start_offset:
            raise
        # The offsets before the damaged file are good: they are returned, and the next fetch meets the damage.
    if next_offset == start_offset < end_offset:
        raise CorruptRecord(f"{where}: no data file of version {table.version} holds offset {start_offset}", path=table.uri)
    if not chunks:
        return FetchResult(table.schema.empty_table(), next_offset)
    # Each file is in offset order and files follow each other: no sort needed.
    result = pa.concat_tables(chunks)
    if result.num_rows > max_records:
        result = result.slice(0, max_records)
        next_offset = result.column("offset")[-1].as_py() + 1
    return FetchResult(result, next_offset)


__all__ = ["ISOLATION_LEVELS", "READ_COMMITTED", "READ_UNCOMMITTED", "FetchResult", "check_fetch", "check_in_range", "read_range"]
