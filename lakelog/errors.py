"""Errors named after Kafka's error codes, shaped like confluent-kafka-python.

`KafkaError` is the value object (`code() name() str() retriable() fatal()
txn_requires_abort()`); `KafkaException` carries one as `args[0]`. Each protocol
error is a subclass of `KafkaException` named after its Kafka error code, so
callers can `except OffsetMismatch as e: e.log_end_offset` or, ported from
confluent-kafka, `except KafkaException as e: e.args[0].code()`.

Classes follow KIP-1050's taxonomy: `retriable` (try the same call again),
`abortable` (abort the transaction, then carry on) or `fatal` (close the client).

Every error class lives here; `lakelog.error` re-exports them under confluent's module name, and
`lakelog.error_codes` is the table of librdkafka's codes.
"""

from __future__ import annotations

import builtins
import logging
from typing import Any, ClassVar

from lakelog import error_codes

logger = logging.getLogger(__name__)


class KafkaError(error_codes.ErrorCodes):
    """An error code with its message, as confluent-kafka's `KafkaError`.

    Every code of librdkafka is a constant (`KafkaError._MSG_TIMED_OUT`, `KafkaError.REBALANCE_IN_PROGRESS`,
    see lakelog.error_codes); an error compares and hashes as its code, so `err == KafkaError._PARTITION_EOF`
    and `{KafkaError._TIMED_OUT: ...}[err]` work as in confluent-kafka.
    """

    # Kafka's (Java) name of librdkafka's INVALID_MSG: lakelog's errors and CLI name code 2 so.
    CORRUPT_MESSAGE = error_codes.ErrorCodes.INVALID_MSG
    # KIP-27 names no protocol code; lakelog takes one outside Kafka's range.
    OFFSET_MISMATCH = 1000
    # Kafka's code (KIP-664's DescribeTransactions) that librdkafka does not list.
    TRANSACTIONAL_ID_NOT_FOUND = 105

    __slots__ = ("_code", "_reason", "_fatal", "_retriable", "_txn_requires_abort")

    def __init__(
        self,
        error: int,
        reason: str | None = None,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        if not isinstance(error, int):
            raise TypeError(f"KafkaError() takes an int error code, not {type(error).__name__}")
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"KafkaError() takes a str reason or None, not {type(reason).__name__}")
        self._code = int(error)
        self._reason = reason if reason is not None else _description(self._code)
        self._fatal = bool(fatal)
        self._retriable = bool(retriable)
        self._txn_requires_abort = bool(txn_requires_abort)

    def code(self) -> int:
        """The error code (a KafkaError constant: librdkafka's value, Kafka's for protocol errors)."""
        return self._code

    def name(self) -> str:
        """The code's name (`_MSG_TIMED_OUT`); `ERR_<code>?` for a code librdkafka does not know, as librdkafka."""
        return _LAKELOG_NAMES.get(self._code) or error_codes.NAMES.get(self._code) or f"ERR_{self._code}?"

    def str(self) -> str:
        """The human-readable reason: lakelog's one-sentence message, or librdkafka's text for the code."""
        return self._reason

    def fatal(self) -> bool:
        """True if the client can do nothing more: close it and make a new one."""
        return self._fatal

    def retriable(self) -> bool:
        """True if the same call may succeed when tried again."""
        return self._retriable

    def txn_requires_abort(self) -> bool:
        """True if the current transaction must be aborted; the producer can then begin another."""
        return self._txn_requires_abort

    def _other_code(self, other: object) -> int | None:
        if isinstance(other, KafkaError):
            return other._code
        if isinstance(other, int):
            return other
        return None

    def __eq__(self, other: object) -> bool:
        code = self._other_code(other)
        return NotImplemented if code is None else self._code == code

    def __ne__(self, other: object) -> bool:
        code = self._other_code(other)
        return NotImplemented if code is None else self._code != code

    def __lt__(self, other: object) -> bool:
        code = self._other_code(other)
        return NotImplemented if code is None else self._code < code

    def __le__(self, other: object) -> bool:
        code = self._other_code(other)
        return NotImplemented if code is None else self._code <= code

    def __gt__(self, other: object) -> bool:
        code = self._other_code(other)
        return NotImplemented if code is None else self._code > code

    def __ge__(self, other: object) -> bool:
        code = self._other_code(other)
        return NotImplemented if code is None else self._code >= code

    def __hash__(self) -> int:
        return hash(self._code)

    def __reduce__(self) -> tuple[Any, ...]:
        return (KafkaError, (self._code, self._reason, self._fatal, self._retriable, self._txn_requires_abort))

    def __str__(self) -> builtins.str:  # builtins': in this class `str` is the method str()
        fatal = "FATAL," if self._fatal else ""
        return f'KafkaError{{{fatal}code={self.name()},val={self._code},str="{self._reason}"}}'

    __repr__ = __str__


