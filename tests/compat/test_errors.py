"""KafkaError, KafkaException and argument errors as confluent-kafka has them (issue 14, gap 3).

A handler written for confluent-kafka names librdkafka's codes (`KafkaError._MSG_TIMED_OUT`,
`REBALANCE_IN_PROGRESS`, ...), compares an error with an int code, and catches TypeError or
ValueError for bad arguments: each of those is driven here through confluent-kafka's semantics
(its confluent_kafka.c, error.py, tests/test_kafka_error.py and tests/test_error.py).
"""

from __future__ import annotations

import pickle

import pytest
from helpers import table_fingerprint

from lakelog import KafkaError, KafkaException, Producer
from lakelog.error import (
    ConsumeError,
    KeyDeserializationError,
    KeySerializationError,
    ProduceError,
    SerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from lakelog.errors import InvalidArgument, InvalidRequest, InvalidType, OffsetMismatch, ProducerFenced
from lakelog.log import open_partition

# Every code of confluent_kafka.KafkaError (its cimpl.pyi; librdkafka's rd_kafka_resp_err_t), name=value.
CONFLUENT_CODES = {
    pair.split("=")[0]: int(pair.split("=")[1])
    for pair in """
    _BAD_MSG=-199 _BAD_COMPRESSION=-198 _DESTROY=-197 _FAIL=-196 _TRANSPORT=-195 _CRIT_SYS_RESOURCE=-194
    _RESOLVE=-193 _MSG_TIMED_OUT=-192 _PARTITION_EOF=-191 _UNKNOWN_PARTITION=-190 _FS=-189 _UNKNOWN_TOPIC=-188
    _ALL_BROKERS_DOWN=-187 _INVALID_ARG=-186 _TIMED_OUT=-185 _QUEUE_FULL=-184 _ISR_INSUFF=-183 _NODE_UPDATE=-182
    _SSL=-181 _WAIT_COORD=-180 _UNKNOWN_GROUP=-179 _IN_PROGRESS=-178 _PREV_IN_PROGRESS=-177
    _EXISTING_SUBSCRIPTION=-176 _ASSIGN_PARTITIONS=-175 _REVOKE_PARTITIONS=-174 _CONFLICT=-173 _STATE=-172
    _UNKNOWN_PROTOCOL=-171 _NOT_IMPLEMENTED=-170 _AUTHENTICATION=-169 _NO_OFFSET=-168 _OUTDATED=-167
    _TIMED_OUT_QUEUE=-166 _UNSUPPORTED_FEATURE=-165 _WAIT_CACHE=-164 _INTR=-163 _KEY_SERIALIZATION=-162
    _VALUE_SERIALIZATION=-161 _KEY_DESERIALIZATION=-160 _VALUE_DESERIALIZATION=-159 _PARTIAL=-158
    _READ_ONLY=-157 _NOENT=-156 _UNDERFLOW=-155 _INVALID_TYPE=-154 _RETRY=-153 _PURGE_QUEUE=-152
    _PURGE_INFLIGHT=-151 _FATAL=-150 _INCONSISTENT=-149 _GAPLESS_GUARANTEE=-148 _MAX_POLL_EXCEEDED=-147
    _UNKNOWN_BROKER=-146 _NOT_CONFIGURED=-145 _FENCED=-144 _APPLICATION=-143 _ASSIGNMENT_LOST=-142 _NOOP=-141
    _AUTO_OFFSET_RESET=-140 _LOG_TRUNCATION=-139 _INVALID_DIFFERENT_RECORD=-138 _DESTROY_BROKER=-137 UNKNOWN=-1
    NO_ERROR=0 OFFSET_OUT_OF_RANGE=1 INVALID_MSG=2 UNKNOWN_TOPIC_OR_PART=3 INVALID_MSG_SIZE=4
    LEADER_NOT_AVAILABLE=5 NOT_LEADER_FOR_PARTITION=6 REQUEST_TIMED_OUT=7 BROKER_NOT_AVAILABLE=8
    REPLICA_NOT_AVAILABLE=9 MSG_SIZE_TOO_LARGE=10 STALE_CTRL_EPOCH=11 OFFSET_METADATA_TOO_LARGE=12
    NETWORK_EXCEPTION=13 COORDINATOR_LOAD_IN_PROGRESS=14 COORDINATOR_NOT_AVAILABLE=15 NOT_COORDINATOR=16
    TOPIC_EXCEPTION=17 RECORD_LIST_TOO_LARGE=18 NOT_ENOUGH_REPLICAS=19 NOT_ENOUGH_REPLICAS_AFTER_APPEND=20
    INVALID_REQUIRED_ACKS=21 ILLEGAL_GENERATION=22 INCONSISTENT_GROUP_PROTOCOL=23 INVALID_GROUP_ID=24
    UNKNOWN_MEMBER_ID=25 INVALID_SESSION_TIMEOUT=26 REBALANCE_IN_PROGRESS=27 INVALID_COMMIT_OFFSET_SIZE=28
    TOPIC_AUTHORIZATION_FAILED=29 GROUP_AUTHORIZATION_FAILED=30 CLUSTER_AUTHORIZATION_FAILED=31
    INVALID_TIMESTAMP=32 UNSUPPORTED_SASL_MECHANISM=33 ILLEGAL_SASL_STATE=34 UNSUPPORTED_VERSION=35
    TOPIC_ALREADY_EXISTS=36 INVALID_PARTITIONS=37 INVALID_REPLICATION_FACTOR=38 INVALID_REPLICA_ASSIGNMENT=39
    INVALID_CONFIG=40 NOT_CONTROLLER=41 INVALID_REQUEST=42 UNSUPPORTED_FOR_MESSAGE_FORMAT=43 POLICY_VIOLATION=44
    OUT_OF_ORDER_SEQUENCE_NUMBER=45 DUPLICATE_SEQUENCE_NUMBER=46 INVALID_PRODUCER_EPOCH=47 INVALID_TXN_STATE=48
    INVALID_PRODUCER_ID_MAPPING=49 INVALID_TRANSACTION_TIMEOUT=50 CONCURRENT_TRANSACTIONS=51
    TRANSACTION_COORDINATOR_FENCED=52 TRANSACTIONAL_ID_AUTHORIZATION_FAILED=53 SECURITY_DISABLED=54
    OPERATION_NOT_ATTEMPTED=55 KAFKA_STORAGE_ERROR=56 LOG_DIR_NOT_FOUND=57 SASL_AUTHENTICATION_FAILED=58
    UNKNOWN_PRODUCER_ID=59 REASSIGNMENT_IN_PROGRESS=60 DELEGATION_TOKEN_AUTH_DISABLED=61
    DELEGATION_TOKEN_NOT_FOUND=62 DELEGATION_TOKEN_OWNER_MISMATCH=63 DELEGATION_TOKEN_REQUEST_NOT_ALLOWED=64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED=65 DELEGATION_TOKEN_EXPIRED=66 INVALID_PRINCIPAL_TYPE=67
    NON_EMPTY_GROUP=68 GROUP_ID_NOT_FOUND=69 FETCH_SESSION_ID_NOT_FOUND=70 INVALID_FETCH_SESSION_EPOCH=71
    LISTENER_NOT_FOUND=72 TOPIC_DELETION_DISABLED=73 FENCED_LEADER_EPOCH=74 UNKNOWN_LEADER_EPOCH=75
    UNSUPPORTED_COMPRESSION_TYPE=76 STALE_BROKER_EPOCH=77 OFFSET_NOT_AVAILABLE=78 MEMBER_ID_REQUIRED=79
    PREFERRED_LEADER_NOT_AVAILABLE=80 GROUP_MAX_SIZE_REACHED=81 FENCED_INSTANCE_ID=82
    ELIGIBLE_LEADERS_NOT_AVAILABLE=83 ELECTION_NOT_NEEDED=84 NO_REASSIGNMENT_IN_PROGRESS=85
    GROUP_SUBSCRIBED_TO_TOPIC=86 INVALID_RECORD=87 UNSTABLE_OFFSET_COMMIT=88 THROTTLING_QUOTA_EXCEEDED=89
    PRODUCER_FENCED=90 RESOURCE_NOT_FOUND=91 DUPLICATE_RESOURCE=92 UNACCEPTABLE_CREDENTIAL=93
    INCONSISTENT_VOTER_SET=94 INVALID_UPDATE_VERSION=95 FEATURE_UPDATE_FAILED=96
    PRINCIPAL_DESERIALIZATION_FAILURE=97 UNKNOWN_TOPIC_ID=100 INCONSISTENT_TOPIC_ID=103 FENCED_MEMBER_EPOCH=110
    UNRELEASED_INSTANCE_ID=111 UNSUPPORTED_ASSIGNOR=112 STALE_MEMBER_EPOCH=113 MISMATCHED_ENDPOINT_TYPE=114
    UNSUPPORTED_ENDPOINT_TYPE=115 UNKNOWN_CONTROLLER_ID=116 UNKNOWN_SUBSCRIPTION_ID=117 TELEMETRY_TOO_LARGE=118
    INVALID_REGISTRATION=119 TRANSACTION_ABORTABLE=120 INVALID_RECORD_STATE=121 SHARE_SESSION_NOT_FOUND=122
    INVALID_SHARE_SESSION_EPOCH=123 FENCED_STATE_EPOCH=124 INVALID_VOTER_KEY=125 DUPLICATE_VOTER=126
    VOTER_NOT_FOUND=127 INVALID_REGULAR_EXPRESSION=128 REBOOTSTRAP_REQUIRED=129 STREAMS_INVALID_TOPOLOGY=130
    STREAMS_INVALID_TOPOLOGY_EPOCH=131 STREAMS_TOPOLOGY_FENCED=132 SHARE_SESSION_LIMIT_REACHED=133
""".split()
}


def test_every_confluent_error_code_is_a_kafka_error_constant_with_librdkafkas_value():
    assert len(CONFLUENT_CODES) == 188
    assert {name: getattr(KafkaError, name, None) for name in CONFLUENT_CODES} == CONFLUENT_CODES
    for name, code in CONFLUENT_CODES.items():
        if code != KafkaError.INVALID_MSG:  # lakelog names code 2 as Kafka does: CORRUPT_MESSAGE
            assert KafkaError(code).name() == name


def test_a_handler_naming_librdkafka_codes_runs_its_branches():
    """The branches that crashed on AttributeError before (issue 14): each now compares as confluent's does."""

    def handle(error: KafkaError) -> str:
        if error.code() == KafkaError._MSG_TIMED_OUT:
            return "timed out"
        if error == KafkaError._TRANSPORT:
            return "transport"
        if error.code() in (KafkaError.REBALANCE_IN_PROGRESS, KafkaError._ALL_BROKERS_DOWN):
            return "wait"
        return "other"

    assert handle(KafkaError(KafkaError._MSG_TIMED_OUT)) == "timed out"
    assert handle(KafkaError(KafkaError._TRANSPORT)) == "transport"
    assert handle(KafkaError(KafkaError.REBALANCE_IN_PROGRESS)) == "wait"
    assert handle(KafkaError(KafkaError.PRODUCER_FENCED)) == "other"


def test_kafka_error_accessors_and_default_text_are_librdkafkas():
    error = KafkaError(KafkaError._ALL_BROKERS_DOWN, "Mayday!")
    assert (error.code(), error.name(), error.str()) == (-187, "_ALL_BROKERS_DOWN", "Mayday!")
    assert (error.fatal(), error.retriable(), error.txn_requires_abort()) == (False, False, False)
    assert KafkaError(KafkaError._MSG_TIMED_OUT).str() == "Local: Message timed out"
    assert KafkaError(KafkaError.REBALANCE_IN_PROGRESS).str() == "Broker: Group rebalance in progress"
    unknown = KafkaError(12345)
    assert (unknown.name(), unknown.str()) == ("ERR_12345?", "Err-12345?")
    assert str(KafkaError(KafkaError.MEMBER_ID_REQUIRED, "x", fatal=True)) == (
        'KafkaError{FATAL,code=MEMBER_ID_REQUIRED,val=79,str="x"}'
    )
    assert str(KafkaError(KafkaError._TIMED_OUT)) == 'KafkaError{code=_TIMED_OUT,val=-185,str="Local: Timed out"}'
    # confluent's keyword names, and positional flags after the reason.
    flagged = KafkaError(error=KafkaError._FATAL, reason=None, fatal=True, retriable=True, txn_requires_abort=True)
    assert (flagged.fatal(), flagged.retriable(), flagged.txn_requires_abort()) == (True, True, True)
    assert KafkaError(KafkaError._FATAL, "r", True, False, True).txn_requires_abort()
    with pytest.raises(TypeError):
        KafkaError("_TIMED_OUT")


def test_kafka_error_compares_orders_and_hashes_as_its_code():
    error = KafkaError(KafkaError._PARTITION_EOF, "end")
    assert error == KafkaError._PARTITION_EOF and KafkaError._PARTITION_EOF == error
    assert error == KafkaError(KafkaError._PARTITION_EOF, "other text")
    assert error != KafkaError._TIMED_OUT and not (error != KafkaError._PARTITION_EOF)
    assert error < KafkaError.NO_ERROR and error <= -191 and error >= -191 and KafkaError(5) > 4
    assert hash(error) == hash(KafkaError._PARTITION_EOF)
    assert {KafkaError._PARTITION_EOF: "eof"}[error] == "eof"
    assert error != "something else" and error is not None


def test_kafka_error_pickles_with_its_flags():
    error = KafkaError(KafkaError.PRODUCER_FENCED, "fenced", fatal=True, retriable=False, txn_requires_abort=False)
    assert error.__reduce__() == (KafkaError, (90, "fenced", True, False, False))
    restored = pickle.loads(pickle.dumps(error))
    assert (restored.code(), restored.str(), restored.fatal()) == (90, "fenced", True)


def test_kafka_exception_without_arguments_and_subclassed_as_confluents():
    bare = KafkaException()
    assert bare.args == () and str(bare) == ""

    class MyExc(KafkaException):
        def a_method(self) -> str:
            return "yes"

    mine = MyExc()
    assert mine.a_method() == "yes" and isinstance(mine, KafkaException)

    class MyException(KafkaException):
        def __init__(self, error_code: int) -> None:
            super().__init__(KafkaError(error_code))

    with pytest.raises(KafkaException, match="Err-12345?") as raised:
        raise MyException(12345)
    assert not raised.value.args[0].fatal()


@pytest.mark.parametrize("flag", ["fatal", "retriable", "txn_requires_abort"])
def test_kafka_exception_carries_the_error_it_is_given(flag):
    with pytest.raises(KafkaException) as raised:
        raise KafkaException(KafkaError(KafkaError.MEMBER_ID_REQUIRED, **{flag: True}))
    error = raised.value.args[0]
    assert isinstance(error, KafkaError) and error.code() == KafkaError.MEMBER_ID_REQUIRED
    assert {f: getattr(error, f)() for f in ("fatal", "retriable", "txn_requires_abort")} == {
        f: f == flag for f in ("fatal", "retriable", "txn_requires_abort")
    }


def test_lakelogs_own_exceptions_keep_their_shape():
    """lakelog's typed errors still carry a KafkaError of their class, their details, and work bare too."""
    raised = OffsetMismatch("expected 3", log_end_offset=7)
    assert raised.args[0] == KafkaError.OFFSET_MISMATCH and raised.log_end_offset == 7 and str(raised) == "expected 3"
    fenced = ProducerFenced()
    assert fenced.error.code() == KafkaError.PRODUCER_FENCED and fenced.error.fatal()


@pytest.mark.parametrize("cls", [ConsumeError, ProduceError])
def test_consume_and_produce_errors_as_confluent_kafka_error(cls):
    error = cls(KafkaError(KafkaError._KEY_SERIALIZATION, "Unable to serialize key"), exception=ValueError())
    assert error.code == KafkaError._KEY_SERIALIZATION and error.name == "_KEY_SERIALIZATION"
    assert error.args[0].str() == "Unable to serialize key"
    assert isinstance(error.exception, ValueError) and isinstance(error, KafkaException)
    assert cls(KafkaError(KafkaError._PARTITION_EOF)).name == "_PARTITION_EOF"


def test_serialization_errors_carry_their_codes_and_cause():
    cause = ValueError("bad")
    cases = [
        (KeySerializationError(cause), KafkaError._KEY_SERIALIZATION, ProduceError),
        (ValueSerializationError(cause), KafkaError._VALUE_SERIALIZATION, ProduceError),
        (KeyDeserializationError(cause, "msg"), KafkaError._KEY_DESERIALIZATION, ConsumeError),
        (ValueDeserializationError(exception=cause, kafka_message="msg"), KafkaError._VALUE_DESERIALIZATION, ConsumeError),
    ]
    for error, code, base in cases:
        assert isinstance(error, (base, SerializationError, KafkaException))
        assert isinstance(error, base) and isinstance(error, SerializationError)
        assert error.code == code and error.exception is cause and str(error) == "bad"
    assert cases[2][0].kafka_message == "msg"


# -- bad arguments raise what confluent-kafka raises, and are still InvalidRequest --------------------


@pytest.mark.parametrize(
    "bad, raised",
    [
        ({"value": 123}, TypeError),
        ({"key": ["k"]}, TypeError),
        ({"partition": "0"}, TypeError),
        ({"timestamp": "now"}, TypeError),
        ({"timestamp": -1}, ValueError),
        ({"headers": "x"}, TypeError),
        ({"headers": [("h", b"v", b"w")]}, TypeError),
        ({"headers": [(1, b"v")]}, TypeError),
        ({"headers": {"h": 5}}, TypeError),
        ({"expected_offset": "3"}, TypeError),
        ({"expected_offset": -1}, ValueError),
    ],
    ids=lambda case: repr(case) if isinstance(case, dict) else case.__name__,
)
def test_S8_3_produce_with_a_bad_argument_raises_confluents_type_and_writes_nothing(root, topic, bad, raised):
    name = topic()
    producer = Producer({"lakelog.root": root})
    before = table_fingerprint(open_partition(root, name, 0).table.uri)
    with pytest.raises(raised) as caught:
        producer.produce(name, **{"value": b"v", **bad})
    assert isinstance(caught.value, InvalidRequest)
    assert isinstance(caught.value, InvalidType if raised is TypeError else InvalidArgument)
    assert len(producer) == 0 and producer.flush(1) == 0
    assert table_fingerprint(open_partition(root, name, 0).table.uri) == before


def test_produce_to_a_topic_that_is_not_a_str_raises_type_error(root):
    with pytest.raises(TypeError):
        Producer({"lakelog.root": root}).produce(None, value=b"v")
