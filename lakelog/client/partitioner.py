"""librdkafka's partitioners: which partition a message's key goes to.

`partition_for(key, count, name)` runs the partitioner a producer's `partitioner` config names,
as librdkafka defines each: `consistent` (CRC32 of the key), `murmur2` (Java's murmur2, so a key
lands where the Java producer puts it), `fnv1a` (Sarama's FNV-1a), `random`, and their `_random`
forms, which send a key-less message to a random partition (`consistent_random` an empty key too).
`murmur2(key, count)`, `consistent(key, count)` and `fnv1a(key, count)` are confluent-kafka's
module functions of the same name.
"""

from __future__ import annotations

import logging
import random
import zlib
from collections.abc import Callable

logger = logging.getLogger(__name__)

_MASK32 = 0xFFFFFFFF


def murmur2_hash(data: bytes) -> int:
    """Kafka's Java client hash (Utils.murmur2), as a signed 32-bit int."""
    seed, m, r = 0x9747B28C, 0x5BD1E995, 24
    length = len(data)
    h = (seed ^ length) & _MASK32
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & _MASK32
        k ^= k >> r
        k = (k * m) & _MASK32
        h = (h * m) & _MASK32
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def fnv1a_hash(data: bytes) -> int:
    """32-bit FNV-1a made non-negative as Sarama's hash partitioner does (librdkafka's rd_fnv1a)."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & _MASK32
    signed = h - (1 << 32) if h & 0x80000000 else h
    return abs(signed) & _MASK32


def _random(key: bytes | None, count: int) -> int:
    return random.randrange(count)


def _consistent(key: bytes | None, count: int) -> int:
    return zlib.crc32(key or b"") % count


def _murmur2(key: bytes | None, count: int) -> int:
    return (murmur2_hash(key or b"") & 0x7FFFFFFF) % count


def _fnv1a(key: bytes | None, count: int) -> int:
    return fnv1a_hash(key or b"") % count


def _consistent_random(key: bytes | None, count: int) -> int:
    # librdkafka tests the key's length here, its null-ness in the other two _random forms.
    return _random(key, count) if not key else _consistent(key, count)


def _murmur2_random(key: bytes | None, count: int) -> int:
    return _random(key, count) if key is None else _murmur2(key, count)


def _fnv1a_random(key: bytes | None, count: int) -> int:
    return _random(key, count) if key is None else _fnv1a(key, count)


# The values of the `partitioner` config, as librdkafka names them.
PARTITIONERS: dict[str, Callable[[bytes | None, int], int]] = {
    "random": _random,
    "consistent": _consistent,
    "consistent_random": _consistent_random,
    "murmur2": _murmur2,
    "murmur2_random": _murmur2_random,
    "fnv1a": _fnv1a,
    "fnv1a_random": _fnv1a_random,
}


def partition_for(key: bytes | None, num_partitions: int, partitioner: str) -> int:
    """The partition of `num_partitions` that the named librdkafka partitioner gives `key`."""
    return PARTITIONERS[partitioner](key, num_partitions)


def _checked(key: object, partition_count: object) -> tuple[bytes, int]:
    """confluent-kafka's checks: a bytes-like key (TypeError), an int count (TypeError) above 0 (ValueError)."""
    if isinstance(key, str) or not isinstance(key, (bytes, bytearray, memoryview)):
        raise TypeError(f"key must be bytes, not {type(key).__name__}")
    if not isinstance(partition_count, int) or isinstance(partition_count, bool):
        raise TypeError(f"partition_count must be an integer, not {type(partition_count).__name__}")
    if partition_count <= 0:
        raise ValueError(f"partition_count must be > 0, got {partition_count}")
    return bytes(key), partition_count


def murmur2(key: bytes, partition_count: int) -> int:
    """The partition librdkafka's (and Java's) murmur2 partitioner gives `key`, as confluent_kafka.murmur2."""
    return _murmur2(*_checked(key, partition_count))


def consistent(key: bytes, partition_count: int) -> int:
    """The partition librdkafka's consistent (CRC32) partitioner gives `key`, as confluent_kafka.consistent."""
    return _consistent(*_checked(key, partition_count))


def fnv1a(key: bytes, partition_count: int) -> int:
    """The partition librdkafka's FNV-1a partitioner gives `key`, as confluent_kafka.fnv1a."""
    return _fnv1a(*_checked(key, partition_count))
