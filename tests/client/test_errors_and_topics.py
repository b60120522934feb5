"""confluent-kafka's error objects and the AdminClient's topic calls (create, validate_only, list, describe) on real
Delta tables. Split out of test_producer_consumer.py.
"""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog import (
    AdminClient,
    KafkaError,
    KafkaException,
    NewTopic,
)
from lakelog.errors import (
    AbortableError,
    ConcurrentTransactions,
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    KafkaStorageError,
    OffsetMismatch,
    ProducerFenced,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from tests.client.clients import NEVER_LINGER_MS, producer


def test_kafka_error_value_object():
    error = KafkaError(KafkaError.OFFSET_MISMATCH, "expected 3, log end offset 7")
    assert error.code() == 1000
    assert error.name() == "OFFSET_MISMATCH"
    assert error.str() == "expected 3, log end offset 7"
    assert (error.retriable(), error.fatal(), error.txn_requires_abort()) == (False, False, False)
    assert error == KafkaError.OFFSET_MISMATCH
    assert error == KafkaError(KafkaError.OFFSET_MISMATCH)
    assert error != KafkaError(KafkaError.OFFSET_OUT_OF_RANGE)
    assert "OFFSET_MISMATCH" in str(error)
    assert KafkaError(KafkaError._PARTITION_EOF).name() == "_PARTITION_EOF"
    assert KafkaError(KafkaError._PARTITION_EOF).str() == "Broker: No more messages"  # librdkafka's rd_kafka_err2str
    assert KafkaError(KafkaError.TOPIC_ALREADY_EXISTS).name() == "TOPIC_ALREADY_EXISTS"
    assert KafkaError(12345).name() == "ERR_12345?"  # librdkafka's rd_kafka_err2name
    flagged = KafkaError(KafkaError.UNKNOWN, "x", fatal=True, retriable=True, txn_requires_abort=True)
    assert (flagged.retriable(), flagged.fatal(), flagged.txn_requires_abort()) == (True, True, True)


@pytest.mark.parametrize(
    ("exception", "code", "retriable", "fatal", "abortable"),
    [
        (OffsetMismatch, KafkaError.OFFSET_MISMATCH, False, False, False),
        (ConcurrentTransactions, KafkaError.CONCURRENT_TRANSACTIONS, True, False, False),
        (KafkaStorageError, KafkaError.KAFKA_STORAGE_ERROR, True, False, False),
        (ProducerFenced, KafkaError.PRODUCER_FENCED, False, True, False),
        (AbortableError, KafkaError.UNKNOWN, False, False, True),
        (TopicAlreadyExists, KafkaError.TOPIC_ALREADY_EXISTS, False, False, False),
    ],
)
def test_exceptions_carry_a_kafka_error_with_their_class(exception, code, retriable, fatal, abortable):
    """KIP-1050 taxonomy: each class says whether it is retriable, abortable or fatal."""
    raised = exception("what happened", log_end_offset=7)
    assert isinstance(raised, KafkaException)
    error = raised.args[0]
    assert isinstance(error, KafkaError) and raised.error is error
    assert error.code() == code
    assert (error.retriable(), error.fatal(), error.txn_requires_abort()) == (retriable, fatal, abortable)
    assert str(raised) == "what happened" == error.str()
    assert raised.log_end_offset == 7


# -- admin -------------------------------------------------------------------------------


def test_create_topics_resolves_futures_and_second_create_is_topic_already_exists(lake):
    """S8.3: the refused second create leaves the existing topic's tables byte for byte as they were."""
    admin = AdminClient({"lakelog.root": lake})
    futures = admin.create_topics([NewTopic("orders", num_partitions=3), NewTopic("audit")])
    assert set(futures) == {"orders", "audit"}
    assert futures["orders"].result() is None and futures["audit"].result() is None
    metadata = admin.list_topics()
    assert sorted(metadata.topics) == ["audit", "orders"]
    assert sorted(metadata.topics["orders"].partitions) == [0, 1, 2]
    assert sorted(metadata.topics["audit"].partitions) == [0]

    before = table_fingerprint(f"{lake}/topics/orders")
    again = admin.create_topics([NewTopic("orders", num_partitions=5)])["orders"]
    error = again.exception()
    assert isinstance(error, TopicAlreadyExists)
    assert error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(TopicAlreadyExists):
        again.result()
    assert table_fingerprint(f"{lake}/topics/orders") == before
    assert sorted(admin.list_topics().topics["orders"].partitions) == [0, 1, 2]


@pytest.mark.parametrize(
    ("new_topic", "error_class"),
    [
        (NewTopic("bad name!"), InvalidTopic),
        (NewTopic(".."), InvalidTopic),
        (NewTopic("fine", config={"no.such.key": "1"}), InvalidConfig),
        (NewTopic("fine", config={"check.expected.offsets": "maybe"}), InvalidConfig),
        (NewTopic("fine", num_partitions=0), InvalidPartitions),
    ],
)
def test_create_topics_refusal_is_in_the_future_and_creates_nothing(lake, new_topic, error_class):
    admin = AdminClient({"lakelog.root": lake})
    future = admin.create_topics([new_topic])[new_topic.topic]
    assert isinstance(future.exception(), error_class)
    assert admin.list_topics().topics == {}
    assert table_fingerprint(lake) == []


def test_create_topics_validate_only_creates_nothing(lake):
    admin = AdminClient({"lakelog.root": lake})
    futures = admin.create_topics([NewTopic("ok", num_partitions=2), NewTopic("bad name")], validate_only=True)
    assert futures["ok"].result() is None
    assert isinstance(futures["bad name"].exception(), InvalidTopic)
    assert admin.list_topics().topics == {}
    assert table_fingerprint(lake) == []


@pytest.mark.parametrize("partitions", [0, -5])
def test_create_topics_validate_only_answers_as_create_does(lake, partitions):
    """validate_only gives the error that the real create would give, as Kafka's CreateTopics does."""
    admin = AdminClient({"lakelog.root": lake})
    validated = admin.create_topics([NewTopic("t", num_partitions=partitions)], validate_only=True)["t"].exception()
    created = admin.create_topics([NewTopic("t", num_partitions=partitions)])["t"].exception()
    assert isinstance(created, InvalidPartitions)
    assert table_fingerprint(lake) == []
    assert validated is not None
    assert validated.error.code() == created.error.code() == KafkaError.INVALID_PARTITIONS


def test_list_topics_of_one_topic(lake, make_topic):
    make_topic(name="a", partitions=2)
    make_topic(name="b")
    admin = AdminClient({"lakelog.root": lake})
    assert list(admin.list_topics("a").topics) == ["a"]
    assert sorted(admin.list_topics("a").topics["a"].partitions) == [0, 1]
    assert sorted(producer(lake).list_topics().topics) == ["a", "b"]


def test_describe_topics_gives_offsets_files_versions_and_config(lake, make_topic):
    topic = make_topic(partitions=2, config={"check.expected.offsets": True, "segment.files": 50})
    p = producer(lake, **{"linger.ms": NEVER_LINGER_MS, "batch.num.messages": 4})
    for i in range(10):
        p.produce(topic, f"v{i}", partition=0, expected_offset=i)
    p.flush()
    futures = AdminClient({"lakelog.root": lake}).describe_topics([topic, "missing"])
    description = futures[topic].result()
    assert description.name == topic
    assert [
        (d.id, d.log_start_offset, d.high_watermark, d.log_end_offset, d.files, d.table_version) for d in description.partitions
    ] == [(0, 0, 10, 10, 3, 3), (1, 0, 0, 0, 0, 0)]
    assert description.config["num.partitions"] == 2
    assert description.config["check.expected.offsets"] is True
    assert description.config["segment.files"] == 50
    assert description.config["compression.type"] == "snappy"
    assert isinstance(futures["missing"].exception(), UnknownTopicOrPartition)


# -- idempotent producer end to end (S3) ------------------------------------------------------
