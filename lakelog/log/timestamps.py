"""Offsets by time: the earliest offset of a partition whose record timestamp is at or after a given time.

Kafka answers ListOffsets for a timestamp from each segment's time index: the
first record, in offset order, whose timestamp is >= the one asked for. Record
timestamps are the producer's (or the append time when it gave none), so they
need not rise with offsets; the answer is the first such offset, not a bisection.
A partition table keeps no time index, so this reads the `timestamp` column of
its files in offset order and stops at the first file holding a match. Control
rows and rows of aborted transactions count, as in Kafka (a reader seeking there
skips them). A match at or past `end_offset` (the LSO or high watermark the
reader may see) is no answer, as Kafka's isolation-level check makes it.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log.fetch_files import read_ahead
from lakelog.log.partition import PartitionLog
from lakelog.log.partition_file import PartitionFile, partition_files

logger = logging.getLogger(__name__)


def offset_for_timestamp(log: PartitionLog, timestamp_ms: int, end_offset: int) -> int | None:
    """The earliest offset in [log start, `end_offset`) whose timestamp is >= `timestamp_ms`, or None."""
    start = log.log_start_offset()
    target_us = timestamp_ms * 1000
    in_range = (pc.field("offset") >= start) & (pc.field("offset") < end_offset)

    def read(entry: PartitionFile) -> pa.Table:
        whole = entry.min_offset >= start and entry.max_offset < end_offset
        return log.table.read_file(entry, ["offset", "timestamp"], None if whole else in_range)

    wanted = (entry for entry in partition_files(log.table) if entry.max_offset >= start and entry.min_offset < end_offset)
    # The files are read a few ahead, as a fetch reads them; the first holding a match ends the search.
    for _, rows in read_ahead(read, wanted, max_bytes=1 << 62, max_records=1 << 62):
        late = pc.greater_equal(rows.column("timestamp").cast(pa.int64()), target_us).fill_null(False)
        if pc.any(late).as_py():
            return int(pc.min(pc.filter(rows.column("offset"), late)).as_py())
    return None


__all__ = ["offset_for_timestamp"]
