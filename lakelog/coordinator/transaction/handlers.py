"""The transaction coordinator of one transactional.id, as pure handlers (S4).

Modelled on Kafka's `TransactionMetadata` / `TransactionCoordinator` with
transactions version 2 (KIP-890 part 2). A handler takes the current metadata of
one id (or None) and a request, and returns an `Outcome`: the records to append
to `__transaction_state` and either the response or the error (never raised).
Handlers do no I/O and read no clock. The caller loads `current` from a snapshot,
appends `outcome.records` (if any) in one commit decided on that snapshot, and
only then answers with `outcome.response` or `outcome.error`. A refused request
has no records (S8.3), except `init_producer_id` meeting an ongoing transaction,
whose fencing record must be appended before its retriable error is returned.

A record IS the full metadata after a transition, as Kafka's TransactionLogValue:
`replay` folds them (the last record of an id wins, DEAD removes the id).

Epochs, in one place:

- `init_producer_id` on EMPTY/COMPLETE_* bumps the epoch (S4.1), or moves to a new
  producer id at epoch 0 once the epoch is exhausted (>= MAX_EPOCH - 1).
- Every end of a transaction bumps the epoch when it is decided (S4.6): the
  PREPARE_* record carries epoch + 1 and `last_producer_epoch` = the client's
  epoch (so a retry of the same end is recognised); the markers carry epoch + 1,
  so the partition fences the transaction's epoch; COMPLETE_* keeps it; the client
  goes on with epoch + 1, returned by `end_transaction`. If the client's epoch is
  exhausted, the PREPARE_* record names `next_producer_id` and COMPLETE_* moves to
  it at epoch 0 (the markers still carry the old producer id and MAX_EPOCH).
- Fencing (init over an ongoing transaction, S4.2; the timeout sweep, S4.7) writes
  PREPARE_ABORT at epoch + 1 with `last_producer_epoch` = -1, so the fenced holder
  matches neither the current nor a retry epoch.
- Clients never hold an epoch above MAX_EPOCH - 1; only markers may use MAX_EPOCH.

Markers carry the bumped epoch, not the epoch of the transaction's data: whoever
matches a marker to its open transaction in a partition must match on producer id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, TypeVar

from lakelog.coordinator.runtime.outcome import Outcome
from lakelog.coordinator.transaction.metadata import TransactionMetadata, _partition_key
from lakelog.coordinator.transaction.results import (
    AddPartitionsResult,
    EndTransactionResult,
    InitProducerIdResult,
    SweepAction,
    TransactionMarkers,
    markers_for,
)
from lakelog.coordinator.transaction.state import CONTROL_OF, NO_TIMESTAMP, TransactionConfig, TxnState, is_epoch_exhausted
from lakelog.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidRequest,
    InvalidTransactionTimeout,
    InvalidTxnState,
    KafkaException,
    ProducerFenced,
)
from lakelog.log.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ControlType
from lakelog.typedef import TopicPartitionKey

R = TypeVar("R")
# A transaction handler's answer: `__transaction_state` records, then a response or an error.
TxnOutcome = Outcome[TransactionMetadata, R]

_NEEDS_PRODUCER_ID: TxnOutcome[Any] = Outcome(needs_producer_id=True)

# -- handlers ---------------------------------------------------------------------


def init_producer_id(
    current: TransactionMetadata | None,
    transactional_id: str,
    transaction_timeout_ms: int,
    new_producer_id: int | None,
    now_ms: int,
    config: TransactionConfig,
) -> TxnOutcome[InitProducerIdResult]:
    """InitProducerId (S4.1, S4.2): map the id to a producer id and bump the epoch, fencing earlier holders.

    An id that is new or whose epoch is exhausted moves to `new_producer_id`: without
    one the answer is `needs_producer_id` (nothing decided). Over an ongoing
    transaction: one PREPARE_ABORT record (epoch bumped, the holder fenced) and
    ConcurrentTransactions; the caller writes the markers, completes, and retries.
    Over PREPARE_*: ConcurrentTransactions, no record.
    """
    request_error = _check_transactional_id(transactional_id, current)
    if request_error is not None:
        return Outcome(error=request_error)
    timeout_error = check_transaction_timeout(transaction_timeout_ms, config)
    if timeout_error is not None:
        return Outcome(error=timeout_error)
    if current is None or current.state is TxnState.DEAD:
        if new_producer_id is None:
            return _NEEDS_PRODUCER_ID
        record = TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=_check_new_producer_id(new_producer_id, transactional_id),
            previous_producer_id=NO_PRODUCER_ID,
            producer_epoch=0,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            transaction_timeout_ms=transaction_timeout_ms,
            state=TxnState.EMPTY,
            partitions=frozenset(),
            txn_start_ms=NO_TIMESTAMP,
            txn_last_update_ms=now_ms,
        )
        return Outcome((record,), InitProducerIdResult(record.producer_id, record.producer_epoch))
    state = current.state
    if state.is_idle:
        if is_epoch_exhausted(current.producer_epoch):
            if new_producer_id is None:
                return _NEEDS_PRODUCER_ID
            identity = {
                "producer_id": _check_new_producer_id(new_producer_id, transactional_id),
                "previous_producer_id": current.producer_id,
                "producer_epoch": 0,
            }
        else:
            identity = {"producer_epoch": current.producer_epoch + 1}
        record = _transition(
            current,
            TxnState.EMPTY,
            now_ms,
            **identity,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            transaction_timeout_ms=transaction_timeout_ms,
            partitions=frozenset(),
            txn_start_ms=NO_TIMESTAMP,
        )
        return Outcome((record,), InitProducerIdResult(record.producer_id, record.producer_epoch))
    if state is TxnState.ONGOING:
        fence = _fence(current, now_ms)
        return Outcome(
            (fence,),
            error=ConcurrentTransactions(
                f"transactional.id {transactional_id!r} had an ongoing transaction; it is being aborted, retry",
                state=fence.state.value,
            ),
        )
    if state.is_prepared:
        return Outcome(error=_concurrent(current))
    return Outcome(error=_unexpected_state(current))


def check_transaction_timeout(transaction_timeout_ms: Any, config: TransactionConfig) -> InvalidTransactionTimeout | None:
    """S4.7: a transaction timeout is positive and at most transaction.max.timeout.ms."""
    if (
        isinstance(transaction_timeout_ms, bool)
        or not isinstance(transaction_timeout_ms, int)
        or not 0 < transaction_timeout_ms <= config.transaction_max_timeout_ms
    ):
        return InvalidTransactionTimeout(
            f"transaction.timeout.ms={transaction_timeout_ms!r} must be in [1, "
            f"{config.transaction_max_timeout_ms}] (transaction.max.timeout.ms)",
            transaction_timeout_ms=transaction_timeout_ms,
        )
    return None


def add_partitions(
    current: TransactionMetadata | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartitionKey],
    now_ms: int,
    markers_written: TransactionMarkers | None = None,
) -> TxnOutcome[AddPartitionsResult]:
    """AddPartitionsToTxn (S4.4): start the transaction (EMPTY/COMPLETE_* -> ONGOING) or widen it.

    No record when every partition is already in the ongoing transaction. Errors:
    InvalidProducerIdMapping (unknown id or producer id), ProducerFenced (any other
    epoch, S4.1), ConcurrentTransactions (an end is being completed).

    `markers_written`: the markers the caller knows are in every partition (it wrote
    them). If they are all `markers_for(current)` needs, the decided end is
    completed and the next transaction started in one commit: COMPLETE_* then
    ONGOING (S4.5; the holder of the next identity then waits for no completion).
    """
    request_error = _check_transactional_id(transactional_id, current)
    if request_error is not None:
        return Outcome(error=request_error)
    try:
        added = frozenset(_partition_key(topic, partition) for topic, partition in partitions)
    except (TypeError, ValueError) as error:
        return Outcome(error=InvalidRequest(f"bad partitions for transactional.id {transactional_id!r}: {error}"))
    if not added:
        return Outcome(error=InvalidRequest("add_partitions needs at least one partition"))
    if current is None or current.state is TxnState.DEAD:
        return Outcome(error=_unknown_id(transactional_id, producer_id))
    if markers_written is not None and markers_for(current) == markers_written:
        completed = complete_transaction(current, markers_written, now_ms)
        started = add_partitions(completed.response, transactional_id, producer_id, producer_epoch, added, now_ms)
        if not started.ok:
            return Outcome(error=started.error)  # refused: not even the completion is written (S8.3)
        return Outcome(completed.records + started.records, started.response)
    if current.state.is_prepared and _is_next_identity(current, producer_id, producer_epoch):
        return Outcome(error=_concurrent(current))
    identity_error = _check_current_identity(current, producer_id, producer_epoch)
    if identity_error is not None:
        return Outcome(error=identity_error)
    state = current.state
    if state.is_prepared:
        return Outcome(error=_concurrent(current))
    if state is TxnState.ONGOING:
        if added <= current.partitions:
            return Outcome(response=AddPartitionsResult(current.partitions))
        record = _transition(current, TxnState.ONGOING, now_ms, partitions=current.partitions | added)
        return Outcome((record,), AddPartitionsResult(record.partitions))
    if state.is_idle:
        record = _transition(current, TxnState.ONGOING, now_ms, partitions=added, txn_start_ms=now_ms)
        return Outcome((record,), AddPartitionsResult(record.partitions))
    return Outcome(error=_unexpected_state(current))


def verify_partitions(
    current: TransactionMetadata | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartitionKey],
) -> TxnOutcome[AddPartitionsResult]:
    """KIP-890 verification for a transactional write (S4.4); never has records.

    Succeeds only if the producer is the current holder and every partition is in
    its ongoing transaction; otherwise InvalidTxnState (carrying `partitions`, those
    missing), or the identity errors of `add_partitions`.
    """
    request_error = _check_transactional_id(transactional_id, current)
    if request_error is not None:
        return Outcome(error=request_error)
    try:
        wanted = frozenset(_partition_key(topic, partition) for topic, partition in partitions)
    except (TypeError, ValueError) as error:
        return Outcome(error=InvalidRequest(f"bad partitions for transactional.id {transactional_id!r}: {error}"))
    if current is None or current.state is TxnState.DEAD:
        return Outcome(error=_unknown_id(transactional_id, producer_id))
    if current.state.is_prepared and _is_next_identity(current, producer_id, producer_epoch):
        return Outcome(error=_concurrent(current))
    identity_error = _check_current_identity(current, producer_id, producer_epoch)
    if identity_error is not None:
        return Outcome(error=identity_error)
    if current.state.is_prepared:
        return Outcome(error=_concurrent(current))
    missing = wanted if current.state is not TxnState.ONGOING else wanted - current.partitions
    if missing:
        return Outcome(
            error=InvalidTxnState(
                f"transactional.id {transactional_id!r} ({current.state.value}) has not added "
                f"{sorted(missing)} to its transaction",
                partitions=sorted(missing),
            )
        )
    return Outcome(response=AddPartitionsResult(current.partitions))


def end_transaction(
    current: TransactionMetadata | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
    new_producer_id: int | None = None,
) -> TxnOutcome[EndTransactionResult]:
    """EndTxn (S4.5, S4.6): decide commit or abort with one PREPARE_* record, bumping the epoch.

    Idempotent: a retry (the epoch the decided end was sent with) of the same result
    while PREPARE_*/COMPLETE_* is answered as the first time, with no record; the
    other result is InvalidTxnState. Abort with the current epoch while no
    transaction is open (EMPTY/COMPLETE_*) succeeds with no record; commit there is
    InvalidTxnState. With the current epoch while PREPARE_*: ConcurrentTransactions.
    An end at the exhausted epoch moves to `new_producer_id`: without one the answer
    is `needs_producer_id` (nothing decided); every refusal is decided before that.
    """
    request_error = _check_transactional_id(transactional_id, current)
    if request_error is not None:
        return Outcome(error=request_error)
    if not isinstance(commit, bool):
        return Outcome(error=InvalidRequest(f"commit must be a bool, not {commit!r}"))
    wanted = ControlType.COMMIT if commit else ControlType.ABORT
    if current is None or current.state is TxnState.DEAD:
        return Outcome(error=_unknown_id(transactional_id, producer_id))
    state = current.state
    if state is TxnState.PREPARE_EPOCH_FENCE:
        return Outcome(error=_unexpected_state(current))
    if _is_retry_of_end(current, producer_id, producer_epoch):
        decided = CONTROL_OF[state]
        if decided is not wanted:
            return Outcome(error=_wrong_result(current, wanted))
        return Outcome(response=EndTransactionResult(decided, *_next_identity(current)))
    if state.is_prepared and _is_next_identity(current, producer_id, producer_epoch):
        return Outcome(error=_concurrent(current))
    identity_error = _check_current_identity(current, producer_id, producer_epoch)
    if identity_error is not None:
        return Outcome(error=identity_error)
    if state is TxnState.ONGOING:
        next_producer_id = NO_PRODUCER_ID
        if is_epoch_exhausted(current.producer_epoch):
            if new_producer_id is None:
                return _NEEDS_PRODUCER_ID
            next_producer_id = _check_new_producer_id(new_producer_id, transactional_id)
        record = _transition(
            current,
            TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
            now_ms,
            producer_epoch=current.producer_epoch + 1,
            last_producer_epoch=current.producer_epoch,
            next_producer_id=next_producer_id,
        )
        return Outcome((record,), EndTransactionResult(wanted, *_next_identity(record)))
    if state.is_prepared:
        return Outcome(error=_concurrent(current))
    if state.is_idle and not commit:
        return Outcome(response=EndTransactionResult(wanted, current.producer_id, current.producer_epoch))
    return Outcome(error=_wrong_result(current, wanted))


def complete_transaction(
    current: TransactionMetadata | None,
    markers: TransactionMarkers,
    now_ms: int,
) -> TxnOutcome[TransactionMetadata]:
    """Record COMPLETE_* once `markers` (from `markers_for`) are written to every partition (S4.5).

    Partitions are cleared; a pending producer id rotation takes effect (epoch 0).
    If `current` is no longer the PREPARE_* those markers close, someone else
    completed it: success with no record. The response is the metadata after.
    """
    if current is None or markers_for(current) != markers:
        return Outcome(response=current)
    rotation: dict[str, int] = {}
    if current.next_producer_id != NO_PRODUCER_ID:
        rotation = {
            "producer_id": current.next_producer_id,
            "previous_producer_id": current.producer_id,
            "producer_epoch": 0,
            "next_producer_id": NO_PRODUCER_ID,
        }
    complete = TxnState.COMPLETE_COMMIT if current.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    record = _transition(current, complete, now_ms, partitions=frozenset(), **rotation)
    return Outcome((record,), record)


def sweep(
    current: TransactionMetadata | None,
    now_ms: int,
    config: TransactionConfig,
) -> TxnOutcome[SweepAction]:
    """The coordinator sweep for one id (S4.7, S8.2); idempotent.

    ONGOING past its transaction timeout: PREPARE_ABORT with an epoch bump (the
    holder is fenced); the caller then writes the markers and completes. EMPTY /
    COMPLETE_* idle past transactional.id.expiration.ms: DEAD. PREPARE_*: no
    record, ROLL_FORWARD (the caller writes `markers_for` and completes).
    """
    if current is None or current.state is TxnState.DEAD:
        return Outcome(response=SweepAction.NONE)
    state = current.state
    if state is TxnState.ONGOING and current.txn_start_ms + current.transaction_timeout_ms < now_ms:
        return Outcome((_fence(current, now_ms),), SweepAction.ABORT_TIMED_OUT)
    if state.is_idle and current.txn_last_update_ms + config.transactional_id_expiration_ms <= now_ms:
        record = _transition(current, TxnState.DEAD, now_ms, partitions=frozenset())
        return Outcome((record,), SweepAction.EXPIRE)
    if state.is_prepared:
        return Outcome(response=SweepAction.ROLL_FORWARD)
    return Outcome(response=SweepAction.NONE)


# -- helpers ----------------------------------------------------------------------


def _transition(current: TransactionMetadata, state: TxnState, now_ms: int, **changes: Any) -> TransactionMetadata:
    """The record of a legal transition; an illegal one is a bug here, so it raises."""
    if not state.can_follow(current.state):
        raise InvalidTxnState(f"illegal transition {current.state.value} -> {state.value} for {current.transactional_id!r}")
    # Timestamps of one id never go back, even if processes' clocks disagree.
    return dataclasses.replace(current, state=state, txn_last_update_ms=max(now_ms, current.txn_last_update_ms), **changes)


def _fence(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Abort the ongoing transaction with an epoch bump that no client holds (S4.2, S4.7)."""
    return _transition(
        current,
        TxnState.PREPARE_ABORT,
        now_ms,
        producer_epoch=current.producer_epoch + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )


def _is_retry_of_end(current: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """The request carries the identity the decided end of `current` was sent with."""
    if current.last_producer_epoch < 0 or producer_epoch != current.last_producer_epoch:
        return False
    if current.state.is_prepared:
        return producer_id == current.producer_id and current.producer_epoch == producer_epoch + 1
    if current.state.is_complete:
        if producer_id == current.producer_id:
            return current.producer_epoch == producer_epoch + 1
        # The end rotated the producer id (epoch overflow); the retry names the old one.
        return producer_id == current.previous_producer_id and current.producer_epoch == 0
    return False


def _next_identity(metadata: TransactionMetadata) -> tuple[int, int]:
    """The (producer id, epoch) a client holds once this decided end is answered."""
    if metadata.next_producer_id != NO_PRODUCER_ID:
        return metadata.next_producer_id, 0
    return metadata.producer_id, metadata.producer_epoch


def _is_next_identity(current: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    return current.next_producer_id != NO_PRODUCER_ID and (producer_id, producer_epoch) == (current.next_producer_id, 0)


def _check_current_identity(current: TransactionMetadata, producer_id: int, producer_epoch: int) -> KafkaException | None:
    if producer_id == current.producer_id and producer_epoch == current.producer_epoch:
        return None
    known = {current.producer_id, current.previous_producer_id, current.next_producer_id} - {NO_PRODUCER_ID}
    if producer_id in known:
        return ProducerFenced(
            f"producer ({producer_id}, epoch {producer_epoch}) of transactional.id {current.transactional_id!r} "
            f"is fenced: the current producer is ({current.producer_id}, epoch {current.producer_epoch})",
            producer_id=current.producer_id,
            producer_epoch=current.producer_epoch,
        )
    return InvalidProducerIdMapping(
        f"producer id {producer_id} is not mapped to transactional.id {current.transactional_id!r}",
        producer_id=producer_id,
    )


def _check_transactional_id(transactional_id: Any, current: TransactionMetadata | None) -> KafkaException | None:
    if not isinstance(transactional_id, str) or not transactional_id:
        return InvalidRequest(f"transactional.id must be a non-empty string, not {transactional_id!r}")
    if current is not None and current.transactional_id != transactional_id:
        raise ValueError(f"metadata of {current.transactional_id!r} passed for {transactional_id!r}")
    return None


def _check_new_producer_id(new_producer_id: int, transactional_id: str) -> int:
    if not isinstance(new_producer_id, int) or isinstance(new_producer_id, bool) or new_producer_id < 0:
        raise ValueError(f"transactional.id {transactional_id!r} needs a newly allocated producer id, got {new_producer_id!r}")
    return new_producer_id


def _unknown_id(transactional_id: str, producer_id: int) -> InvalidProducerIdMapping:
    return InvalidProducerIdMapping(
        f"transactional.id {transactional_id!r} has no producer id (never initialised, or expired)",
        producer_id=producer_id,
    )


def _concurrent(current: TransactionMetadata) -> ConcurrentTransactions:
    return ConcurrentTransactions(
        f"transactional.id {current.transactional_id!r} is completing its last transaction ({current.state.value}); retry",
        state=current.state.value,
    )


def _wrong_result(current: TransactionMetadata, wanted: ControlType) -> InvalidTxnState:
    return InvalidTxnState(
        f"cannot {wanted.value.lower()} transactional.id {current.transactional_id!r} in state {current.state.value}",
        state=current.state.value,
    )


def _unexpected_state(current: TransactionMetadata) -> InvalidTxnState:
    return InvalidTxnState(
        f"transactional.id {current.transactional_id!r} is in state {current.state.value}, which no request may meet",
        state=current.state.value,
    )