# Codes lakelog names otherwise than librdkafka, or adds; with what a KafkaError of them says by default.
_LAKELOG_NAMES = {
    KafkaError.CORRUPT_MESSAGE: "CORRUPT_MESSAGE",
    KafkaError.OFFSET_MISMATCH: "OFFSET_MISMATCH",
    KafkaError.TRANSACTIONAL_ID_NOT_FOUND: "TRANSACTIONAL_ID_NOT_FOUND",
}
_LAKELOG_DESCRIPTIONS = {
    KafkaError.OFFSET_MISMATCH: "Broker: the batch's expected offset is not the log end offset",
    KafkaError.TRANSACTIONAL_ID_NOT_FOUND: "Broker: the transactionalId could not be found",
}


def _description(code: int) -> str:
    """rd_kafka_err2str(code): `Err-<code>?` for a code librdkafka does not know."""
    return _LAKELOG_DESCRIPTIONS.get(code) or error_codes.DESCRIPTIONS.get(code) or f"Err-{code}?"


class KafkaException(Exception):
    """An exception carrying a `KafkaError` as `args[0]`, as in confluent-kafka.

    `KafkaException(KafkaError(...))` keeps the error; a subclass given a message
    (`OffsetMismatch("...", log_end_offset=7)`) makes one of its class's code and
    flags; keyword details become attributes. `KafkaException()` has no args, as
    in confluent-kafka; its `error` is then a KafkaError of the class's code.
    """

    code: ClassVar[int] = KafkaError.UNKNOWN
    retriable: ClassVar[bool] = False
    abortable: ClassVar[bool] = False
    fatal: ClassVar[bool] = False

    def __init__(self, *args: Any, **details: Any) -> None:
        if args and isinstance(args[0], (str, int)) and not isinstance(args[0], bool):
            first = args[0]
            code, reason = (first, None) if isinstance(first, int) else (self._class_code(), first)
            args = (self._new_error(code, reason), *args[1:])
        super().__init__(*args)
        self.details = details
        for key, value in details.items():
            setattr(self, key, value)

    @classmethod
    def _class_code(cls) -> int:
        # confluent_kafka.error's classes make `code` a property of the instance: their class has no code of its own.
        return cls.code if isinstance(cls.code, int) else KafkaError.UNKNOWN

    @classmethod
    def _new_error(cls, code: int, reason: str | None) -> KafkaError:
        return KafkaError(code, reason, fatal=cls.fatal, retriable=cls.retriable, txn_requires_abort=cls.abortable)

    @property
    def error(self) -> KafkaError:
        """The KafkaError this exception carries (its `args[0]`)."""
        if self.args and isinstance(self.args[0], KafkaError):
            return self.args[0]
        return self._new_error(self._class_code(), None)

    def __str__(self) -> str:
        if self.args and isinstance(self.args[0], KafkaError):
            return self.args[0].str()
        return super().__str__()


class RetriableError(KafkaException):
    """The same request may succeed if sent again."""

    retriable = True


class AbortableError(KafkaException):
    """The current transaction must be aborted; the client stays usable."""

    abortable = True


class FatalError(KafkaException):
    """The client cannot go on; close it and start a new one."""

    fatal = True


class SerializationError(KafkaException):
    """A (de)serializer failed, as confluent_kafka.serialization.SerializationError."""


class _KafkaClientError(KafkaException):
    """confluent_kafka.error's base: the KafkaError, the exception that caused it, the message it concerns."""

    def __init__(self, kafka_error: KafkaError, exception: BaseException | None = None, kafka_message: Any = None) -> None:
        super().__init__(kafka_error)
        self.exception = exception
        self.kafka_message = kafka_message

    @property
    def code(self) -> int:  # type: ignore[override]
        return self.error.code()

    @property
    def name(self) -> str:
        return self.error.name()


class ConsumeError(_KafkaClientError):
    """An error met while consuming (DeserializingConsumer.poll): the message, if any, is `kafka_message`."""


