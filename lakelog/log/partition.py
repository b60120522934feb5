"""A topic-partition log on one Delta table: append (S1, S2, S3), fetch and isolation (S5).

Every append is decided on the snapshot in hand (LEO, the producer's entry, the
topic config) and committed as exactly the next version. A lost race waits out the
retry policy's backoff (lakelog.store.io.retry), reloads the snapshot and decides
again; a refusal is only returned once it holds on the latest snapshot, so nothing
is ever refused on stale state either.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lakelog.errors import (
    CommitConflict,
    CorruptRecord,
    InvalidRequest,
    KafkaException,
    OffsetMismatch,
    PolicyViolation,
)
from lakelog.log import producer_state

# The fetch's names stay importable from here too.
from lakelog.log.fetch import ISOLATION_LEVELS as ISOLATION_LEVELS
from lakelog.log.fetch import READ_COMMITTED, READ_UNCOMMITTED, FetchResult, check_fetch, check_in_range, read_range
from lakelog.log.fetch_files import AbortedRows
from lakelog.log.partition_file import PARTITION_ORDER, partition_files
from lakelog.log.producer_index import ProducerIndex, find_batch
from lakelog.log.producer_state import ProducerEntry, Verdict
from lakelog.log.records import AppendResult as AppendResult
from lakelog.log.records import BatchHeader, ControlType, check_record_sizes, conform_payload, stamp, stamped_statistics
from lakelog.log.topic_config import TopicConfig
from lakelog.log.transactions import AbortedTransaction, TransactionIndex
from lakelog.log.verification import StagedVerification, TransactionVerification, verify_batch
from lakelog.store import Table
from lakelog.store.delta.lost_race import after_lost_race
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff
from lakelog.store.upkeep.maintenance import MaintenancePolicy, MaintenanceReport, maintain, note_lost_race, refresh_if_stale

logger = logging.getLogger(__name__)

LOG_END_OFFSET_APP_ID = "lakelog.log_end_offset"
# The log start offset set by delete_records or retention (S9.1), when it is inside a file still active.
LOG_START_OFFSET_APP_ID = "lakelog.log_start_offset"
# How long an append keeps retrying lost commit races by default.
APPEND_TIMEOUT_S = 300.0
Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class _Decision:
    base_offset: int
    duplicate_of: int | None = None
    # The partition's entry of the batch's producer the decision read (the S4.4 check made after the file is written).
    entry: ProducerEntry | None = None


class PartitionLog:
    """One topic-partition: a Delta table whose rows are records with dense offsets."""

    def __init__(self, table: Table, topic: str, partition: int, config: TopicConfig, clock: Clock = wall_clock_ms):
        self.table = table
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock = clock
        self._leo: tuple[int, int] | None = None
        self._recorded_start: tuple[int, int | None] | None = None
        # Producer entries derived from the rows (S9.4): a cache, as the transaction index.
        self._producer_index = ProducerIndex()
        self.maintenance = MaintenancePolicy(
            merge_order=PARTITION_ORDER, segment_files=config.segment_files, compression=config.compression_type
        )
        # What the maintenance after the last commit of this handle did (its errors are not raised).
        self.last_maintenance: MaintenanceReport | None = None
        self._transactions = TransactionIndex()

    # -- state of the snapshot in hand ---------------------------------------

    @property
    def version(self) -> int:
        return self.table.version

    def log_end_offset(self) -> int:
        """LEO of the snapshot in hand (S1.3), from its `txn` action: no data is read."""
        version = self.table.version
        if self._leo is None or self._leo[0] != version:
            leo = self.table.app_version(LOG_END_OFFSET_APP_ID) or 0
            files = partition_files(self.table)
            if files and files[-1].max_offset >= leo:
                # A commit added rows without moving its LEO: not lakelog's, and an append would reuse their offsets.
                raise CorruptRecord(
                    f"{self.topic}-{self.partition} at version {version}: file {files[-1].path} holds offset "
                    f"{files[-1].max_offset}, at or past the log end offset {leo} its log records"
                )
            self._leo = (version, leo)
        return self._leo[1]

    def high_watermark(self) -> int:
        return self.log_end_offset()

    def log_start_offset(self) -> int:
        """Log start offset of the snapshot in hand (S9.1): the first active file's, or the one delete_records set.

        Retention removes whole files, so the first active file starts the log; `delete_records`
        may move it into a file, recorded as a `txn` action. Never above the LEO.
        """
        files = partition_files(self.table)
        leo = self.log_end_offset()
        start = files[0].min_offset if files else leo
        version = self.table.version
        if self._recorded_start is None or self._recorded_start[0] != version:
            self._recorded_start = (version, self.table.app_version(LOG_START_OFFSET_APP_ID))
        recorded = self._recorded_start[1]
        if recorded is not None and recorded > start:
            start = recorded
        return min(start, leo)

    def producer_entry(self, producer_id: int) -> ProducerEntry | None:
        """The producer's entry in the snapshot in hand, from its last row below the LEO (S3.5), expired or not.

        None if it has no row there, or its last row is below the log start offset (S9.4).
        """
        return self._producer_index.entry(self.table, producer_id, self.log_end_offset(), self.log_start_offset)

    def live_producer_entry(self, producer_id: int, now_ms: int) -> ProducerEntry | None:
        """S9.4: the entry an append is decided on: None also when idle past producer.id.expiration.ms at `now_ms`
        with no open transaction."""
        return self._producer_index.live_entry(
            self.table,
            producer_id,
            self.log_end_offset(),
            self.log_start_offset,
            now_ms,
            self.config.producer_id_expiration_ms,
        )

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
        timeout_s: float = APPEND_TIMEOUT_S,
        backoff: Backoff | None = None,
        transaction: TransactionVerification | None = None,
        ready: Callable[[], TransactionVerification | None] | None = None,
    ) -> AppendResult:
        """Append a batch atomically as one commit with dense offsets, or refuse it whole.

        A lost commit race decides again at once the first time, then after the waits of `backoff`
        (the caller's, whose deadline then replaces `timeout_s`; else the package's retry policy).
        A transactional batch that starts its producer's transaction here is verified with `transaction`'s
        coordinator in each decision (S4.4, lakelog.log.verification). Raises MsgSizeTooLarge (a record past
        max.message.bytes), OffsetMismatch (S2.1), PolicyViolation (S2.3), OutOfOrderSequence, UnknownProducerId,
        InvalidProducerEpoch (S3), InvalidTxnState (S4.4); a refused batch writes nothing; KafkaTimeout once
        the deadline passed in lost races.

        `ready`, instead of `transaction`: what the commit waits for and the file does not (the transaction's add
        of this partition, a suite read). The first decision writes the file at once; `ready()` then gives the
        verification (or None) the batch is checked with (S4.4, on the version decided on) before the commit's
        put; a refusal or a duplicate is answered after `ready()`. If it or the check raises, the file is deleted
        and nothing commits (S8.3); a refusal of the check is decided again as without `ready`."""
        if not isinstance(header, BatchHeader):
            raise InvalidRequest(f"header must be a BatchHeader, not {type(header).__name__}")
        payload = conform_payload(payload)
        if payload.num_rows == 0:
            raise PolicyViolation("a batch must hold at least one record")
        check_record_sizes(payload, self.config.max_message_bytes, f"{self.topic}-{self.partition}")
        backoff = DEFAULT_POLICY.start(timeout_s) if backoff is None else backoff
        # True once a lost race reloaded the snapshot: a refusal decided on it already holds on the latest.
        reloaded = False
        while True:
            refresh_if_stale(self.table, self.maintenance.max_snapshot_age_s)
            now_ms = self._clock()
            try:
                decision = self._decide_on_latest(
                    payload.num_rows, header, now_ms, transaction, reloaded=reloaded, verify=ready is None
                )
            except CorruptRecord:
                # A duplicate check read a file that compaction removed after our snapshot.
                if not self.refresh():
                    raise
                continue
            except KafkaException:
                _wait_for(ready)
                raise
            if decision.duplicate_of is not None:
                _wait_for(ready)
                return AppendResult(
                    decision.duplicate_of, decision.duplicate_of + payload.num_rows - 1, self.version, duplicate=True
                )
            rows = stamp(payload, decision.base_offset, header, now_ms * 1000)
            new_leo = decision.base_offset + payload.num_rows
            # The producer's entry is its rows (S9.4): only the LEO and the caller's ids go to the txn actions.
            versions = {LOG_END_OFFSET_APP_ID: new_leo, **(app_versions or {})}
            check = ready and StagedVerification(ready, decision.entry, header, self.topic, self.partition, self.version)
            ready = None  # one staged attempt: a later decision verifies first, with what it gave
            try:
                version = self._commit(payload, rows, decision.base_offset, header, None, versions, backoff, now_ms, check)
            except KafkaException:
                if not check or not check.refused:
                    raise  # else refused once its file was out: decided again as any batch
            else:
                if version is not None:
                    return AppendResult(decision.base_offset, new_leo - 1, version)
                reloaded = True
            transaction = check.verification if check else transaction

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        control: ControlType,
        *,
        expected_offset: int | None = None,
        timeout_s: float = APPEND_TIMEOUT_S,
        backoff: Backoff | None = None,
        ready: Callable[[], object] | None = None,
    ) -> AppendResult:
        """Write the COMMIT/ABORT marker of `producer_id`'s transaction as one control row (S4.5, S4.6).

        The marker carries the epoch the coordinator bumped to when it decided, so
        after it the partition refuses the transaction's epoch (a zombie's late
        write is fenced) and the producer's next batch must start at sequence 0.
        Idempotent: if the partition already saw `producer_epoch` (or a newer one)
        for this producer id, the marker was written before and nothing is
        appended (`duplicate=True`, offsets -1). Never refused for a missing
        expected offset: markers are not the producer's batches. Lost races wait as in `append`.
        With `expected_offset` the marker lands only at that log end offset, else OffsetMismatch
        (decided on the snapshot the caller checked: KIP-664's admin abort, S4.8). `ready`: the decision the
        marker closes, still being committed: the file goes out first, the commit's put waits for it (`append`)."""
        if not isinstance(control, ControlType):
            raise InvalidRequest(f"control must be a ControlType, not {control!r}")
        # Validates the identity's types and ranges; a control row's own sequence is -1 (stamp).
        header = BatchHeader(producer_id, producer_epoch, 0, is_transactional=True)
        if not header.is_idempotent:
            raise InvalidRequest(f"a marker needs a producer id, not {producer_id}")
        payload = conform_payload(pa.table({"value": pa.array([None], pa.binary())}))
        backoff = DEFAULT_POLICY.start(timeout_s) if backoff is None else backoff
        while True:
            refresh_if_stale(self.table, self.maintenance.max_snapshot_age_s)
            if expected_offset is not None and expected_offset != self.log_end_offset():
                raise OffsetMismatch(
                    f"{self.topic}-{self.partition}: the marker expected log end offset {expected_offset}, "
                    f"not {self.log_end_offset()}",
                    expected_offset=expected_offset,
                    log_end_offset=self.log_end_offset(),
                )
            try:
                entry = self.producer_entry(producer_id)
            except CorruptRecord:
                # A lookup read a file that compaction removed after our snapshot.
                if not self.refresh():
                    raise
                continue
            if entry is not None and entry.producer_epoch >= producer_epoch:
                _wait_for(ready)
                return AppendResult(-1, -1, self.version, duplicate=True)
            now_ms = self._clock()
            leo = self.log_end_offset()
            rows = stamp(payload, leo, header, now_ms * 1000, control)
            version = self._commit(payload, rows, leo, header, control, {LOG_END_OFFSET_APP_ID: leo + 1}, backoff, now_ms, ready)
            ready = None
            if version is None:
                continue
            return AppendResult(leo, leo, version)

    def _commit(
        self,
        payload: pa.Table,
        rows: pa.Table,
        base_offset: int,
        header: BatchHeader,
        control: ControlType | None,
        versions: Mapping[str, int],
        backoff: Backoff,
        now_ms: int,
        before_put: Callable[[], object] | None = None,
    ) -> int | None:
        """Commit `rows` (`stamp` of `payload` at `base_offset` with `header` and `control`) as exactly the next
        version, then maintain the table; returns the version. `before_put`: see `Table.append`.

        None if another writer took that version: the snapshot is reloaded (after the backoff's wait from the
        second loss on), and the caller decides again on it. KafkaTimeout once the backoff's deadline has passed.
        Statistics and the producer's entry (folded into the producer index) come from stamping, with no pass
        over the rows. `now_ms`, the log's clock at the decision, is the add action's modificationTime.
        """
        count = rows.num_rows
        new_leo = base_offset + count
        last_timestamp_ms = rows.column("timestamp")[count - 1].value // 1000
        entry = producer_state.batch_entry(header, base_offset, count, last_timestamp_ms, now_ms, control is not None)
        try:
            version = self.table.append(
                rows,
                app_versions=versions,
                compression=self.config.compression_type,
                modification_time_ms=now_ms,
                statistics=stamped_statistics(payload, base_offset, header, control),
                # Other handles fold the producer's entry from it without reading the file (ProducerIndex).
                tags=None if entry is None else {producer_state.PRODUCER_TAG: producer_state.entry_tag(entry)},
                before_put=before_put,
            )
        except CommitConflict as conflict:
            taken = getattr(conflict, "decided_on", self.version) + 1
            note_lost_race(self.table)  # its next decisions reload first (refresh_if_stale)
            after_lost_race(backoff, f"{self.topic}-{self.partition}: the append of version {taken}", logger)
            # Others committed (while this writer waited, if it did): decide on what they left, not on what it lost to.
            self.refresh()
            return None
        self._leo = (version, new_leo)
        if (
            self._recorded_start is not None
            and self._recorded_start[0] == version - 1
            and LOG_START_OFFSET_APP_ID not in versions
        ):
            # This commit did not move the recorded log start: carry it, sparing a txn lookup per append.
            self._recorded_start = (version, self._recorded_start[1])
        self._producer_index.apply(base_offset, count, entry)
        self.last_maintenance = maintain(self.table, self.maintenance)
        return version

    def _decide_on_latest(
        self,
        count: int,
        header: BatchHeader,
        now_ms: int,
        transaction: TransactionVerification | None,
        *,
        reloaded: bool = False,
        verify: bool = True,
    ) -> _Decision:
        """Decide on the snapshot in hand; a refusal is re-checked on the latest snapshot (`reloaded`: it is).
        `verify` False leaves out the S4.4 check (made before the put: `StagedVerification`)."""
        try:
            return self._decide(count, header, now_ms, transaction, verify)
        except KafkaException:
            if reloaded or not self.refresh():
                raise
        return self._decide(count, header, now_ms, transaction, verify)

    def _decide(
        self, count: int, header: BatchHeader, now_ms: int, transaction: TransactionVerification | None, verify: bool = True
    ) -> _Decision:
        leo = self.log_end_offset()
        current = None
        if header.is_idempotent:
            current = self.live_producer_entry(header.producer_id, now_ms)
            verdict = producer_state.check_batch(current, header, count, now_ms, self.config.producer_id_expiration_ms)
            if verdict is Verdict.MAYBE_DUPLICATE:
                assert current is not None
                original = find_batch(self.table, header, count)
                if original is None:
                    raise producer_state.out_of_order(current, header)
                return _Decision(base_offset=original, duplicate_of=original)
        if header.expected_offset is None and self.config.check_expected_offsets:
            raise PolicyViolation(
                f"topic {self.topic} has check.expected.offsets=true and the batch carries no expected offset",
                log_end_offset=leo,
            )
        if header.expected_offset is not None and header.expected_offset != leo:
            raise OffsetMismatch(
                f"{self.topic}-{self.partition}: expected offset {header.expected_offset} is not the log end offset {leo}",
                expected_offset=header.expected_offset,
                log_end_offset=leo,
            )
        # Last: the only check that reads another table (S4.4); never reused across a lost race.
        if verify:
            verify_batch(transaction, current, header, self.topic, self.partition, self.version)
        return _Decision(base_offset=leo, entry=current)

    # -- fetch -----------------------------------------------------------------

    def fetch(
        self,
        start_offset: int,
        max_records: int = 500,
        max_bytes: int = 1 << 20,
        isolation_level: str = READ_UNCOMMITTED,
    ) -> FetchResult:
        """Rows from `start_offset` on, in offset order, up to the budgets (S1.4, S5.2).

        `read_uncommitted` returns every row below the high watermark, control
        rows included (as a broker hands control batches to its clients).
        `read_committed` returns only data rows below the LSO that no aborted
        transaction holds. `max_records` bounds the rows returned; `max_bytes`
        bounds the rows read (before filtering): a fetch stops before the file
        that would exceed it, but always reads at least one file, so it always
        makes progress. Rows are filtered out, so continue from `next_offset`,
        never from the last offset returned plus one (S5.4). Raises
        OffsetOutOfRange outside [log start offset, LEO], InvalidRequest for an
        unknown isolation level.
        """
        check_fetch(start_offset, max_records, max_bytes, isolation_level)
        if start_offset > self.log_end_offset() or start_offset < self.log_start_offset():
            self.refresh()
        read_committed = isolation_level == READ_COMMITTED
        self._check_in_range(start_offset)
        for attempt in range(2):
            try:
                if read_committed:
                    end = self.last_stable_offset()
                    aborted = self._transactions.aborted_transactions(start_offset, end)
                    return self._read_range(start_offset, end, max_records, max_bytes, AbortedRows(aborted))
                return self._read_range(start_offset, self.high_watermark(), max_records, max_bytes, None)
            except CorruptRecord:
                # Compaction or retention (S9.1) may have removed a file after our snapshot (the transaction
                # index may have reloaded already): reload once; a start the log start has passed since is
                # then out of range, not corrupt.
                if attempt:
                    raise
                self.refresh()
                self._check_in_range(start_offset)
        raise AssertionError("unreachable")

    def _check_in_range(self, start_offset: int) -> None:
        """OffsetOutOfRange unless start_offset is in [log start offset, LEO] of the snapshot in hand (S9.1)."""
        check_in_range(f"{self.topic}-{self.partition}", start_offset, self.log_start_offset(), self.log_end_offset())

    def fetch_planned(
        self, start_offset: int, end_offset: int, max_bytes: int, aborted: Sequence[AbortedTransaction] | None
    ) -> FetchResult:
        """Rows [start_offset, end_offset) of the snapshot in hand, for a scan planned on it (lakelog.log.scan).

        With `aborted` (read_committed), control rows and rows of those aborted
        transactions are dropped: the plan already cut the range at the LSO and
        listed what to drop, so no transaction index is built and only the files
        holding the range are read. Without, every row of the range is returned.
        """
        committed = AbortedRows(list(aborted)) if aborted is not None else None
        return self._read_range(start_offset, end_offset, 1 << 62, max_bytes, committed)

    def _read_range(
        self, start_offset: int, end_offset: int, max_records: int, max_bytes: int, committed: AbortedRows | None
    ) -> FetchResult:
        """Read [start_offset, end_offset) of the snapshot in hand (lakelog.log.fetch); `committed` filters for read_committed."""
        where = f"{self.topic}-{self.partition}"
        return read_range(self.table, where, start_offset, end_offset, max_records, max_bytes, committed)

    # -- isolation (S5) ------------------------------------------------------------

    def last_stable_offset(self) -> int:
        """LSO of the snapshot in hand (S5.1): first offset of the earliest open transaction, else the HW.

        Brought up to date incrementally: only rows appended since the last call are read.
        """
        return self._transaction_index().last_stable_offset()

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each transaction open in the snapshot in hand."""
        return self._transaction_index().open_transactions()

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTransaction]:
        """The aborted-transaction index (S5.3) of the snapshot in hand, in marker order.

        Lists every aborted transaction whose [first offset, marker offset] meets
        [start_offset, end_offset): what a reader of that range must drop.
        """
        for name, value in (("start_offset", start_offset), ("end_offset", end_offset)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidRequest(f"{name} must be a non-negative integer, not {value!r}")
        return self._transaction_index().aborted_transactions(start_offset, end_offset)

    def _transaction_index(self) -> TransactionIndex:
        """The transaction index, folded up to the LEO of the snapshot in hand."""
        for attempt in range(2):
            try:
                self._transactions.catch_up(self.table, self.log_end_offset())
                return self._transactions
            except CorruptRecord:
                # Compaction may have removed a file after our snapshot: reload once.
                if attempt or not self.refresh():
                    raise
        raise AssertionError("unreachable")


def _wait_for(ready: Callable[[], object] | None) -> None:
    if ready is not None:
        ready()
