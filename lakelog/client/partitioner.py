"""librdkafka's partitioners for a message's key: CRC32 (consistent*), Java's murmur2 (murmur2*), random."""

from __future__ import annotations

import logging
import random
import zlib

logger = logging.getLogger(__name__)


def partition_for(key: bytes | None, num_partitions: int, partitioner: str) -> int:
    """librdkafka's partitioners: CRC32 (consistent*) or Java's murmur2 (murmur2*) of the key; random for null keys (*_random)."""
    if partitioner == "random" or key is None and partitioner.endswith("_random"):
        return random.randrange(num_partitions)
    if partitioner.startswith("murmur2"):
        return (murmur2(key or b"") & 0x7FFFFFFF) % num_partitions
    return zlib.crc32(key or b"") % num_partitions


def murmur2(data: bytes) -> int:
    """Kafka's Java client hash (Utils.murmur2), as a signed 32-bit int."""
    seed, m, r = 0x9747B28C, 0x5BD1E995, 24
    length = len(data)
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h
