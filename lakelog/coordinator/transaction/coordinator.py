"""The transaction coordinator on the tables: `__transaction_state` logs, markers, the sweep (S4, S8.2).

Every request runs the pure handler of `handlers.py` on the state replayed
from the id's `__transaction_state/<n>` partition and commits its records with
`CoordinatorLog.run` (decided on the exact log end offset it follows). Nothing
lives only in this object: any process may crash at any point, and the next
one to touch the id (the producer's next `init_producer_id`, or the sweep)
finishes what was left (S4.2, S4.5).

Finishing a decided transaction (`PrepareCommit` / `PrepareAbort`) is: write its
marker to every partition (idempotent per producer id and epoch, so several
processes may do it at once), then record `Complete*`. The markers are written
in parallel, one thread per partition, each its own commit decided on its
partition's snapshot. A producer's own end returns once its markers are written
(its data is visible to read_committed readers then) and leaves `Complete*` to
its next `add_partitions`, which records it in the same commit that starts the
next transaction; any init of the id, or the sweep, completes it otherwise (S4.5).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from lakelog import config as config_module
from lakelog.coordinator import transaction as txn
from lakelog.coordinator.runtime.outcome import Outcome
from lakelog.coordinator.runtime.state_log import CoordinatorLog, StateCodec
from lakelog.coordinator.transaction import (
    AddPartitionsResult,
    EndTransactionResult,
    InitProducerIdResult,
    SweepAction,
    TopicPartitionKey,
    TransactionConfig,
    TransactionMarkers,
    TransactionMetadata,
    TxnState,
)
from lakelog.coordinator.transaction.handlers import TxnOutcome
from lakelog.coordinator.transaction.results import SweepReport
from lakelog.coordinator.transaction.staged_markers import StagedMarkers
from lakelog.errors import ConcurrentTransactions, InvalidRequest, KafkaTimeout, ProducerFenced
from lakelog.log import PartitionLog, allocate_producer_id, open_partition
from lakelog.log.partition import APPEND_TIMEOUT_S, Clock, wall_clock_ms
from lakelog.log.topics import existing_internal_partitions, open_internal_partition
from lakelog.store import Location
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff, RetryPolicy

logger = logging.getLogger(__name__)

TRANSACTION_STATE_LOG = "__transaction_state"
# Fault points, in the order an end meets them (tests kill a process at one of them). Markers are
# written in parallel: before_marker and after_marker are met in each partition's thread, with its index.
FAULT_AFTER_DECISION = "after_decision"
FAULT_BEFORE_MARKER = "before_marker"
FAULT_AFTER_MARKER = "after_marker"
FAULT_BEFORE_COMPLETE = "before_complete"
# In the next add_partitions of the producer whose end left Complete* to it, before that one commit.
FAULT_BEFORE_COMPLETE_AND_BEGIN = "before_complete_and_begin"
# In add_partitions, before its commit: the producer's appends of those partitions write their files meanwhile.
FAULT_BEFORE_ADD = "before_add"
# Threads writing one transaction's markers at once (a transaction over more partitions queues the rest).
MAX_MARKER_THREADS = 16

FaultHook = Callable[[str, Mapping[str, Any]], None]


class TransactionCoordinator:
    """The transaction coordinator of one root; cheap to create, safe to use from many processes at once."""

    def __init__(
        self,
        root: str | Location,
        broker_config: Mapping[str, Any] | None = None,
        *,
        clock: Clock = wall_clock_ms,
        fault: FaultHook | None = None,
        partition_logs: Callable[[str, int], PartitionLog | None] | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        """`partition_logs(topic, partition)` lends the caller's open partition logs for markers (None:
        open one here): the producer's own handle already holds the snapshot its data made, so its
        marker needs no reload, and the next write on that handle does not lose a race to the marker.
        `retry` times every retry: lost races on the logs, and waits for another process's finish."""
        self.root = root
        self.retry = retry
        broker = config_module.load("broker", broker_config)
        self.config = TransactionConfig.from_broker_config(broker)
        self._requested_partitions = broker["transaction.state.log.num.partitions"]
        self._offsets_partitions = broker["offsets.topic.num.partitions"]
        self._num_partitions: int | None = None
        self._clock = clock
        self._fault = fault
        self._logs: dict[int, CoordinatorLog[dict[str, TransactionMetadata]]] = {}
        self._partitions: dict[TopicPartitionKey, PartitionLog] = {}
        self._partition_logs = partition_logs
        # Per id, the markers of its last end that this object wrote to every partition and left
        # uncompleted: proof, from its own commits, that the next add_partitions may record Complete*.
        self._markers_written: dict[str, TransactionMarkers] = {}
        self._marker_threads: ThreadPoolExecutor | None = None
        self._verify_lock = threading.Lock()

    # -- requests (S4.1-S4.6) -------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, transaction_timeout_ms: int, timeout_s: float = 60.0
    ) -> InitProducerIdResult:
        """Map the id to a producer id and bump its epoch, fencing every earlier instance (S4.1).

        An unfinished earlier transaction is finished first (S4.2): an ongoing one is
        fenced and aborted, a decided one rolled forward; this call does that work
        itself and asks again at once, waiting only if the id moved on meanwhile
        (another process's request), up to `timeout_s`.
        """
        # Checked before anything is allocated or created, so a refusal writes nothing (S8.3).
        timeout_error = txn.check_transaction_timeout(transaction_timeout_ms, self.config)
        if timeout_error is not None:
            raise timeout_error
        backoff = self.retry.start(timeout_s)
        # Allocated at most once per request, and only once an answer on the latest state needs it (S8.3).
        new_producer_id: int | None = None
        finished = False
        while True:
            outcome, new_producer_id = self._run_allocating(
                transactional_id,
                lambda current, producer_id: txn.init_producer_id(
                    current, transactional_id, transaction_timeout_ms, producer_id, self._clock(), self.config
                ),
                backoff,
                new_producer_id,
            )
            if outcome.error is None:
                return cast(InitProducerIdResult, outcome.response)  # what init_producer_id answers when it goes through
            if not isinstance(outcome.error, ConcurrentTransactions):
                raise outcome.error
            # Finished here just before, and refused again: another process moved the id on meanwhile.
            if finished and not backoff.wait():
                message = (
                    f"init of transactional.id {transactional_id!r} waited {timeout_s:g} s for its last transaction to finish"
                )
                logger.warning("%s; giving up", message)
                raise KafkaTimeout(message) from outcome.error
            logger.info(
                "init of transactional.id %r finishes its last transaction first (S4.2): %s", transactional_id, outcome.error
            )
            self.finish(transactional_id, backoff=backoff)
            finished = True

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartitionKey]
    ) -> AddPartitionsResult:
        """Add partitions to the ongoing transaction, starting it if none is open (S4.4).

        Over the id's decided end whose markers this object wrote (`end_transaction(complete=False)`),
        one commit records its `Complete*` and starts the new transaction. Over one it did not
        finish, it finishes it first (markers, `Complete*`, S4.5) and asks again."""
        partitions = tuple(partitions)
        backoff: Backoff | None = None
        self._hit(FAULT_BEFORE_ADD, transactional_id=transactional_id, partitions=partitions)
        while True:
            written = self._markers_written.get(transactional_id)
            if written is not None:
                self._hit(FAULT_BEFORE_COMPLETE_AND_BEGIN, transactional_id=transactional_id)

            # `written` bound as a default: this iteration's value (the closure runs within it).
            def add(state: dict[str, TransactionMetadata], written: TransactionMarkers | None = written) -> TxnOutcome[Any]:
                return txn.add_partitions(
                    state.get(transactional_id), transactional_id, producer_id, producer_epoch, partitions, self._clock(), written
                )

            outcome = self._logged(self._log_of(transactional_id).run(add, backoff=backoff))
            # Completed here, by another process, or moved on: these markers are no proof of anything next.
            self._markers_written.pop(transactional_id, None)
            if outcome.error is None:
                return cast(AddPartitionsResult, outcome.response)  # what add_partitions answers when it goes through
            if backoff is not None or not isinstance(outcome.error, ConcurrentTransactions):
                raise outcome.error
            logger.info(
                "add_partitions of transactional.id %r finishes its last transaction first (S4.5): %s",
                transactional_id,
                outcome.error,
            )
            backoff = self.retry.start(APPEND_TIMEOUT_S)
            self.finish(transactional_id, backoff=backoff)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartitionKey]
    ) -> AddPartitionsResult:
        """Check, on the latest state, that this producer may write these partitions now (S4.4, KIP-890).

        Safe to call from several threads at once (a producer's partitions are appended side by side): the
        checks take turns on the state log."""
        partitions = tuple(partitions)
        with self._verify_lock:
            return self._run(
                transactional_id,
                lambda current: txn.verify_partitions(current, transactional_id, producer_id, producer_epoch, partitions),
            )

    def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *, complete: bool = True
    ) -> EndTransactionResult:
        """Decide commit or abort with one record, write the markers, record completion (S4.5, S4.6).

        Returns the decided result and the identity (bumped epoch) to use next.
        A retry after a crash or a timeout gets the same answer and finishes
        whatever the first attempt left undone. With `complete=False` it returns
        once the markers are written (read_committed readers see the outcome) and
        leaves `Complete*` to this object's next `add_partitions` for the id (or any
        init, or the sweep): one serial commit less per transaction.
        """
        # One backoff for the decision, the markers and the completion.
        backoff = self.retry.start(APPEND_TIMEOUT_S)

        def decide(current: TransactionMetadata | None, new_producer_id: int | None) -> TxnOutcome[Any]:
            return txn.end_transaction(
                current, transactional_id, producer_id, producer_epoch, commit, self._clock(), new_producer_id
            )

        # The markers the decision will need, as the state in hand says: their files go out beside it.
        staged = self._stage_markers(decide(self._log_of(transactional_id).state.get(transactional_id), None), backoff)
        needed = None
        try:
            outcome, _ = self._run_allocating(transactional_id, decide, backoff)
            if outcome.error is not None:
                raise outcome.error
            self._hit(FAULT_AFTER_DECISION, transactional_id=transactional_id)
            # The state the decision was made on (or verified on the latest) is in hand: no reload to finish it.
            current = self._log_of(transactional_id).state.get(transactional_id)
            needed = txn.markers_for(current)
        finally:
            written = staged is not None and staged.decided(needed)
        self._finish(current, backoff, complete, written)
        return cast(EndTransactionResult, outcome.response)  # what end_transaction answers when it goes through

    def finish(
        self, transactional_id: str, *, backoff: Backoff | None = None, complete: bool = True
    ) -> TransactionMetadata | None:
        """Finish a decided transaction of the id, if there is one: markers, then `Complete*` (S4.5).

        Lost races wait on `backoff`, the calling request's (else one for this finish).
        `complete=False` stops after the markers (see `end_transaction`)."""
        current = self._log_of(transactional_id).catch_up().get(transactional_id)
        return self._finish(current, self.retry.start(APPEND_TIMEOUT_S) if backoff is None else backoff, complete)

    def _finish(
        self, current: TransactionMetadata | None, backoff: Backoff, complete: bool, written: bool = False
    ) -> TransactionMetadata | None:
        """`finish` on `current`, the id's state as last read or decided on (markers are idempotent, and
        `Complete*` is decided on the latest state, so a state that moved on meanwhile is harmless).
        `written`: its markers are in already (StagedMarkers)."""
        markers = txn.markers_for(current)
        if current is not None:
            self._markers_written.pop(current.transactional_id, None)
        if markers is None:
            return current
        transactional_id = markers.transactional_id
        if not written:
            self._write_markers(markers, backoff)
        self._hit(FAULT_BEFORE_COMPLETE, transactional_id=transactional_id)
        if not complete:
            self._markers_written[transactional_id] = markers
            return current
        outcome = self._logged(
            self._log_of(transactional_id).run(
                lambda state: txn.complete_transaction(state.get(transactional_id), markers, self._clock()), backoff=backoff
            )
        )
        return outcome.response

    def _stage_markers(self, peek: TxnOutcome[Any], backoff: Backoff) -> StagedMarkers | None:
        """Begin the markers a decision about to be committed will need (`peek`: it, on the state in hand)."""
        markers = txn.markers_for(peek.records[-1]) if peek.records and peek.error is None else None
        if markers is None or not isinstance(peek.records[-1], TransactionMetadata):
            return None
        # Partition handles are opened (or lent) here, in order, so no two threads open one at once.
        targets = [(index, self._partition(topic, partition)) for index, (topic, partition) in enumerate(markers.partitions)]
        points = (FAULT_BEFORE_MARKER, FAULT_AFTER_MARKER)
        return StagedMarkers(markers, targets, self._marker_pool(), backoff, self._hit, *points)

    def _marker_pool(self) -> ThreadPoolExecutor:
        if self._marker_threads is None:
            # Kept for the next end: starting threads costs milliseconds each on a busy machine.
            self._marker_threads = ThreadPoolExecutor(MAX_MARKER_THREADS, thread_name_prefix="lakelog-marker")
        return self._marker_threads

    def _write_markers(self, markers: TransactionMarkers, backoff: Backoff) -> None:
        """One marker per partition, all at once: each a commit of its own on its partition's latest snapshot.

        Returns once every marker is written; if one fails, raises its error after the others ended
        (those written stay written: markers are idempotent, whoever finishes next skips them)."""
        # Partition handles are opened (or lent) here, in order, so no two threads open one at once.
        targets = [(index, self._partition(topic, partition)) for index, (topic, partition) in enumerate(markers.partitions)]

        def write(index: int, log: PartitionLog) -> None:
            where = {"transactional_id": markers.transactional_id, "index": index, "topic": log.topic, "partition": log.partition}
            self._hit(FAULT_BEFORE_MARKER, **where)
            # The request's backoff is shared: a lost race in any partition grows the next wait, up to one deadline.
            log.append_marker(markers.producer_id, markers.producer_epoch, markers.control, backoff=backoff)
            self._hit(FAULT_AFTER_MARKER, **where)

        if len(targets) == 1:
            write(*targets[0])
            return
        futures = [self._marker_pool().submit(write, index, log) for index, log in targets]
        errors = [error for error in (future.exception() for future in futures) if error is not None]
        if errors:
            raise errors[0]

    # -- the sweep (S4.7, S8.2) -------------------------------------------------------

    def sweep(self, *, expire: bool = True, patient: bool = False) -> SweepReport:
        """Abort transactions past their timeout (fencing their producer), roll decided ones forward, expire idle
        transactional ids. A client held by a transaction (the broker's timer) runs it with `expire=False` and
        `patient`: a decided one is rolled forward only once it too waited past its timeout, as its owner writes its
        own markers until then. Idempotent; safe beside clients and other sweeps."""
        report = SweepReport()
        ignored = {SweepAction.NONE} if expire else {SweepAction.NONE, SweepAction.EXPIRE}

        def due(metadata: TransactionMetadata | None) -> SweepAction:
            action, now = txn.sweep(metadata, self._clock(), self.config).response, self._clock()
            early = patient and metadata is not None and now - metadata.txn_last_update_ms <= metadata.transaction_timeout_ms
            skip = action is None or action in ignored or (early and action is SweepAction.ROLL_FORWARD)
            return SweepAction.NONE if skip or action is None else action

        for partition in existing_internal_partitions(self.root, TRANSACTION_STATE_LOG):
            state_log = self._log(partition)
            report.partitions_scanned += 1
            state = state_log.catch_up()
            for transactional_id, metadata in list(state.items()):
                report.ids_seen += 1
                # Most ids need nothing: look on the state in hand, commit (on the latest) only if something is due.
                if due(metadata) is SweepAction.NONE:
                    continue

                # `transactional_id` bound as a default: this iteration's id (the closure runs within it).
                def sweep(state: dict[str, TransactionMetadata], transactional_id: str = transactional_id) -> TxnOutcome[Any]:
                    current = state.get(transactional_id)
                    if due(current) is SweepAction.NONE:
                        return Outcome(response=SweepAction.NONE)
                    return txn.sweep(current, self._clock(), self.config)

                outcome = self._logged(state_log.run(sweep))
                action = outcome.response
                if action is SweepAction.ABORT_TIMED_OUT:
                    report.aborted_timed_out.append(transactional_id)
                    logger.info(
                        "sweep: transactional.id %r past transaction.timeout.ms: aborting, its producer fenced (S4.7)",
                        transactional_id,
                    )
                elif action is SweepAction.EXPIRE:
                    report.expired.append(transactional_id)
                    logger.info("sweep: transactional.id %r idle past transactional.id.expiration.ms: expired", transactional_id)
                elif action is SweepAction.ROLL_FORWARD:
                    report.rolled_forward.append(transactional_id)
                    logger.info(
                        "sweep: transactional.id %r was decided: finishing its markers and completion (S4.5)", transactional_id
                    )
                if action in (SweepAction.ABORT_TIMED_OUT, SweepAction.ROLL_FORWARD):
                    self.finish(transactional_id)
        return report

    # -- reading ------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's current metadata, or None if it is unknown (never initialised, or expired)."""
        return self._log_of(transactional_id).catch_up().get(transactional_id)

    def list_transactions(self) -> list[TransactionMetadata]:
        """Every known transactional id's metadata, sorted by id."""
        found: list[TransactionMetadata] = []
        for partition in existing_internal_partitions(self.root, TRANSACTION_STATE_LOG):
            found.extend(self._log(partition).catch_up().values())
        return sorted(found, key=lambda metadata: metadata.transactional_id)

    # -- internals ------------------------------------------------------------------------

    def _run(
        self,
        transactional_id: str,
        handler: Callable[[TransactionMetadata | None], TxnOutcome[Any]],
        backoff: Backoff | None = None,
    ) -> Any:
        outcome = self._logged(
            self._log_of(transactional_id).run(lambda state: handler(state.get(transactional_id)), backoff=backoff)
        )
        if outcome.error is not None:
            raise outcome.error
        return outcome.response

    def _run_allocating(
        self,
        transactional_id: str,
        handler: Callable[[TransactionMetadata | None, int | None], TxnOutcome[Any]],
        backoff: Backoff,
        new_producer_id: int | None = None,
    ) -> tuple[TxnOutcome[Any], int | None]:
        """Run `handler(current, new_producer_id)`; allocate a producer id only for an answer that needs one.

        `CoordinatorLog.run` returns an answer without records only once it holds on the
        latest state, so an id is allocated only when the request, decided on the latest
        state, goes through with it: never for a refusal, nor for a stale state a lost race
        corrects (S8.3). At most one per request: a lost race after it reuses it, and it
        stays unused only if the state moved on between the allocation and the commit.
        Returns the outcome and the id allocated (or `new_producer_id` as given).
        """
        while True:
            # `new_producer_id` bound as a default: this round's value (the closure runs within it).
            def decide(state: dict[str, TransactionMetadata], new_producer_id: int | None = new_producer_id) -> TxnOutcome[Any]:
                return handler(state.get(transactional_id), new_producer_id)

            outcome = self._logged(self._log_of(transactional_id).run(decide, backoff=backoff))
            if not outcome.needs_producer_id:
                return outcome, new_producer_id
            if new_producer_id is not None:
                raise AssertionError(f"{transactional_id!r}: a handler given producer id {new_producer_id} asked for one")
            new_producer_id = allocate_producer_id(self.root, transactional_id, retry=self.retry)
            logger.debug(
                "transactional.id %r: producer id %d allocated, deciding again with it", transactional_id, new_producer_id
            )

    @staticmethod
    def _logged(outcome: TxnOutcome[Any]) -> TxnOutcome[Any]:
        """Log each state the outcome committed (an INFO line per transition, S4.3) or the fencing that refused it
        (S4.1), and hand the outcome on."""
        for record in outcome.records:
            log_transition(record)
        if isinstance(outcome.error, ProducerFenced):
            logger.info("refused a fenced producer: %s", outcome.error)
        return outcome

    def _log_of(self, transactional_id: str) -> CoordinatorLog[dict[str, TransactionMetadata]]:
        if not isinstance(transactional_id, str) or not transactional_id:
            raise InvalidRequest(f"transactional.id must be a non-empty string, not {transactional_id!r}")
        return self._log(txn.partition_for_transactional_id(transactional_id, self.num_partitions))

    @property
    def num_partitions(self) -> int:
        """Partitions of `__transaction_state`, fixed for the root when partition 0 was created."""
        if self._num_partitions is None:
            self._num_partitions = self._log(0).log.config.num_partitions
        return self._num_partitions

    def _log(self, partition: int) -> CoordinatorLog[dict[str, TransactionMetadata]]:
        if partition not in self._logs:
            log = open_internal_partition(self.root, TRANSACTION_STATE_LOG, partition, self._requested_partitions, self._clock)
            self._logs[partition] = CoordinatorLog(
                log,
                {},
                TransactionMetadata.from_row,
                txn.replay,
                lambda record: record.transactional_id,
                codec=StateCodec(txn.snapshot_of, txn.state_from_snapshot),
                retry=self.retry,
            )
        return self._logs[partition]

    def _partition(self, topic: str, partition: int) -> PartitionLog:
        """A topic partition to write markers to; handles are kept (a marker decides on the latest snapshot anyway)."""
        if self._partition_logs is not None:
            lent = self._partition_logs(topic, partition)
            if lent is not None:
                return lent
        internal = topic.startswith("__")  # __consumer_offsets: offsets sent to the transaction (S7.1)
        key = (topic, partition)
        if key not in self._partitions:
            self._partitions[key] = (
                open_internal_partition(self.root, topic, partition, self._offsets_partitions, self._clock)
                if internal
                else open_partition(self.root, topic, partition, self._clock)
            )
        return self._partitions[key]

    def _hit(self, point: str, **details: Any) -> None:
        if self._fault is not None:
            self._fault(point, details)


__all__ = ["SweepReport", "TransactionCoordinator", "TRANSACTION_STATE_LOG"]


def log_transition(record: TransactionMetadata) -> None:
    """One INFO line for a committed `__transaction_state` record: the id's new state and what it means."""
    state, tid = record.state, record.transactional_id
    identity = f"producer id {record.producer_id} epoch {record.producer_epoch}"
    if state is TxnState.EMPTY:
        logger.info("transactional.id %r: initialised, %s; every instance at an earlier epoch is fenced (S4.1)", tid, identity)
    elif state is TxnState.PREPARE_EPOCH_FENCE:
        logger.info("transactional.id %r: fencing %s and aborting its ongoing transaction (S4.2)", tid, identity)
    elif state is TxnState.ONGOING:
        logger.info("transactional.id %r: Ongoing, %s, %d partition(s)", tid, identity, len(record.partitions))
    elif state is TxnState.DEAD:
        logger.info("transactional.id %r: expired (Dead)", tid)
    else:
        logger.info("transactional.id %r: %s, %s, %d partition(s)", tid, state.value, identity, len(record.partitions))
