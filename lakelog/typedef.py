"""Shapes shared across the layers, defined once."""

from __future__ import annotations

# A partition as the coordinators and the client's internals key it: (topic, partition).
TopicPartitionKey = tuple[str, int]
