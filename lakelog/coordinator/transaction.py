"""The transaction coordinator of one transactional.id, as a pure state machine (S4).

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
import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from lakelog.coordinator.record_codec import VERSION_FIELD, RecordCodec
from lakelog.errors import (
    ConcurrentTransactions,
    CorruptRecord,
    InvalidProducerIdMapping,
    InvalidRequest,
    InvalidTransactionTimeout,
    InvalidTxnState,
    KafkaException,
    ProducerFenced,
)
from lakelog.log.records import MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ControlType

logger = logging.getLogger(__name__)

NO_TIMESTAMP = -1
TopicPartitionKey = tuple[str, int]

R = TypeVar("R")


class TxnState(enum.Enum):
    """A coordinator state (S4.3); the value is Kafka's name, as DescribeTransactions shows it."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"

    @property
    def legal_previous(self) -> frozenset[TxnState]:
        """The states this one may follow; `can_follow(None)` says whether it may start an id."""
        return _LEGAL_PREVIOUS[self]

    def can_follow(self, previous: TxnState | None) -> bool:
        if previous is None:
            return self is TxnState.EMPTY
        return previous in self.legal_previous

    @property
    def is_prepared(self) -> bool:
        """A decided end whose markers may not all be written yet (S4.5)."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_idle(self) -> bool:
        """No transaction is open (EMPTY, COMPLETE_*): the id may start one, or expire."""
        return self in _IDLE


_IDLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

# Kafka's table (TransactionState.java) less TV2's aborts of an empty transaction,
# which lakelog answers without a record. PREPARE_EPOCH_FENCE keeps Kafka's entries
# but is never written here: fencing goes straight to PREPARE_ABORT.
_LEGAL_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: _IDLE,
    TxnState.ONGOING: _IDLE | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
    TxnState.DEAD: _IDLE,
}

_CONTROL_OF = {
    TxnState.PREPARE_COMMIT: ControlType.COMMIT,
    TxnState.PREPARE_ABORT: ControlType.ABORT,
    TxnState.COMPLETE_COMMIT: ControlType.COMMIT,
    TxnState.COMPLETE_ABORT: ControlType.ABORT,
}

# Column name -> Arrow type name of a `__transaction_state` row (what `to_row` yields).
ROW_TYPES: dict[str, str] = {
    "transactional_id": "string",
    "producer_id": "int64",
    "previous_producer_id": "int64",
    "next_producer_id": "int64",
    "producer_epoch": "int16",
    "last_producer_epoch": "int16",
    "transaction_timeout_ms": "int32",
    "state": "string",
    "partitions": "list<string>",
    "txn_start_ms": "int64",
    "txn_last_update_ms": "int64",
    VERSION_FIELD: "int32",
}
# The version of the rows `to_row` writes; `from_row` reads every one up to it (lakelog.coordinator.record_codec).
TRANSACTION_RECORD: RecordCodec[Any] = RecordCodec("__transaction_state", version=1)


@dataclass(frozen=True)
class TransactionConfig:
    """The broker keys the coordinator decides with (S4.7, S8.2)."""

    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int

    @classmethod
    def from_broker_config(cls, config: Mapping[str, Any]) -> TransactionConfig:
        """From a loaded `broker` config: `TransactionConfig.from_broker_config(lakelog.config.load("broker"))`."""
        return cls(
            transaction_max_timeout_ms=config["transaction.max.timeout.ms"],
            transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
        )


@dataclass(frozen=True)
class TransactionMetadata:
    """The coordinator's state of one transactional.id; also one `__transaction_state` record.

    `last_producer_epoch` is the client's epoch before the last bump it asked for
    (an end of transaction), so a retry is recognised; -1 after init or fencing.
    `previous_producer_id` is the producer id before the last rotation (-1 if none);
    `next_producer_id` is the id a PREPARE_* record rotates to at completion (-1 if none).
    """

    transactional_id: str
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartitionKey]
    txn_start_ms: int
    txn_last_update_ms: int
    next_producer_id: int = NO_PRODUCER_ID

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, frozenset):
            object.__setattr__(self, "partitions", frozenset(self.partitions))

    def to_row(self) -> dict[str, Any]:
        """This record as a flat dict of plain values; partitions as sorted "topic:partition" strings."""
        return TRANSACTION_RECORD.stamp(
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "previous_producer_id": self.previous_producer_id,
                "next_producer_id": self.next_producer_id,
                "producer_epoch": self.producer_epoch,
                "last_producer_epoch": self.last_producer_epoch,
                "transaction_timeout_ms": self.transaction_timeout_ms,
                "state": self.state.value,
                "partitions": [f"{topic}:{partition}" for topic, partition in sorted(self.partitions)],
                "txn_start_ms": self.txn_start_ms,
                "txn_last_update_ms": self.txn_last_update_ms,
            }
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TransactionMetadata:
        """The record `to_row` wrote (any version up to ours); raises CorruptRecord if the row is not one."""
        TRANSACTION_RECORD.version_of(row)
        try:
            integers = {
                name: _plain_int(row[name])
                for name in (
                    "producer_id",
                    "previous_producer_id",
                    "next_producer_id",
                    "producer_epoch",
                    "last_producer_epoch",
                    "transaction_timeout_ms",
                    "txn_start_ms",
                    "txn_last_update_ms",
                )
            }
            transactional_id = row["transactional_id"]
            if not isinstance(transactional_id, str) or not transactional_id:
                raise ValueError(f"transactional_id {transactional_id!r} is not a non-empty string")
            return cls(
                transactional_id=transactional_id,
                state=TxnState(row["state"]),
                partitions=frozenset(_parse_partition(text) for text in _as_list(row["partitions"])),
                **integers,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptRecord(f"not a __transaction_state row: {error}", row=dict(row)) from error


def _plain_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer")
    if not isinstance(value, int):
        # numpy / Arrow scalars arrive as ints with __index__; floats and strings do not.
        if not hasattr(value, "__index__"):
            raise TypeError(f"{value!r} is not an integer")
        value = value.__index__()
    return int(value)


def _as_list(value: Any) -> list[Any]:
    # Arrow gives a list or None, pandas a numpy array: no truthiness test on those.
    return [] if value is None else list(value)


def _parse_partition(text: str) -> TopicPartitionKey:
    if isinstance(text, Mapping):
        return _partition_key(text["topic"], text["partition"])
    topic, separator, partition = str(text).rpartition(":")
    if not separator or not topic:
        raise ValueError(f"partition {text!r} is not 'topic:partition'")
    return _partition_key(topic, int(partition))


def _partition_key(topic: Any, partition: Any) -> TopicPartitionKey:
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic {topic!r} is not a non-empty string")
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise ValueError(f"partition {partition!r} of topic {topic!r} is not a non-negative integer")
    return topic, partition


@dataclass(frozen=True)
class InitProducerIdResult:
    """The identity the producer uses from now on (S4.1)."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class AddPartitionsResult:
    """Every partition now in the ongoing transaction (S4.4)."""

    partitions: frozenset[TopicPartitionKey]


