"""Errors named after Kafka's error codes, shaped like confluent-kafka-python.

`KafkaError` is the value object (`code() name() str() retriable() fatal()
txn_requires_abort()`); `KafkaException` carries one as `args[0]`. Each protocol
error is a subclass of `KafkaException` named after its Kafka error code, so
callers can `except OffsetMismatch as e: e.log_end_offset` or, ported from
confluent-kafka, `except KafkaException as e: e.args[0].code()`.

Classes follow KIP-1050's taxonomy: `retriable` (try the same call again),
`abortable` (abort the transaction, then carry on) or `fatal` (close the client).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

logger = logging.getLogger(__name__)


class KafkaError:
    """An error code with its message, as confluent-kafka's `KafkaError`."""

    # librdkafka's internal codes (negative) and Kafka's protocol codes, by name.
    _PARTITION_EOF = -191
    _TIMED_OUT = -185
    _STATE = -172
    _INVALID_ARG = -186
    _FATAL = -150
    _PURGE_QUEUE = -152
    _NOT_CONFIGURED = -145
    _NO_OFFSET = -168
    _UNKNOWN_PARTITION = -190
    _UNKNOWN_TOPIC = -188
    _VALUE_SERIALIZATION = -161
    # A position fell outside the log and auto.offset.reset=error (S9.1), delivered as a message's error.
    _AUTO_OFFSET_RESET = -140
    NO_ERROR = 0
    UNKNOWN = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PART = 3
    MSG_SIZE_TOO_LARGE = 10
    TOPIC_EXCEPTION = 17
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_INSTANCE_ID = 82
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    FENCED_MEMBER_EPOCH = 110
    STALE_MEMBER_EPOCH = 113
    TRANSACTION_ABORTABLE = 120
    # KIP-27 names no protocol code; lakelog takes one outside Kafka's range.
    OFFSET_MISMATCH = 1000

    _NAMES: ClassVar[dict[int, str]] = {}

    def __init__(
        self,
        code: int,
        reason: str | None = None,
        *,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        self._code = code
        self._reason = reason or self.name()
        self._fatal = fatal
        self._retriable = retriable
        self._txn_requires_abort = txn_requires_abort

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return KafkaError._NAMES.get(self._code, f"ERR_{self._code}")

    def str(self) -> str:
        return self._reason

    def fatal(self) -> bool:
        return self._fatal

    def retriable(self) -> bool:
        return self._retriable

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int):
            return self._code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> str:
        return f"KafkaError{{code={self.name()},val={self._code},str=\"{self._reason}\"}}"

    __repr__ = __str__


KafkaError._NAMES = {
    value: name for name, value in vars(KafkaError).items() if isinstance(value, int) and name.lstrip("_").isupper()
}


class KafkaException(Exception):
    """An exception carrying a `KafkaError` as `args[0]`, as in confluent-kafka."""

    code: ClassVar[int] = KafkaError.UNKNOWN
    retriable: ClassVar[bool] = False
    abortable: ClassVar[bool] = False
    fatal: ClassVar[bool] = False

    def __init__(self, message: str | KafkaError, **details: Any) -> None:
        if isinstance(message, KafkaError):
            error = message
        else:
            error = KafkaError(
                self.code,
                message,
                fatal=self.fatal,
                retriable=self.retriable,
                txn_requires_abort=self.abortable,
            )
        super().__init__(error)
        self.details = details
        for key, value in details.items():
            setattr(self, key, value)

    @property
    def error(self) -> KafkaError:
        return self.args[0]

    def __str__(self) -> str:
        return self.args[0].str()


class RetriableError(KafkaException):
    """The same request may succeed if sent again."""

    retriable = True


class AbortableError(KafkaException):
    """The current transaction must be aborted; the client stays usable."""

    abortable = True


class FatalError(KafkaException):
    """The client cannot go on; close it and start a new one."""

    fatal = True


class PurgeQueue(RetriableError):
    """Work still pending was dropped because the client was told to stop (librdkafka's _PURGE_QUEUE)."""

    code = KafkaError._PURGE_QUEUE


class InvalidRequest(KafkaException):
    """The request itself is malformed; nothing was done."""

    code = KafkaError.INVALID_REQUEST


class InvalidConfig(InvalidRequest):
    code = KafkaError.INVALID_CONFIG


class InvalidTopic(InvalidRequest):
    code = KafkaError.TOPIC_EXCEPTION


class InvalidPartitions(InvalidRequest):
    code = KafkaError.INVALID_PARTITIONS


