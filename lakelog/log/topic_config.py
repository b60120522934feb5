"""A topic's config, stored in every partition table's Delta configuration.

Keeping it in the partition's own table means an append is decided on the same
snapshot that holds the config it obeys (`check.expected.offsets` among them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog import config

PREFIX = "lakelog.topic."


@dataclass(frozen=True)
class TopicConfig:
    """Validated topic config (see lakelog/conf/topic.properties)."""

    values: Mapping[str, Any]

    @classmethod
    def load(cls, overrides: Mapping[str, Any] | None = None) -> TopicConfig:
        return cls(dict(config.load("topic", overrides)))

    @classmethod
    def from_table_configuration(cls, configuration: Mapping[str, str | None]) -> TopicConfig:
        stored = {key[len(PREFIX):]: value for key, value in configuration.items() if key.startswith(PREFIX)}
        return cls.load(stored)

    def table_configuration(self) -> dict[str, str]:
        """Delta table properties: the topic config plus what Delta itself reads from it."""
        stored = {PREFIX + key: _to_text(value) for key, value in self.values.items()}
        stored["delta.checkpointInterval"] = str(self.values["checkpoint.interval.commits"])
        stored["delta.deletedFileRetentionDuration"] = f"interval {self.values['delete.retention.ms'] // 1000} seconds"
        return stored

    @property
    def num_partitions(self) -> int:
        return self.values["num.partitions"]

    @property
    def check_expected_offsets(self) -> bool:
        return self.values["check.expected.offsets"]

    @property
    def producer_id_expiration_ms(self) -> int:
        return self.values["producer.id.expiration.ms"]

    @property
    def segment_files(self) -> int:
        return self.values["segment.files"]

    @property
    def compression_type(self) -> str:
        return self.values["compression.type"]


def _to_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
