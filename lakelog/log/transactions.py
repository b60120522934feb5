"""The transaction state of one partition: open transactions, LSO and aborted-transaction index (S5.1, S5.3).

The state is a fold over the partition's rows in offset order that looks only at
the header columns (offset, producer_id, is_transactional, control):

- a transactional data row of producer id P opens P's transaction, unless one is
  open already;
- a marker row of P closes P's open transaction; an ABORT marker adds
  (P, first offset, marker offset) to the aborted-transaction index. A marker of
  a P with no open transaction closes nothing. Markers carry a bumped epoch, so
  they are matched to transactions by producer id alone.

`fold` is one step of it, pure. `TransactionIndex` holds the result for one
table and brings it up to date from the position it has folded to: it reads the
header columns of the rows at or past that position only, from the files that
hold them (found by bisect), so catching up after one new commit reads one small
file whatever the log's length.

A cold start would fold the whole partition (a projection read of those four
columns). To keep it cheap on long logs, the index also writes a snapshot of its
state every `SNAPSHOT_EVERY_OFFSETS` offsets, as a sidecar file in the table's
folder (`_lakelog/transactions/<position>.json`, lakelog.store.delta.sidecar), and a
cold start loads the newest one at or below its LEO, then folds only the rows
after it. A snapshot is a cache, not state: it is derived from the table alone
(rows below its position never change, compaction keeps them), it names the
Delta table id it was derived from, and one that is missing, unreadable, from
another table or beyond the snapshot in hand is ignored: the index then folds
from offset 0, as if there were none. Writing one may fail (a read-only root);
that is ignored too.

Retention and delete_records remove whole files from the start of the log (S9.1).
The index never refers below the first active file (its floor): a transaction
aborted before it is dropped, one that straddles it starts there, and an index
behind the floor (or a cold one) starts at the floor with no state. That is the
state a fold from the floor gives, since nothing below the last stable offset is
ever removed (S9.2): no transaction is open across the floor.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakelog.errors import CorruptRecord
from lakelog.log.file_ranges import read_offset_range
from lakelog.log.partition_file import PartitionFile, partition_files
from lakelog.log.producer_state import tagged_entries
from lakelog.log.records import ControlType
from lakelog.store import Table
from lakelog.store.delta.sidecar import read_snapshots, write_snapshot

logger = logging.getLogger(__name__)

HEADER_COLUMNS = ["offset", "producer_id", "is_transactional", "control"]
SNAPSHOT_FOLDER = "transactions"
SNAPSHOT_EVERY_OFFSETS = 1_000_000


@dataclass(frozen=True)
class AbortedTransaction:
    """An aborted transaction (S5.3): its producer's rows in [first_offset, marker_offset) are never committed."""

    producer_id: int
    first_offset: int
    marker_offset: int


def fold(open_transactions: Mapping[int, int], headers: pa.Table) -> tuple[dict[int, int], list[AbortedTransaction]]:
    """Fold header rows that follow the rows already folded, in offset order.

    `open_transactions` maps producer id to the first offset of its open
    transaction before the rows. Returns the open transactions after them and
    the transactions they aborted, in marker order; the input is not changed.
    """
    opened = dict(open_transactions)
    aborted: list[AbortedTransaction] = []
    for offset, producer_id, control in _state_changes(headers):
        if control is None:
            opened.setdefault(producer_id, offset)
            continue
        first_offset = opened.pop(producer_id, None)
        if first_offset is not None and control == ControlType.ABORT.value:
            aborted.append(AbortedTransaction(producer_id, first_offset, offset))
    return opened, aborted


