"""The producer's partitioners match librdkafka's and the Java client's hashes."""

import zlib

import pytest

from lakelog.client.partitioner import murmur2_hash, partition_for

# Kafka's own vectors (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2).
MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", MURMUR2_VECTORS.items())
def test_murmur2_matches_the_java_client(key, expected):
    assert murmur2_hash(key) == expected


def test_murmur2_partitioner_uses_positive_hash_modulo():
    assert partition_for(b"foobar", 7, "murmur2_random") == (-790332482 & 0x7FFFFFFF) % 7


def test_consistent_partitioner_is_crc32_and_stable_for_null_key():
    assert partition_for(b"key", 5, "consistent") == zlib.crc32(b"key") % 5
    assert {partition_for(None, 5, "consistent") for _ in range(20)} == {0}
