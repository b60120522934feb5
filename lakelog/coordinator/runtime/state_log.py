"""A coordinator's log: records in one internal partition, replayed into state, appended by a strict commit.

This is where the pure handlers meet the tables (ARCHITECTURE.md, "one rule").
`CoordinatorLog.run(decide)` brings the replayed state up to the partition's
log end offset, lets `decide(state)` return an `Outcome`, and appends the
outcome's records as one batch whose expected offset is that log end offset
(KIP-27's conditional append, S2.1). If anyone appended in between, for this
key or another one of the same partition, the append is refused with
`OffsetMismatch`, the new records are replayed and the request is decided
again: no decision is ever committed on a stale state. A lost commit race
waits out the retry policy's backoff (lakelog.store.io.retry) first, on one backoff
per request.

A record is one row: key = the coordinator key (a transactional.id, a group id),
value = the record as JSON, versioned by its codec (lakelog.coordinator.runtime.record_codec).
Replay is incremental: only rows past the last replayed offset are read. A row
that does not decode is `CorruptRecord` naming the table and offset; given
`on_corrupt`, replay hands it the row's key instead and carries on (a group
coordinator refuses that one group and serves the others), else replay stops there.

A new process would replay the partition from offset 0, so the cost of every
cold start (each sweep, CLI command, init_transactions) would grow with the
log's length. Given a `StateCodec`, the log writes a snapshot of its state every
`SNAPSHOT_EVERY_RECORDS` offsets as a sidecar file of the partition's table
(`_lakelog/coordinator/<position>.json`, lakelog.store.delta.sidecar), and a cold
start loads the newest one at or below the LEO and replays only the rows after
it. A snapshot is a cache, derived from the rows alone and naming the table it
came from, and the format version of its `StateCodec`: one that is missing,
unreadable, of another format or does not fit is skipped, and replay starts earlier.

`compact(live)` compacts the log by its record keys (S9.3, Kafka's compacted
internal topics): `live(entries)` names the rows that make up the state
(lakelog.coordinator.compaction.record_keys), and the plan is committed only if replaying
the kept rows from offset 0 gives the state the whole log gives. The offsets of
kept rows never change. Replay from offset 0 is what that check proves, so a
log whose position (or snapshot) lies below rows a compaction dropped starts
again from offset 0 (or from a snapshot past every compacted file): a reader in
the middle of a compacted range would miss the rows that superseded the ones it
read. A compacted file is known by its gaps (fewer records than its range).
A log holding a row that does not decode is not compacted (CorruptRecord): a
plan would have to drop that row, or keep it blind to what it superseded.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import pyarrow as pa

from lakelog.coordinator.runtime.record_codec import located
from lakelog.errors import CorruptRecord, KafkaTimeout, OffsetMismatch
from lakelog.log import BatchHeader, ControlType, PartitionLog, payload_table
from lakelog.log.compaction import CleanableRows, CompactionResult, rewrite_below_lso
from lakelog.log.partition_file import partition_files
from lakelog.store.delta.sidecar import read_snapshots, write_snapshot
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff, RetryPolicy

logger = logging.getLogger(__name__)

S = TypeVar("S")
R = TypeVar("R")
FETCH_RECORDS = 100_000
SNAPSHOT_FOLDER = "coordinator"
SNAPSHOT_EVERY_RECORDS = 10_000


class Record(Protocol):
    def to_row(self) -> dict[str, Any]: ...


class HasRecords(Protocol):
    @property
    def records(self) -> tuple[Any, ...]: ...


OutcomeT = TypeVar("OutcomeT", bound=HasRecords)


@dataclass(frozen=True)
class Marker:
    """A transaction marker row of an internal log, as replay sees it."""

    producer_id: int
    producer_epoch: int
    control: ControlType


@dataclass(frozen=True)
class StateCodec(Generic[S]):
    """A coordinator state as JSON and back: `load(dump(state))` must equal `state`.

    `version` is the snapshot format `dump` writes; a snapshot of any other format is skipped.
    """

    dump: Callable[[S], Any]
    load: Callable[[Any], S]
    version: int = 1


class CoordinatorLog(Generic[S]):
    """One partition of an internal log and the state replayed from it.

    `key_of(record)` names a record's key; `decode(key, row)` turns a stored row
    back into a record (CorruptRecord if it cannot); `apply(state, record)` folds one
    record into the state (in place) and returns it; `on_corrupt(state, key, error)`
    folds a row that does not decode (its key column, the located CorruptRecord)
    or raises it; `retry` times the retries of lost races.
    """

    def __init__(
        self,
        log: PartitionLog,
        state: S,
        decode: Callable[[dict[str, Any]], Any],
        apply: Callable[[S, Any], S],
        key_of: Callable[[Any], str],
        apply_marker: Callable[[S, int, int, ControlType], S] | None = None,
        codec: StateCodec[S] | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
        on_corrupt: Callable[[S, str | None, CorruptRecord], S] | None = None,
    ) -> None:
        self.log = log
        self.retry = retry
        self.state = state
        # What replay starts from at offset 0 (a compacted range read from the middle is replayed again from 0).
        self._initial = copy.deepcopy(state)
        self._decode = decode
        self._apply = apply
        self._key_of = key_of
        # Transaction markers written into this log (offsets in transactions, S7.1); others ignore them.
        self._apply_marker = apply_marker
        self._on_corrupt = on_corrupt
        # Every record below this offset is folded into `state`.
        self.position = 0
        self._codec = codec
        # Read at construction, so a test may shorten it for the logs it opens.
        self.snapshot_every_records = SNAPSHOT_EVERY_RECORDS if codec is not None else 0
        # The position of the newest snapshot this log loaded or wrote.
        self.snapshot_position = 0

    def catch_up(self) -> S:
        """Replay every record appended since the last call (reloading the snapshot); returns the state."""
        self.log.refresh()
        self._replay_to(self.log.log_end_offset())
        return self.state

    def replay_held(self) -> S:
        """Replay the rows the handle in hand holds past the position (a marker another coordinator wrote through
        it), with no reload; returns the state. What `run` does first, for a caller that looks at the state before."""
        if self.log.log_end_offset() > self.position:
            self._replay_to(self.log.log_end_offset())
        return self.state

    def _replay_to(self, end: int) -> None:
        if self.position > 0 and self._compacted_from(self.position):
            logger.info(
                "%s-%d: rows at or past offset %d were compacted away; replaying from offset 0",
                self.log.topic,
                self.log.partition,
                self.position,
            )
            self.state, self.position, self.snapshot_position = copy.deepcopy(self._initial), 0, 0
        if self.position == 0 and end > 0 and self.snapshot_every_records:
            self._load_snapshot(end)
        while self.position < end:
            fetched = self.log.fetch(self.position, max_records=FETCH_RECORDS, max_bytes=1 << 30)
            self._replay(fetched.rows)
            self.position = fetched.next_offset
        self._snapshot_if_due()

    def _load_snapshot(self, end: int) -> None:
        """Take the state of the newest usable snapshot at or below `end`, if any."""
        assert self._codec is not None
        for position, body in read_snapshots(self.log.table, SNAPSHOT_FOLDER, end, self._codec.version):
            if self._compacted_from(position):
                return  # this one and every older one: the rows after them are not all there
            try:
                state = self._codec.load(body)
            except (CorruptRecord, KeyError, TypeError, ValueError, AttributeError):
                continue
            self.state, self.position, self.snapshot_position = state, position, position
            return

    def _compacted_from(self, position: int) -> bool:
        """True if a compacted file (one with gaps) holds offsets at or past `position` in the snapshot in hand."""
        return any(
            entry.max_offset >= position and entry.num_records < entry.max_offset - entry.min_offset + 1
            for entry in partition_files(self.log.table)
        )

    def compact(self, live: Callable[[list[tuple[int, Any]]], set[int]], timeout_s: float = 60.0) -> CompactionResult | None:
        """Compact the log by its record keys (S9.3): keep the rows `live(entries)` names, if replay agrees.

        `entries` are (offset, record) in offset order, a marker row as a `Marker`. The plan is replayed from offset 0 against the whole
        log; if the states differ nothing is dropped (a WARNING). One strict
        commit (lakelog.log.compaction); None if nothing was dropped.
        """
        if self._codec is None:
            raise ValueError("a coordinator log compacts only with a StateCodec: the plan is checked on the state")
        codec = self._codec

        def choose(cleanable: CleanableRows) -> np.ndarray:
            rows = cleanable.rows
            everything = np.ones(rows.num_rows, dtype=bool)
            if cleanable.files[0].min_offset != 0:
                return everything  # replay from offset 0 is what the check proves
            columns = rows.select(["offset", "value", "control", "producer_id", "producer_epoch"]).to_pydict()
            entries: list[tuple[int, Any]] = []
            for offset, value, control, producer_id, producer_epoch in zip(*columns.values(), strict=True):
                if control is not None:
                    entries.append((offset, Marker(producer_id, producer_epoch, ControlType(control))))
                elif value is not None:
                    # A row that does not decode stops the plan: it is reported, never dropped or rewritten.
                    entries.append((offset, self._decode_row(value, offset)))
            kept = live(entries)
            if not kept:
                return everything  # a compacted file keeps a row (lakelog.log.compaction): none would not replay as none
            whole, compacted = copy.deepcopy(self._initial), copy.deepcopy(self._initial)
            for offset, item in entries:
                whole = self._replay_entry(whole, item)
                if offset in kept:
                    compacted = self._replay_entry(compacted, item)
            if codec.dump(whole) != codec.dump(compacted):
                logger.warning(
                    "%s-%d: a compaction plan would change the replayed state; keeping every row",
                    self.log.topic,
                    self.log.partition,
                )
                return everything
            return np.isin(rows.column("offset").to_numpy(), np.fromiter(kept, dtype=np.int64, count=len(kept)))

        return rewrite_below_lso(self.log, choose, below_log_end=True, timeout_s=timeout_s)

    def _replay_entry(self, state: S, item: Any) -> S:
        if isinstance(item, Marker):
            if self._apply_marker is None:
                return state
            return self._apply_marker(state, item.producer_id, item.producer_epoch, item.control)
        return self._apply(state, item)

    def _snapshot_if_due(self) -> None:
        if self.snapshot_every_records and self.position - self.snapshot_position >= self.snapshot_every_records:
            assert self._codec is not None
            body = self._codec.dump(self.state)
            if write_snapshot(self.log.table, SNAPSHOT_FOLDER, self.position, body, self._codec.version):
                self.snapshot_position = self.position

    def run(self, decide: Callable[[S], OutcomeT], timeout_s: float = 60.0, *, backoff: Backoff | None = None) -> OutcomeT:
        """Decide, and append the outcome's records at exactly the position the state was replayed to.

        The first decision is made on the state in hand: if it has records, the
        conditional append proves that state was the latest (or refuses, and the
        request is decided again after catching up). An answer without records
        (a refusal, a verification) is only returned once it holds on the latest state.
        Lost races wait on `backoff`, the request's (else one ending `timeout_s` from now).
        """
        backoff = self.retry.start(timeout_s) if backoff is None else backoff
        caught_up = False
        self.replay_held()
        while True:
            outcome = decide(self.state)
            if not outcome.records:
                if caught_up:
                    return outcome
                before = self.position
                self.catch_up()
                if self.position == before:
                    return outcome
                caught_up = True
                continue
            try:
                # A lost commit race waits in there, on this request's backoff, before the append decides again.
                self.log.append(self._encode(outcome.records), BatchHeader(expected_offset=self.position), backoff=backoff)
            except OffsetMismatch:
                where = f"{self.log.topic}-{self.log.partition}"
                if backoff.expired():
                    message = f"{where}: the state moved on past the deadline, after {backoff.retries} retries"
                    logger.warning("%s; giving up", message)
                    raise KafkaTimeout(message) from None
                # The append refused on the latest snapshot, which the handle now holds: replay it, no reload.
                end = self.log.log_end_offset()
                logger.debug(
                    "%s: decided at offset %d, but the log ends at %d; replaying and deciding again", where, self.position, end
                )
                self._replay_to(end)
                caught_up = True
                continue
            for record in outcome.records:
                self.state = self._apply(self.state, record)
            self.position += len(outcome.records)
            self._snapshot_if_due()
            return outcome

    def _encode(self, records: Iterable[Record]) -> pa.Table:
        records = list(records)
        return payload_table(
            [json.dumps(record.to_row(), separators=(",", ":")).encode() for record in records],
            keys=[self._key_of(record).encode() for record in records],
        )

    def _replay(self, rows: pa.Table) -> None:
        columns = rows.select(["offset", "key", "value", "control", "producer_id", "producer_epoch"]).to_pydict()
        for offset, key, value, control, producer_id, producer_epoch in zip(*columns.values(), strict=True):
            if control is not None:
                if self._apply_marker is not None:
                    self.state = self._apply_marker(self.state, producer_id, producer_epoch, ControlType(control))
            elif value is not None:
                try:
                    record = self._decode_row(value, offset)
                except CorruptRecord as error:
                    if self._on_corrupt is None:
                        raise
                    self.state = self._on_corrupt(self.state, _key_text(key), error)
                    continue
                self.state = self._apply(self.state, record)

    def _decode_row(self, value: bytes, offset: int) -> Any:
        """The record of one row; CorruptRecord naming this table and the row's offset if it does not decode."""
        try:
            return self._decode(json.loads(value))
        except CorruptRecord as error:
            raise located(error, self.log.table.uri, offset) from None
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise located(CorruptRecord(f"not a record: {error}"), self.log.table.uri, offset) from None


def _key_text(key: bytes | None) -> str | None:
    """A row's key column as text, or None if it has none that reads as UTF-8."""
    try:
        return None if key is None else key.decode()
    except UnicodeDecodeError:
        return None