def _state_changes(headers: pa.Table) -> Iterator[tuple[int, int, str | None]]:
    """(offset, producer id, control) of the rows that may change the state.

    Those are the markers and the first row of every run of one producer's
    transactional data rows; the rest of a run cannot open anything, so only a
    few rows per batch reach Python whatever the batch's size.
    """
    if headers.num_rows == 0:
        return iter(())
    is_marker = headers.column("control").is_valid().to_numpy()
    is_data = headers.column("is_transactional").to_numpy() & ~is_marker
    producer_ids = headers.column("producer_id").to_numpy()
    continues_run = np.zeros(headers.num_rows, dtype=bool)
    continues_run[1:] = is_data[1:] & is_data[:-1] & (producer_ids[1:] == producer_ids[:-1])
    picked = np.flatnonzero(is_marker | (is_data & ~continues_run))
    changes = headers.select(["offset", "producer_id", "control"]).take(pa.array(picked))
    return zip(*(changes.column(name).to_pylist() for name in ("offset", "producer_id", "control")), strict=True)


class _ChangesNothing:
    """Whether a file, met in offset order, can change no transaction state: then it need not be read.

    Its add action proves it: no producer id in its statistics (no transactional row, no marker), or one
    batch's producer tag (producer_state.PRODUCER_TAG) saying it leaves no transaction open, of a producer
    with no transaction that may be open there (a marker of it would close nothing). Files that are read
    may open a transaction of any producer in their statistics' range, which then stays possibly open.
    """

    def __init__(self, opened: Mapping[int, int]) -> None:
        self._open = set(opened)
        self._ranges: list[tuple[int, int]] = []

    def __call__(self, file: PartitionFile) -> bool:
        tagged = tagged_entries(file)
        if tagged == {}:
            return True
        if tagged is not None:
            ((producer_id, entry),) = tagged.items()
            if not entry.transaction_open and not self._may_be_open(producer_id):
                return True
            self._open.add(producer_id)
            return False
        self._ranges.append((file.min_producer_id, file.max_producer_id))
        return False

    def _may_be_open(self, producer_id: int) -> bool:
        return producer_id in self._open or any(low <= producer_id <= high for low, high in self._ranges)


