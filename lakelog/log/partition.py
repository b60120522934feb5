"""A topic-partition log on one Delta table: append (S1, S2, S3) and fetch.

Every append is decided on the snapshot in hand (LEO, the producer's entry, the
topic config) and committed as exactly the next version. A lost race reloads the
snapshot and decides again; a refusal is only returned once it holds on the
latest snapshot, so nothing is ever refused on stale state either.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import (
    CommitConflict,
    CorruptRecord,
    InvalidRequest,
    KafkaException,
    KafkaTimeout,
    OffsetMismatch,
    OffsetOutOfRange,
    PolicyViolation,
)
from lakelog.log import producer_state
from lakelog.log.producer_state import ProducerEntry, Verdict
from lakelog.log.records import NO_SEQUENCE, BatchHeader, ControlType, conform_payload, last_sequence, stamp
from lakelog.log.topic_config import TopicConfig
from lakelog.store import Table
from lakelog.store.maintenance import MaintenancePolicy, MaintenanceReport, maintain, refresh_if_stale

LOG_END_OFFSET_APP_ID = "lakelog.log_end_offset"
Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed. `duplicate` is True when it was a retry already in the log (S3.2)."""

    base_offset: int
    last_offset: int
    version: int
    duplicate: bool = False


@dataclass(frozen=True)
class _Decision:
    base_offset: int
    entry: ProducerEntry | None
    duplicate_of: int | None = None