@dataclass(frozen=True)
class EndTransactionResult:
    """The decided result, and the identity the producer uses for its next transaction (S4.6)."""

    result: ControlType
    producer_id: int
    producer_epoch: int


class SweepAction(enum.Enum):
    """What `sweep` found for one id."""

    NONE = "none"
    ABORT_TIMED_OUT = "abort_timed_out"
    EXPIRE = "expire"
    # A decided end whose markers the caller must write, then complete_transaction.
    ROLL_FORWARD = "roll_forward"


@dataclass(frozen=True)
class TransactionMarkers:
    """The control rows to append, one per partition, to finish a PREPARE_* transaction (S4.5)."""

    transactional_id: str
    control: ControlType
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartitionKey, ...]


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """Records to append (in order, in one commit), then the response or the error to return."""

    records: tuple[TransactionMetadata, ...] = ()
    response: R | None = None
    error: KafkaException | None = None
    # Nothing decided yet: the request goes through only with a newly allocated producer id, which the caller
    # allocates once this answer holds on the latest state, then asks again with it (S8.3: no id for a refusal).
    needs_producer_id: bool = False

    def __post_init__(self) -> None:
        if self.response is not None and self.error is not None:
            raise ValueError("an outcome has a response or an error, not both")
        if self.needs_producer_id and (self.records or self.response is not None or self.error is not None):
            raise ValueError("an outcome that needs a producer id decides nothing else")

    @property
    def ok(self) -> bool:
        return self.error is None

    def state_after(self, current: TransactionMetadata | None) -> TransactionMetadata | None:
        """The id's metadata once `records` are appended (None if it became DEAD)."""
        if not self.records:
            return current
        last = self.records[-1]
        return None if last.state is TxnState.DEAD else last


