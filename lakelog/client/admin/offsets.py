"""list_offsets, as Kafka's ListOffsets: a partition's earliest, latest, max-timestamp or by-time offset.

The offsets a reader may see end at the high watermark (read_uncommitted) or the
last stable offset (read_committed, S5.1): `latest` is that end, and an answer at
or past it is no answer (offset -1), as Kafka's isolation check makes it.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.client.admin.types import IsolationLevel, ListOffsetsResultInfo, OffsetSpec
from lakelog.log import PartitionLog, open_partition
from lakelog.log.partition_file import partition_files
from lakelog.log.timestamps import offset_for_timestamp
from lakelog.store import Location

logger = logging.getLogger(__name__)

NO_ANSWER = ListOffsetsResultInfo(-1, -1, None)


def list_offset(
    root: str | Location, topic: str, partition: int, spec: OffsetSpec, isolation_level: IsolationLevel
) -> ListOffsetsResultInfo:
    """One partition's answer to `spec` (UnknownTopicOrPartition if it does not exist)."""
    log = open_partition(root, topic, partition)
    log.refresh()
    end = log.last_stable_offset() if isolation_level is IsolationLevel.READ_COMMITTED else log.high_watermark()
    if spec._value == OffsetSpec.EARLIEST:
        return ListOffsetsResultInfo(log.log_start_offset(), -1, None)
    if spec._value == OffsetSpec.LATEST:
        return ListOffsetsResultInfo(end, -1, None)
    if spec._value == OffsetSpec.MAX_TIMESTAMP:
        found = _max_timestamp(log)
        return NO_ANSWER if found is None or found.offset >= end else found
    offset = offset_for_timestamp(log, spec._value, end)
    if offset is None:
        return NO_ANSWER
    return ListOffsetsResultInfo(offset, _timestamp_ms(log, offset), None)


def _max_timestamp(log: PartitionLog) -> ListOffsetsResultInfo | None:
    """The data record with the largest timestamp below the high watermark (the first one, on a tie)."""
    start, end = log.log_start_offset(), log.high_watermark()
    in_range = (pc.field("offset") >= start) & (pc.field("offset") < end) & pc.field("control").is_null()
    best: tuple[int, int] | None = None
    for entry in partition_files(log.table):
        if entry.max_offset < start or entry.min_offset >= end:
            continue
        rows = log.table.read_file(entry, ["offset", "timestamp", "control"], in_range)
        if not rows.num_rows:
            continue
        timestamps = rows.column("timestamp").cast(pa.int64())
        top = pc.max(timestamps).as_py()
        if top is None or (best is not None and top <= best[0]):
            continue
        offsets = pc.filter(rows.column("offset"), pc.equal(timestamps, top))
        best = (top, int(pc.min(offsets).as_py()))
    return None if best is None else ListOffsetsResultInfo(best[1], best[0] // 1000, None)


def _timestamp_ms(log: PartitionLog, offset: int) -> int:
    rows = log.fetch(offset, max_records=1).rows
    if not rows.num_rows:
        return -1
    return int(rows.column("timestamp").cast(pa.int64())[0].as_py()) // 1000


__all__ = ["list_offset"]