class PartitionLog:
    """One topic-partition: a Delta table whose rows are records with dense offsets."""

    def __init__(self, table: Table, topic: str, partition: int, config: TopicConfig, clock: Clock = wall_clock_ms):
        self.table = table
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock = clock
        self._leo: tuple[int, int] | None = None
        self._producers: dict[int, ProducerEntry | None] = {}
        self._producers_version = -1
        self.maintenance = MaintenancePolicy(segment_files=config.segment_files, compression=config.compression_type)
        # What the maintenance after the last commit of this handle did (its errors are not raised).
        self.last_maintenance: MaintenanceReport | None = None

    # -- state of the snapshot in hand ---------------------------------------

    @property
    def version(self) -> int:
        return self.table.version

    def log_end_offset(self) -> int:
        """LEO of the snapshot in hand (S1.3), from its `txn` action: no data is read."""
        version = self.table.version
        if self._leo is None or self._leo[0] != version:
            self._leo = (version, self.table.app_version(LOG_END_OFFSET_APP_ID) or 0)
        return self._leo[1]

    def high_watermark(self) -> int:
        return self.log_end_offset()

    def log_start_offset(self) -> int:
        files = self.table.files()
        return files[0].min_offset if files else self.log_end_offset()

    def producer_entry(self, producer_id: int) -> ProducerEntry | None:
        version = self.table.version
        if self._producers_version != version:
            self._producers = {}
            self._producers_version = version
        if producer_id not in self._producers:
            self._producers[producer_id] = ProducerEntry.from_app_versions(
                producer_id,
                self.table.app_version(producer_state.state_app_id(producer_id)),
                self.table.app_version(producer_state.time_app_id(producer_id)),
            )
        return self._producers[producer_id]

    def refresh(self) -> bool:
        """Load the latest snapshot; True if it moved."""
        before = self.table.version
        return self.table.refresh() != before

    # -- append ----------------------------------------------------------------

    def append(
        self,
        payload: pa.Table,
        header: BatchHeader = BatchHeader(),
        *,
        app_versions: Mapping[str, int] | None = None,
        timeout_s: float = 300.0,
    ) -> AppendResult:
        """Append a batch atomically as one commit with dense offsets, or refuse it whole.

        Raises OffsetMismatch (S2.1), PolicyViolation (S2.3), OutOfOrderSequence,
        UnknownProducerId, InvalidProducerEpoch (S3); a refused batch writes nothing.
        """
        if not isinstance(header, BatchHeader):
            raise InvalidRequest(f"header must be a BatchHeader, not {type(header).__name__}")
        payload = conform_payload(payload)
        if payload.num_rows == 0:
            raise PolicyViolation("a batch must hold at least one record")
        deadline = time.monotonic() + timeout_s
        while True:
            refresh_if_stale(self.table, self.maintenance.max_snapshot_age_s)
            now_ms = self._clock()
            try:
                decision = self._decide_on_latest(payload.num_rows, header, now_ms)
            except CorruptRecord:
                # A duplicate check read a file that compaction removed after our snapshot.
                if not self.refresh():
                    raise
                continue
            if decision.duplicate_of is not None:
                return AppendResult(
                    decision.duplicate_of, decision.duplicate_of + payload.num_rows - 1, self.version, duplicate=True
                )
            rows = stamp(payload, decision.base_offset, header, now_ms * 1000)
            new_leo = decision.base_offset + payload.num_rows
            versions = {LOG_END_OFFSET_APP_ID: new_leo, **(app_versions or {})}
            if decision.entry is not None:
                versions.update(decision.entry.app_versions())
            try:
                version = self.table.append(rows, app_versions=versions, compression=self.config.compression_type)
            except CommitConflict:
                if time.monotonic() > deadline:
                    raise KafkaTimeout(
                        f"{self.topic}-{self.partition}: gave up after {timeout_s:g} s of lost commit races"
                    ) from None
                continue
            self._leo = (version, new_leo)
            # app_versions may have rewritten producer entries: keep only what we know.
            self._producers_version = version
            self._producers = {}
            if decision.entry is not None and not set(decision.entry.app_versions()) & set(app_versions or {}):
                self._producers[decision.entry.producer_id] = decision.entry
            self.last_maintenance = maintain(self.table, self.maintenance)
            return AppendResult(decision.base_offset, new_leo - 1, version)

    def append_marker(
        self, producer_id: int, producer_epoch: int, control: ControlType, *, timeout_s: float = 300.0
    ) -> AppendResult:
        """Write the COMMIT/ABORT marker of `producer_id`'s transaction as one control row (S4.5, S4.6).

        The marker carries the epoch the coordinator bumped to when it decided, so
        after it the partition refuses the transaction's epoch (a zombie's late
        write is fenced) and the producer's next batch must start at sequence 0.
        Idempotent: if the partition already saw `producer_epoch` (or a newer one)
        for this producer id, the marker was written before and nothing is
        appended (`duplicate=True`, offsets -1). Never refused for a missing
        expected offset: markers are not the producer's batches.
        """
        if not isinstance(control, ControlType):
            raise InvalidRequest(f"control must be a ControlType, not {control!r}")
        # Validates the identity's types and ranges; a control row's own sequence is -1 (stamp).
        header = BatchHeader(producer_id, producer_epoch, 0, is_transactional=True)
        if not header.is_idempotent:
            raise InvalidRequest(f"a marker needs a producer id, not {producer_id}")
        payload = conform_payload(pa.table({"value": pa.array([None], pa.binary())}))
        deadline = time.monotonic() + timeout_s
        while True:
            refresh_if_stale(self.table, self.maintenance.max_snapshot_age_s)
            entry = self.producer_entry(producer_id)
            if entry is not None and entry.producer_epoch >= producer_epoch:
                return AppendResult(-1, -1, self.version, duplicate=True)
            now_ms = self._clock()
            leo = self.log_end_offset()
            marked = ProducerEntry(producer_id, producer_epoch, NO_SEQUENCE, now_ms)
            rows = stamp(payload, leo, header, now_ms * 1000, control)
            versions = {LOG_END_OFFSET_APP_ID: leo + 1, **marked.app_versions()}
            try:
                version = self.table.append(rows, app_versions=versions, compression=self.config.compression_type)
            except CommitConflict:
                if time.monotonic() > deadline:
                    raise KafkaTimeout(
                        f"{self.topic}-{self.partition}: gave up writing a marker after {timeout_s:g} s of lost races"
                    ) from None
                continue
            self._leo = (version, leo + 1)
            self._producers_version = version
            self._producers = {producer_id: marked}
            self.last_maintenance = maintain(self.table, self.maintenance)
            return AppendResult(leo, leo, version)

    def _decide_on_latest(self, count: int, header: BatchHeader, now_ms: int) -> _Decision:
        """Decide on the snapshot in hand; a refusal is re-checked on the latest snapshot."""
        try:
            return self._decide(count, header, now_ms)
        except KafkaException:
            if not self.refresh():
                raise
        return self._decide(count, header, now_ms)

    def _decide(self, count: int, header: BatchHeader, now_ms: int) -> _Decision:
        leo = self.log_end_offset()
        entry = None
        if header.is_idempotent:
            current = self.producer_entry(header.producer_id)
            verdict = producer_state.check_batch(
                current, header, count, now_ms, self.config.producer_id_expiration_ms
            )
            if verdict is Verdict.MAYBE_DUPLICATE:
                assert current is not None
                original = self._find_batch(header, count)
                if original is None:
                    raise producer_state.out_of_order(current, header)
                return _Decision(base_offset=original, entry=None, duplicate_of=original)
            entry = producer_state.after_append(header, count, now_ms)
        if header.expected_offset is None and self.config.check_expected_offsets:
            raise PolicyViolation(
                f"topic {self.topic} has check.expected.offsets=true and the batch carries no expected offset",
                log_end_offset=leo,
            )
        if header.expected_offset is not None and header.expected_offset != leo:
            raise OffsetMismatch(
                f"{self.topic}-{self.partition}: expected offset {header.expected_offset} "
                f"is not the log end offset {leo}",
                expected_offset=header.expected_offset,
                log_end_offset=leo,
            )
        return _Decision(base_offset=leo, entry=entry)

    def _find_batch(self, header: BatchHeader, count: int) -> int | None:
        """Base offset of an appended batch with this producer, epoch and sequence range, if any."""
        first, last = header.base_sequence, last_sequence(header.base_sequence, count)
        in_range = (pc.field("sequence") >= first) & (pc.field("sequence") <= last)
        if last < first:  # the batch wrapped past 2^31-1 (S3.1)
            in_range = (pc.field("sequence") >= first) | (pc.field("sequence") <= last)
        predicate = (
            (pc.field("producer_id") == header.producer_id)
            & (pc.field("producer_epoch") == header.producer_epoch)
            & in_range
        )
        found = []
        for entry in self.table.files():
            if not entry.min_producer_id <= header.producer_id <= entry.max_producer_id:
                continue
            rows = self.table.read_file(entry, ["offset", "sequence", "producer_id", "producer_epoch"], predicate)
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

    # -- fetch -----------------------------------------------------------------

    def fetch(self, start_offset: int, max_records: int = 500, max_bytes: int = 1 << 20) -> pa.Table:
        """Rows from `start_offset` on, in offset order, up to the budgets (S1.4).

        At least one record is returned if any exists, even past `max_bytes`, as
        Kafka returns at least one batch. Raises OffsetOutOfRange outside
        [log start offset, LEO].
        """
        for name, value in (("start_offset", start_offset), ("max_records", max_records), ("max_bytes", max_bytes)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise OffsetOutOfRange(f"{name} must be an integer, not {value!r}")
        if max_records < 1 or max_bytes < 1:
            raise OffsetOutOfRange(f"fetch budgets must be positive, got {max_records} records, {max_bytes} bytes")
        if start_offset > self.log_end_offset() or start_offset < self.log_start_offset():
            self.refresh()
        leo, lso = self.log_end_offset(), self.log_start_offset()
        if not lso <= start_offset <= leo:
            raise OffsetOutOfRange(
                f"{self.topic}-{self.partition}: offset {start_offset} is outside [{lso}, {leo}]",
                log_start_offset=lso,
                log_end_offset=leo,
            )
        for attempt in range(2):
            try:
                return self._fetch_files(start_offset, leo, max_records, max_bytes)
            except CorruptRecord:
                # Compaction may have removed a file after our snapshot: reload once.
                if attempt or not self.refresh():
                    raise
        raise AssertionError("unreachable")

    def _fetch_files(self, start_offset: int, end_offset: int, max_records: int, max_bytes: int) -> pa.Table:
        chunks: list[pa.Table] = []
        records = size = 0
        files = self.table.files()
        # Offsets are dense and files do not overlap, so max offsets are sorted too.
        first = bisect.bisect_left(files, start_offset, key=lambda entry: entry.max_offset)
        for entry in files[first:]:
            if entry.min_offset >= end_offset:
                break
            rows = self.table.read_file(entry, None, pc.field("offset") >= start_offset)
            rows = rows.filter(pc.field("offset") < end_offset)
            if chunks and size + rows.nbytes > max_bytes:
                break
            chunks.append(rows)
            records += rows.num_rows
            size += rows.nbytes
            if records >= max_records or size >= max_bytes:
                break
        if not chunks:
            return self.table.schema.empty_table()
        table = pa.concat_tables(chunks).sort_by("offset")
        return table.slice(0, max_records) if table.num_rows > max_records else table