class KeyDeserializationError(ConsumeError, SerializationError):
    """A consumed message's key could not be deserialized (DeserializingConsumer, `_KEY_DESERIALIZATION`)."""

    def __init__(self, exception: BaseException | None = None, kafka_message: Any = None) -> None:
        super().__init__(KafkaError(KafkaError._KEY_DESERIALIZATION, str(exception)), exception, kafka_message)


class ValueDeserializationError(ConsumeError, SerializationError):
    """A consumed message's value could not be deserialized (DeserializingConsumer, `_VALUE_DESERIALIZATION`)."""

    def __init__(self, exception: BaseException | None = None, kafka_message: Any = None) -> None:
        super().__init__(KafkaError(KafkaError._VALUE_DESERIALIZATION, str(exception)), exception, kafka_message)


class ProduceError(_KafkaClientError):
    """An error met while producing (SerializingProducer.produce)."""

    def __init__(self, kafka_error: KafkaError, exception: BaseException | None = None) -> None:
        super().__init__(kafka_error, exception, None)


class KeySerializationError(ProduceError, SerializationError):
    """A key could not be serialized before it was produced (SerializingProducer, `_KEY_SERIALIZATION`)."""

    def __init__(self, exception: BaseException | None = None) -> None:
        super().__init__(KafkaError(KafkaError._KEY_SERIALIZATION, str(exception)), exception)


class ValueSerializationError(ProduceError, SerializationError):
    """A value could not be serialized before it was produced (SerializingProducer, `_VALUE_SERIALIZATION`)."""

    def __init__(self, exception: BaseException | None = None) -> None:
        super().__init__(KafkaError(KafkaError._VALUE_SERIALIZATION, str(exception)), exception)


class PurgeQueue(RetriableError):
    """Work still pending was dropped because the client was told to stop (librdkafka's _PURGE_QUEUE)."""

    code = KafkaError._PURGE_QUEUE


class InvalidRequest(KafkaException):
    """The request itself is malformed; nothing was done."""

    code = KafkaError.INVALID_REQUEST


class InvalidType(InvalidRequest, TypeError):
    """An argument of the wrong type (librdkafka's _INVALID_TYPE): a TypeError, where confluent-kafka raises one."""

    code = KafkaError._INVALID_TYPE


class InvalidArgument(InvalidRequest, ValueError):
    """An argument of the right type and a wrong value (librdkafka's _INVALID_ARG): a ValueError, as in confluent-kafka."""

    code = KafkaError._INVALID_ARG


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


class MsgSizeTooLarge(KafkaException):
    """A record larger than the producer's message.max.bytes or the topic's max.message.bytes (Kafka's
    MESSAGE_TOO_LARGE, librdkafka's MSG_SIZE_TOO_LARGE); `size` and `max_bytes` say by how much. Nothing was written."""

    code = KafkaError.MSG_SIZE_TOO_LARGE


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


class TransactionalIdNotFound(KafkaException):
    """A transactional id the coordinator does not know (never initialised, or expired): Kafka's code 105."""

    code = KafkaError.TRANSACTIONAL_ID_NOT_FOUND


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


class UnresolvedRoot(KafkaException):
    """`lakelog.root` names no lakelog root (a typo?): as librdkafka's _RESOLVE for a bootstrap server that is no broker.

    `root` is the URI; `lakelog init` or an explicit admin call that creates topics makes a root.
    """

    code = KafkaError._RESOLVE


class NotImplementedOnRoot(KafkaException):
    """An admin call only a broker answers (ACLs, SCRAM credentials, leader election): a root has none."""

    code = KafkaError._NOT_IMPLEMENTED


class NotImplementedWithoutExtra(KafkaException, ImportError):
    """A feature whose optional dependency, lakelog's extra `extra`, is not installed (as librdkafka's _NOT_IMPLEMENTED
    for a feature it was built without); an ImportError too, so `import pyspark_lakelog` fails as imports do."""

    code = KafkaError._NOT_IMPLEMENTED

    @classmethod
    def missing(cls, feature: str, module: str, extra: str) -> NotImplementedWithoutExtra:
        hint = f"pip install 'lakelog[{extra}]' (from a checkout: pip install '.[{extra}]')"
        return cls(f"{feature} needs {module}, which is not installed: {hint}", module=module, extra=extra)


__all__ = [name for name in list(globals()) if not name.startswith("_") and name[0].isupper()]
