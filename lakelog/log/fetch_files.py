"""Reading a fetch's files: in order, a few ahead on a small pool, and the read_committed filter (S1.4, S5.2)."""

from __future__ import annotations

import collections
import itertools
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

import numpy as np
import pyarrow as pa

from lakelog.log.partition_file import PartitionFile
from lakelog.log.transactions import AbortedTransaction

logger = logging.getLogger(__name__)

# Files a fetch reads ahead of the one it is at, on a pool of as many threads as these machines have cores:
# pyarrow decodes without the GIL, so a fetch reads like a multi-threaded Parquet scan (bench/read_committed.py).
READ_AHEAD_FILES = 4
READ_THREADS = 2
_pool: tuple[int, ThreadPoolExecutor] | None = None


def contiguous(files: list[PartitionFile], start_offset: int, end_offset: int) -> Iterator[PartitionFile]:
    """The files holding [start_offset, end_offset) in order, up to the first gap (the fetch fails there)."""
    expected = start_offset
    for entry in files:
        if entry.min_offset >= end_offset or entry.min_offset > expected:
            return
        yield entry
        expected = entry.max_offset + 1


class Budgeted(Protocol):
    """What a fetch reads in one go (a file, or some of its row groups): its size on disk and its record count."""

    @property
    def size_bytes(self) -> int: ...

    @property
    def num_records(self) -> int: ...


P = TypeVar("P", bound=Budgeted)


def read_ahead(
    read: Callable[[P], pa.Table], entries: Iterator[P], max_bytes: int, max_records: int
) -> Iterator[tuple[P, pa.Table]]:
    """(piece, read(piece)) in order, reading up to READ_AHEAD_FILES pieces ahead; an error surfaces in order too.

    Pieces (files, or row groups of large files) are read ahead only while those queued so far, by their
    size on disk (which decoding only grows) and record count, have not already met the fetch's budget: a
    small fetch reads no piece it will not return. A fetch of one piece reads it on the calling thread:
    there is nothing to overlap, and the hand-off to the pool cost more than the read (a coordinator
    replaying one marker's row).
    """
    first = next(entries, None)
    if first is None:
        return
    second = next(entries, None)
    if second is None:
        yield first, read(first)
        return
    entries = itertools.chain((first, second), entries)
    global _pool
    if _pool is None or _pool[0] != os.getpid():  # a forked child has the pool object but none of its threads
        _pool = (os.getpid(), ThreadPoolExecutor(READ_THREADS, thread_name_prefix="lakelog-fetch"))
    pool = _pool[1]
    pending: collections.deque = collections.deque()
    queued_bytes = queued_records = 0
    try:
        while True:
            while len(pending) < READ_AHEAD_FILES and (
                not pending or (queued_bytes < max_bytes and queued_records < max_records)
            ):
                entry = next(entries, None)
                if entry is None:
                    break
                pending.append((entry, pool.submit(read, entry)))
                queued_bytes += entry.size_bytes
                queued_records += entry.num_records
            if not pending:
                return
            entry, future = pending.popleft()
            yield entry, future.result()
    finally:
        for _, future in pending:  # the fetch stopped early (a budget, an error): drop what it read ahead
            future.cancel()


class AbortedRows:
    """Drops control rows and rows of aborted transactions (S5.2), vectorized.

    A row is aborted if it is a transactional row of producer P at an offset in
    [first offset, marker offset) of one of P's aborted transactions; one
    producer's transactions never overlap, so a binary search per row finds the
    only candidate. A file whose statistics (producer ids, offsets) meet no
    aborted transaction and that holds no control row is returned as it is.
    """

    def __init__(self, aborted: list[AbortedTransaction]) -> None:
        by_producer: dict[int, list[AbortedTransaction]] = {}
        for txn in aborted:
            by_producer.setdefault(txn.producer_id, []).append(txn)
        # Per producer, in offset order (marker order is offset order for one producer).
        self._ranges = {
            producer_id: (
                np.array([txn.first_offset for txn in txns], dtype=np.int64),
                np.array([txn.marker_offset for txn in txns], dtype=np.int64),
            )
            for producer_id, txns in by_producer.items()
        }

    def filter(self, rows: pa.Table, entry: PartitionFile) -> pa.Table:
        """The rows of `entry` (all of them, or a range) that read_committed returns."""
        control = rows.column("control")
        keep = control.is_null().to_numpy() if control.null_count < rows.num_rows else None
        for producer_id, (first_offsets, marker_offsets) in self._ranges.items():
            if not entry.min_producer_id <= producer_id <= entry.max_producer_id:
                continue
            # Only transactions that end after the file starts and start before it ends can hold its rows.
            low = np.searchsorted(marker_offsets, entry.min_offset, side="right")
            high = np.searchsorted(first_offsets, entry.max_offset, side="right")
            if low >= high:
                continue
            firsts, markers = first_offsets[low:high], marker_offsets[low:high]
            candidates = np.flatnonzero(
                (rows.column("producer_id").to_numpy() == producer_id) & rows.column("is_transactional").to_numpy()
            )
            offsets = rows.column("offset").to_numpy()[candidates]
            which = np.searchsorted(firsts, offsets, side="right") - 1
            aborted = (which >= 0) & (offsets < markers[np.maximum(which, 0)])
            if aborted.any():
                if keep is None:
                    keep = np.ones(rows.num_rows, dtype=bool)
                keep[candidates[aborted]] = False
        if keep is None or keep.all():
            return rows
        return rows.filter(pa.array(keep))