_NEEDS_PRODUCER_ID: Outcome[Any] = Outcome(needs_producer_id=True)


def replay(state_by_id: dict[str, TransactionMetadata], record: TransactionMetadata) -> dict[str, TransactionMetadata]:
    """Apply one record to `state_by_id` in place and return it: last record wins, DEAD removes the id."""
    if record.state is TxnState.DEAD:
        state_by_id.pop(record.transactional_id, None)
    else:
        state_by_id[record.transactional_id] = record
    return state_by_id


def snapshot_of(state_by_id: Mapping[str, TransactionMetadata]) -> list[dict[str, Any]]:
    """The state as JSON-able rows: the last record of every live id (what compaction would keep)."""
    return [state_by_id[transactional_id].to_row() for transactional_id in sorted(state_by_id)]


def state_from_snapshot(rows: list[Mapping[str, Any]]) -> dict[str, TransactionMetadata]:
    """The state `snapshot_of` dumped; CorruptRecord if a row is not a record."""
    state: dict[str, TransactionMetadata] = {}
    for row in rows:
        replay(state, TransactionMetadata.from_row(row))
    return state


def partition_for_transactional_id(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state/<n>` of an id: Kafka's `Utils.abs(id.hashCode) % n`."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, not {num_partitions}")
    return _java_abs(java_string_hash(transactional_id)) % num_partitions


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()`: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    data = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(data), 2):
        value = (31 * value + (data[index] << 8 | data[index + 1])) & 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def _java_abs(value: int) -> int:
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return 0 if value == -(2**31) else abs(value)


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No further client epoch is left: MAX_EPOCH stays free so a holder can always be fenced."""
    return producer_epoch >= MAX_EPOCH - 1


def markers_for(metadata: TransactionMetadata | None) -> TransactionMarkers | None:
    """The markers a PREPARE_* state still needs written (S4.5); None for any other state."""
    if metadata is None or not metadata.state.is_prepared:
        return None
    return TransactionMarkers(
        transactional_id=metadata.transactional_id,
        control=_CONTROL_OF[metadata.state],
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        partitions=tuple(sorted(metadata.partitions)),
    )


# -- handlers ---------------------------------------------------------------------


def init_producer_id(
    current: TransactionMetadata | None,
    transactional_id: str,
    transaction_timeout_ms: int,
    new_producer_id: int | None,
    now_ms: int,
    config: TransactionConfig,
) -> Outcome[InitProducerIdResult]:
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
) -> Outcome[AddPartitionsResult]:
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
) -> Outcome[AddPartitionsResult]:
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
) -> Outcome[EndTransactionResult]:
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
        decided = _CONTROL_OF[state]
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
) -> Outcome[TransactionMetadata]:
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
) -> Outcome[SweepAction]:
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
