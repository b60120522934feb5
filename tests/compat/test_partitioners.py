"""librdkafka's named partitioners, confluent-kafka's partitioner functions, version() and libversion() (issue 14, gap 10).

Known vectors: Java's murmur2 (Kafka's UtilsTest.testMurmur2) and Sarama's FNV-1a (librdkafka's
rdfnv1a.c unit test), so a key lands where the Java producer, Sarama or librdkafka would put it.
"""

from __future__ import annotations

import zlib

import pytest

import lakelog
from lakelog import OFFSET_BEGINNING, Consumer, Producer, TopicPartition, consistent, fnv1a, murmur2
from lakelog.client.partitioner import PARTITIONERS, fnv1a_hash, murmur2_hash, partition_for

# Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}
# librdkafka's src/rdfnv1a.c unittest_fnv1a (Go's hash/fnv made non-negative, as Sarama's partitioner).
SARAMA_FNV1A = {
    b"kafka": 0xD33C4E1,
    b"giberish123456789": 0x77A58295,
    b"1234": 0x23BDD03,
    b"234": 0x2DEA3CD2,
    b"34": 0x740FA83E,
    b"4": 0x310CA263,
    b"PreAmbleWillBeRemoved,ThePrePartThatIs": 0x65CBD69C,
    b"reAmbleWillBeRemoved,ThePrePartThatIs": 0x6E49C79A,
    b"eAmbleWillBeRemoved,ThePrePartThatIs": 0x69EED356,
    b"AmbleWillBeRemoved,ThePrePartThatIs": 0x6ABCC023,
    b"": 0x7EE3623B,
}


@pytest.mark.parametrize("key, expected", JAVA_MURMUR2.items())
def test_murmur2_is_javas(key, expected):
    assert murmur2_hash(key) == expected
    assert murmur2(key, 12) == (expected & 0x7FFFFFFF) % 12 == partition_for(key, 12, "murmur2")


@pytest.mark.parametrize("key, expected", SARAMA_FNV1A.items())
def test_fnv1a_is_saramas(key, expected):
    assert fnv1a_hash(key) == expected
    assert fnv1a(key, 7) == expected % 7 == partition_for(key, 7, "fnv1a")


def test_consistent_is_crc32():
    for key in (b"key", b"", b"orders-42"):
        assert consistent(key, 5) == zlib.crc32(key) % 5 == partition_for(key, 5, "consistent")


def test_partitioner_functions_check_their_arguments_as_confluent():
    for function in (murmur2, consistent, fnv1a):
        assert function(b"k", 1) == 0
        with pytest.raises(ValueError, match="partition_count must be > 0"):
            function(b"key", 0)
        with pytest.raises(TypeError):
            function("string_key", 10)
        with pytest.raises(TypeError):
            function(b"key", "10")


def test_the_random_forms_hash_keys_and_spread_keyless_messages():
    for name, hashed in (("consistent_random", "consistent"), ("murmur2_random", "murmur2"), ("fnv1a_random", "fnv1a")):
        assert partition_for(b"key", 16, name) == partition_for(b"key", 16, hashed)
        assert len({partition_for(None, 16, name) for _ in range(200)}) > 1
    # librdkafka's consistent_random tests the key's length: an empty key is spread too; murmur2_random hashes it.
    assert len({partition_for(b"", 16, "consistent_random") for _ in range(200)}) > 1
    assert {partition_for(b"", 16, "murmur2_random") for _ in range(20)} == {partition_for(b"", 16, "murmur2")}
    assert len({partition_for(b"key", 16, "random") for _ in range(200)}) > 1
    assert sorted(PARTITIONERS) == sorted(
        ["random", "consistent", "consistent_random", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random"]
    )


@pytest.mark.parametrize("name", ["murmur2", "fnv1a", "fnv1a_random", "consistent"])
def test_a_producer_places_each_key_by_its_named_partitioner(root, topic, name):
    topic_name = topic(partitions=5)
    keys = [f"key-{i}".encode() for i in range(12)]
    producer = Producer({"lakelog.root": root, "partitioner": name})
    for key in keys:
        producer.produce(topic_name, key=key, value=b"v")
    producer.flush()
    landed = {}
    with Consumer({"lakelog.root": root}) as consumer:
        consumer.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(5)])
        for message in consumer.consume(100, 3.0):
            landed[message.key()] = message.partition()
    assert landed == {key: partition_for(key, 5, name.removesuffix("_random")) for key in keys}


def test_version_and_libversion_have_confluents_shapes():
    assert isinstance(lakelog.version(), str) and lakelog.version()
    text, number = lakelog.libversion()
    assert text == lakelog.version() and isinstance(number, int)
    major, minor, patch = (int(part) for part in text.split(".")[:3])
    assert number == (major << 24) | (minor << 16) | (patch << 8) | 0xFF