class TransactionIndex:
    """The transaction state of one partition table, folded up to `position`.

    `snapshot_every_offsets` is how far the position moves between snapshots
    written (0: never read or write snapshots).
    """

    def __init__(self, snapshot_every_offsets: int = SNAPSHOT_EVERY_OFFSETS) -> None:
        # Every row below this offset is folded in.
        self.position = 0
        self._open: dict[int, int] = {}
        # In marker order; `_marker_offsets` mirrors it for bisect.
        self._aborted: list[AbortedTransaction] = []
        self._marker_offsets: list[int] = []
        self.snapshot_every_offsets = snapshot_every_offsets
        # The position of the newest snapshot this index loaded or wrote.
        self.snapshot_position = 0
        # The first offset the table still holds (its first active file's); nothing below it is kept.
        self.floor = 0
        # True until the index has folded anything: a cold start may load a snapshot.
        self._cold = True

    def last_stable_offset(self) -> int:
        """S5.1: the first offset of the earliest open transaction, else the position (the high watermark)."""
        return min(self._open.values(), default=self.position)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return dict(self._open)

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTransaction]:
        """S5.3: aborted transactions whose [first offset, marker offset] meets [start_offset, end_offset)."""
        first = bisect.bisect_left(self._marker_offsets, start_offset)
        return [txn for txn in self._aborted[first:] if txn.first_offset < end_offset]

    def apply(self, headers: pa.Table, end_offset: int | None = None) -> None:
        """Fold the header rows of [position, end_offset) in, in offset order (without `end_offset`: they must be
        dense). Key compaction leaves gaps (S9.3, S5.4): the rows of a range are then fewer than its offsets."""
        if headers.num_rows == 0:
            if end_offset is not None:
                self.position = max(self.position, end_offset)
            return
        offsets = headers.column("offset")
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        dense = last == first + headers.num_rows - 1
        if (
            first < self.position
            or (end_offset is None and (first != self.position or not dense))
            or (end_offset is not None and last >= end_offset)
        ):
            raise CorruptRecord(
                f"transaction index at offset {self.position} was given rows {first}-{last} "
                f"({headers.num_rows} rows): offsets are not dense"
            )
        self._open, aborted = fold(self._open, headers)
        self._aborted.extend(aborted)
        self._marker_offsets.extend(txn.marker_offset for txn in aborted)
        self.position = last + 1 if end_offset is None else end_offset

    def catch_up(self, table: Table, end_offset: int) -> None:
        """Fold the rows [position, end_offset) of the table's snapshot in hand (its LEO is `end_offset`).

        Reads only the header columns of rows at or past the position, from the
        files whose offsets reach it (on a cold start, past the newest usable
        snapshot). A missing or unreadable file, or rows that are not dense,
        raise CorruptRecord; the index keeps the state of a position it reached.
        """
        files = partition_files(table)
        floor = files[0].min_offset if files else end_offset
        if floor > self.floor:
            self.trim(floor)
        if end_offset <= self.position:
            return
        if self._cold and self.snapshot_every_offsets:
            self._load_snapshot(table, end_offset)
        self._fold_files(table, end_offset)
        self._cold = False
        if self.snapshot_every_offsets and self.position - self.snapshot_position >= self.snapshot_every_offsets:
            self._write_snapshot(table)

    def trim(self, floor: int) -> None:
        """Forget everything below `floor`, the new first offset of the table (S9.1, S9.2).

        Aborted transactions whose marker is below it are dropped and those that
        straddle it start at it. An index whose position is below it starts over
        at it with no state: the rows in between are gone, and no transaction was
        open across it.
        """
        if floor <= self.floor:
            return
        self.floor = floor
        if self.position < floor:
            self.position = floor
            self._open, self._aborted, self._marker_offsets = {}, [], []
            self._cold = True
            return
        self._open = {producer_id: max(first, floor) for producer_id, first in self._open.items()}
        kept = bisect.bisect_left(self._marker_offsets, floor)
        self._aborted = [
            txn if txn.first_offset >= floor else AbortedTransaction(txn.producer_id, floor, txn.marker_offset)
            for txn in self._aborted[kept:]
        ]
        self._marker_offsets = self._marker_offsets[kept:]

    def _fold_files(self, table: Table, end_offset: int) -> None:
        if end_offset <= self.position:
            return  # a loaded snapshot may already be at the end
        files = partition_files(table)
        start = self.position
        # The files' offset ranges must tile [start, end_offset); a compacted file holds fewer rows than its range.
        known = _ChangesNothing(self._open)
        chunks = read_offset_range(table, files, start, end_offset, HEADER_COLUMNS, none_held_message=True, known=known)
        read = [rows for _, rows in chunks if rows is not None]
        self.apply(pa.concat_tables(read) if read else table.schema.empty_table().select(HEADER_COLUMNS), end_offset)

    # -- snapshots (a cache: see the module docstring) ------------------------------------

    def _load_snapshot(self, table: Table, end_offset: int) -> None:
        """Take the state of the newest usable snapshot at or below `end_offset`, if any."""
        for position, body in read_snapshots(table, SNAPSHOT_FOLDER, end_offset):
            if position < self.position:
                return  # older still: the rows after it are gone (below the floor) or already folded
            try:
                opened = {int(producer_id): int(first) for producer_id, first in body["open_transactions"]}
                aborted = [AbortedTransaction(int(p), int(f), int(m)) for p, f, m in body["aborted_transactions"]]
            except (ValueError, KeyError, TypeError):
                continue
            markers = [txn.marker_offset for txn in aborted]
            if (
                markers != sorted(markers)
                or any(not 0 <= first < position for first in opened.values())
                or (markers and markers[-1] >= position)
            ):
                continue
            self._open, self._aborted, self._marker_offsets = opened, aborted, markers
            self.position = self.snapshot_position = position
            floor, self.floor = self.floor, 0
            self.trim(floor)
            return

    def _write_snapshot(self, table: Table) -> None:
        body = {
            "open_transactions": sorted(self._open.items()),
            "aborted_transactions": [[txn.producer_id, txn.first_offset, txn.marker_offset] for txn in self._aborted],
        }
        if write_snapshot(table, SNAPSHOT_FOLDER, self.position, body):
            self.snapshot_position = self.position
