"""Java's `String.hashCode()` and Kafka's `Utils.abs`: where a key's coordinator partition is (S4, S6)."""

from __future__ import annotations


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()`: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    data = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(data), 2):
        value = (31 * value + (data[index] << 8 | data[index + 1])) & 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def java_abs(value: int) -> int:
    """Kafka's `Utils.abs`: Integer.MIN_VALUE maps to 0 rather than overflowing."""
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return 0 if value == -(2**31) else abs(value)


def partition_for_key(key: str, num_partitions: int) -> int:
    """The coordinator partition of a transactional.id or group id: `Utils.abs(key.hashCode) % n`."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, not {num_partitions}")
    return java_abs(java_string_hash(key)) % num_partitions
