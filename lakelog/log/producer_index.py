"""The producer entries of one partition table, kept up to date from its rows (S3.5, S9.4).

An entry is a function of the snapshot's rows (lakelog.log.producer_state.fold).
`ProducerIndex` is an in-process cache of those entries, never state: it folds
the rows appended since its position (the files that hold them, found by
bisect, as lakelog.log.transactions does; a key-compacted file holds fewer
rows than its offset range, and keeps every producer's last batch), so catching up after one commit reads
one small file whatever the number of producers; and none when the file is one batch, whose add action carries
the entry its rows leave (producer_state.PRODUCER_TAG): a handle that follows another producer's appends reads
no data for them. It holds only the entries
that have not expired by the clock of the last decision, plus those with an
open transaction: its size follows the live producers, not all that ever wrote.

A handle starts at the LEO of its first use, knowing nothing of the rows below.
A producer id that the cache does not hold is decided from the file statistics
when it can be, else by reading the files:

- above every active file's `max.producer_id`: no row of it exists, no data is
  read (a brand-new producer id, as ids come from one counter);
- the cache folded every active row and every entry it dropped was expired by an
  earlier clock not after this one: it has no live entry, no data is read;
- else the files whose producer-id range covers it are read newest first, up to
  the first that holds its rows.

An entry whose last row is below the log start offset is gone with its rows
(retention, delete_records): that producer is unknown, as in Kafka before KIP-360.

`find_batch` finds a batch the entry says may be a retry (S3.2) in the files whose producer-id range covers it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log.file_ranges import read_offset_range
from lakelog.log.partition_file import PartitionFile, partition_files
from lakelog.log.producer_state import STATE_COLUMNS, ProducerEntry, fold, tagged_entries
from lakelog.log.records import BatchHeader, last_sequence
from lakelog.store import Table

logger = logging.getLogger(__name__)


class ProducerIndex:
    """The producer entries of one partition table, folded up to `position` (a cache, see the module docstring)."""

    def __init__(self) -> None:
        # Every row in [start, position) is folded in; None until the first use.
        self.position: int | None = None
        self.start = 0
        self._entries: dict[int, ProducerEntry] = {}
        # True if the fold started at or below the first active row: an id it does not hold has no rows, or was dropped.
        self._complete = False
        # Every entry dropped had its last timestamp at or below this (None: none dropped).
        self._dropped_up_to: int | None = None
        # The smallest last timestamp of the entries held with no open transaction (None: none or unknown).
        self._oldest: int | None = None
        self._max_producer_id: tuple[int, int] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, table: Table, producer_id: int, end_offset: int, log_start: Callable[[], int]) -> ProducerEntry | None:
        """The entry of `producer_id` at the table's snapshot in hand (its LEO is `end_offset`), expired or not."""
        self.catch_up(table, end_offset)
        found = self._entries.get(producer_id)
        if found is None:
            if producer_id > self._max_producer_id_of(table):
                return None
            found = self._scan(table, producer_id, end_offset, log_start())
        return None if found is None or found.last_offset < log_start() else found

    def live_entry(
        self,
        table: Table,
        producer_id: int,
        end_offset: int,
        log_start: Callable[[], int],
        now_ms: int,
        expiration_ms: int,
    ) -> ProducerEntry | None:
        """S9.4: the entry at the snapshot in hand, None if absent, gone with its rows or expired at `now_ms`."""
        self.catch_up(table, end_offset)
        self._drop_expired(now_ms, expiration_ms)
        found = self._entries.get(producer_id)
        if found is None:
            if producer_id > self._max_producer_id_of(table):
                return None
            if self._complete and (self._dropped_up_to is None or now_ms - self._dropped_up_to > expiration_ms):
                return None
            found = self._scan(table, producer_id, end_offset, log_start())
        if found is None or found.is_expired(now_ms, expiration_ms) or found.last_offset < log_start():
            return None
        return found

    def apply(self, first_offset: int, count: int, entry: ProducerEntry | None) -> None:
        """Fold a commit this process made: `count` rows from `first_offset` on, leaving `entry` to their producer
        (producer_state.batch_entry; None: rows without a producer id). Ignored unless they start at the position."""
        if self.position is None or count == 0 or first_offset != self.position:
            return
        self._fold_entries({} if entry is None else {entry.producer_id: entry}, first_offset + count)

    def catch_up(self, table: Table, end_offset: int) -> None:
        """Fold the rows [position, end_offset) of the table's snapshot in hand; CorruptRecord if a file is missing."""
        if self.position is None or end_offset < self.position:
            # A first use, or a table that went back (recreated): start again at its LEO, knowing nothing below.
            files = partition_files(table)
            self.position = self.start = end_offset
            self._entries = {}
            self._complete = not any(entry.min_offset < end_offset for entry in files)
            self._dropped_up_to = self._oldest = None
            return
        if end_offset == self.position:
            return
        files = partition_files(table)
        # Rows that retention removed since the position are gone, and so are the entries they left (S9.4).
        start = max(self.position, files[0].min_offset if files else end_offset)
        if start >= end_offset:
            self.position = end_offset
            return
        # The files' offset ranges must tile [start, end_offset); a key-compacted file holds fewer rows than its range.
        # A file of one batch says in its add action what its rows leave (tagged_entries): it is not read.
        tagged: dict[str, dict[int, ProducerEntry]] = {}

        def known(file: PartitionFile) -> bool:
            entries = tagged_entries(file)
            if entries is not None:
                tagged[file.path] = entries
            return entries is not None

        self._fold(read_offset_range(table, files, start, end_offset, STATE_COLUMNS, known=known), tagged, end_offset)

    def _fold(
        self, chunks: list[tuple[PartitionFile, pa.Table | None]], tagged: dict[str, dict[int, ProducerEntry]], end_offset: int
    ) -> None:
        """Fold each file's rows in offset order, with the file's append time (producer_state.fold), or take what
        its add action says they leave (`tagged`, by path, for the files not read)."""
        changed: dict[int, ProducerEntry] = {}
        for file, rows in chunks:
            changed.update(tagged[file.path] if rows is None else fold(rows, file.modification_time_ms))
        self._fold_entries(changed, end_offset)

    def _fold_entries(self, changed: dict[int, ProducerEntry], end_offset: int) -> None:
        self._entries.update(changed)
        for entry in changed.values():
            if not entry.transaction_open and (self._oldest is None or entry.last_timestamp_ms < self._oldest):
                self._oldest = entry.last_timestamp_ms
        self.position = end_offset

    def _drop_expired(self, now_ms: int, expiration_ms: int) -> None:
        """Drop the entries expired at `now_ms` with no open transaction: the cache holds the live producers."""
        horizon = now_ms - expiration_ms - 1  # expired at now_ms <=> last timestamp <= horizon
        if self._oldest is None or self._oldest > horizon:
            return
        kept, oldest = {}, None
        for producer_id, entry in self._entries.items():
            if entry.transaction_open or entry.last_timestamp_ms > horizon:
                kept[producer_id] = entry
                if not entry.transaction_open and (oldest is None or entry.last_timestamp_ms < oldest):
                    oldest = entry.last_timestamp_ms
        dropped = len(self._entries) - len(kept)
        self._entries, self._oldest = kept, oldest
        self._dropped_up_to = horizon if self._dropped_up_to is None else max(self._dropped_up_to, horizon)
        logger.debug("producer index: dropped %d entries last active at or before %d ms, %d held", dropped, horizon, len(kept))

    def _max_producer_id_of(self, table: Table) -> int:
        version = table.version
        if self._max_producer_id is None or self._max_producer_id[0] != version:
            files = partition_files(table)
            self._max_producer_id = (version, max((entry.max_producer_id for entry in files), default=-1))
        return self._max_producer_id[1]

    def _scan(self, table: Table, producer_id: int, end_offset: int, log_start: int) -> ProducerEntry | None:
        """Read the entry of `producer_id` from the files, newest first, and hold it (a cold lookup)."""
        for entry in reversed(partition_files(table)):
            if entry.max_offset < log_start:
                return None
            if entry.min_offset >= end_offset or not entry.min_producer_id <= producer_id <= entry.max_producer_id:
                continue
            tagged = tagged_entries(entry) if entry.max_offset < end_offset else None
            if tagged is not None and producer_id in tagged:
                # The file's last row is its producer's and at or past the log start: it is the entry.
                return self._hold(tagged[producer_id])
            predicate = (
                (pc.field("producer_id") == producer_id) & (pc.field("offset") < end_offset) & (pc.field("offset") >= log_start)
            )
            rows = table.read_file(entry, STATE_COLUMNS, predicate)
            if rows.num_rows:
                found, append_time_ms = rows.sort_by("offset"), entry.modification_time_ms
                break
        else:
            return None
        return self._hold(fold(found, append_time_ms)[producer_id])

    def _hold(self, state: ProducerEntry) -> ProducerEntry:
        """Hold an entry a cold lookup found."""
        self._entries[state.producer_id] = state
        if not state.transaction_open and (self._oldest is None or state.last_timestamp_ms < self._oldest):
            self._oldest = state.last_timestamp_ms
        return state