class PolicyViolation(InvalidRequest):
    """A write broke a policy (a quality suite in enforce mode, S11.1; a topic's rules): abortable, as the
    transaction that staged it cannot commit."""

    code = KafkaError.POLICY_VIOLATION
    abortable = True


class TopicAlreadyExists(KafkaException):
    code = KafkaError.TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartition(KafkaException):
    code = KafkaError.UNKNOWN_TOPIC_OR_PART


class OffsetOutOfRange(KafkaException):
    """A fetch asked for an offset outside [log start offset, log end offset] (S1.4)."""

    code = KafkaError.OFFSET_OUT_OF_RANGE


class CorruptRecord(KafkaException):
    """A data file of a partition is missing or unreadable."""

    code = KafkaError.CORRUPT_MESSAGE


class OffsetMismatch(KafkaException):
    """The batch's expected offset is not the log end offset (S2.1); carries `log_end_offset`."""

    code = KafkaError.OFFSET_MISMATCH


class OutOfOrderSequence(KafkaException):
    """A batch's sequence does not follow the last one of its producer (S3.3)."""

    code = KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER


class UnknownProducerId(KafkaException):
    """The partition has no state for this producer id (new or expired) and the batch does not start at 0."""

    code = KafkaError.UNKNOWN_PRODUCER_ID


class InvalidProducerEpoch(KafkaException):
    """The batch's producer epoch is older than the partition last saw (S3.4)."""

    code = KafkaError.INVALID_PRODUCER_EPOCH


class ProducerFenced(FatalError):
    """A newer instance with the same transactional.id has taken over (S4.1)."""

    code = KafkaError.PRODUCER_FENCED


class ConcurrentTransactions(RetriableError):
    code = KafkaError.CONCURRENT_TRANSACTIONS


class InvalidTxnState(KafkaException):
    code = KafkaError.INVALID_TXN_STATE


class TransactionAbortable(AbortableError):
    """A write of the current transaction failed; abort the transaction, then carry on (KIP-1050)."""

    code = KafkaError.TRANSACTION_ABORTABLE


class IllegalGeneration(AbortableError):
    """A transactional offset commit at a member epoch the group has fenced (S6.4, S7.2); abort and rejoin."""

    code = KafkaError.ILLEGAL_GENERATION


class StaleMemberEpoch(RetriableError):
    """An offset commit at a member epoch outside (revocation epoch, member epoch] (S6.4); retry with the current epoch."""

    code = KafkaError.STALE_MEMBER_EPOCH


class UnknownMemberId(AbortableError):
    """The member is not (or no longer) in the group (S6.5): it must rejoin; a transaction with its offsets must abort."""

    code = KafkaError.UNKNOWN_MEMBER_ID


class FencedInstanceId(FatalError):
    """A newer instance with the same group.instance.id has joined (S6.5)."""

    code = KafkaError.FENCED_INSTANCE_ID


class FencedMemberEpoch(KafkaException):
    """A heartbeat with an epoch the coordinator no longer knows for the member: rejoin with epoch 0."""

    code = KafkaError.FENCED_MEMBER_EPOCH


class UnstableOffsetCommit(RetriableError):
    """A stable offset fetch met a pending transactional offset commit (S7.3, KIP-447); back off and retry."""

    code = KafkaError.UNSTABLE_OFFSET_COMMIT


class GroupIdNotFound(KafkaException):
    code = KafkaError.GROUP_ID_NOT_FOUND


class NonEmptyGroup(KafkaException):
    code = KafkaError.NON_EMPTY_GROUP


class InvalidGroupId(InvalidRequest):
    code = KafkaError.INVALID_GROUP_ID


class KafkaTimeout(RetriableError):
    code = KafkaError._TIMED_OUT


class KafkaStorageError(RetriableError):
    """The storage under the root failed (I/O); whether a commit landed is unknown, so retry idempotently."""

    code = KafkaError.KAFKA_STORAGE_ERROR


class SaslAuthenticationFailed(FatalError):
    """The storage under the root refused the credentials (wrong or expired keys): fix them, then start again."""

    code = KafkaError.SASL_AUTHENTICATION_FAILED


class CommitConflict(RetriableError):
    """Another writer took the version this commit was decided for; reload and decide again."""


class InvalidProducerIdMapping(FatalError):
    """The producer id is not (or no longer) the one mapped to this transactional.id."""

    code = KafkaError.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeout(FatalError):
    """transaction.timeout.ms is not positive or exceeds transaction.max.timeout.ms (S4.7)."""

    code = KafkaError.INVALID_TRANSACTION_TIMEOUT


__all__ = [name for name in list(globals()) if not name.startswith("_") and name[0].isupper()]