def find_batch(table: Table, header: BatchHeader, count: int) -> int | None:
    """Base offset of a batch in `table`'s snapshot with this producer, epoch and sequence range, if any (a retry, S3.2)."""
    first, last = header.base_sequence, last_sequence(header.base_sequence, count)
    in_range = (pc.field("sequence") >= first) & (pc.field("sequence") <= last)
    if last < first:  # the batch wrapped past 2^31-1 (S3.1)
        in_range = (pc.field("sequence") >= first) | (pc.field("sequence") <= last)
    predicate = (pc.field("producer_id") == header.producer_id) & (pc.field("producer_epoch") == header.producer_epoch) & in_range
    found = []
    for entry in partition_files(table):
        if not entry.min_producer_id <= header.producer_id <= entry.max_producer_id:
            continue
        rows = table.read_file(entry, ["offset", "sequence", "producer_id", "producer_epoch"], predicate)
        if rows.num_rows:
            found.append(rows)
    if not found:
        return None
    rows = pa.concat_tables(found).sort_by("offset")
    offsets = rows.column("offset").to_pylist()
    sequences = rows.column("sequence").to_pylist()
    if len(offsets) != count or sequences[0] != header.base_sequence:
        return None
    if offsets != list(range(offsets[0], offsets[0] + count)):
        return None
    return offsets[0]
