"""A topic's config, stored in every partition table's Delta configuration.

Keeping it in the partition's own table means an append is decided on the same
snapshot that holds the config it obeys (`check.expected.offsets` among them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog import config

logger = logging.getLogger(__name__)

PREFIX = "lakelog.topic."
# Keys whose value is a comma-separated list: incremental_alter_configs may APPEND to or SUBTRACT from them.
LIST_KEYS = frozenset({"cleanup.policy"})


@dataclass(frozen=True)
class TopicConfig:
    """Validated topic config (see lakelog/conf/topic.properties)."""

    values: Mapping[str, Any]

    @classmethod
    def load(cls, overrides: Mapping[str, Any] | None = None) -> TopicConfig:
        return cls(dict(config.load("topic", overrides)))

    @classmethod
    def from_table_configuration(cls, configuration: Mapping[str, str | None]) -> TopicConfig:
        stored = {key[len(PREFIX) :]: value for key, value in configuration.items() if key.startswith(PREFIX)}
        return cls.load(stored)

    def table_configuration(self) -> dict[str, str]:
        """Delta table properties: the topic config plus what Delta itself reads from it."""
        stored = {PREFIX + key: _to_text(value) for key, value in self.values.items()}
        stored["delta.checkpointInterval"] = str(self.values["checkpoint.interval.commits"])
        # Removed files stay readable for fetches on older snapshots (file.delete.delay.ms) and compaction's readers.
        grace_ms = max(self.values["delete.retention.ms"], self.values["file.delete.delay.ms"])
        stored["delta.deletedFileRetentionDuration"] = f"interval {grace_ms // 1000} seconds"
        # Commit files older than this (and behind the kept checkpoints) go (maintenance.cleanup_log).
        stored["delta.logRetentionDuration"] = f"interval {self.values['delta.log.retention.ms'] // 1000} seconds"
        return stored

    @property
    def num_partitions(self) -> int:
        return self.values["num.partitions"]

    @property
    def check_expected_offsets(self) -> bool:
        return self.values["check.expected.offsets"]

    @property
    def max_message_bytes(self) -> int:
        """The largest record an append takes (lakelog.log.records.record_sizes counts it); larger is MSG_SIZE_TOO_LARGE."""
        return self.values["max.message.bytes"]

    @property
    def producer_id_expiration_ms(self) -> int:
        return self.values["producer.id.expiration.ms"]

    @property
    def segment_files(self) -> int:
        return self.values["segment.files"]

    @property
    def compression_type(self) -> str:
        return self.values["compression.type"]

    @property
    def retention_ms(self) -> int:
        """Records older than this may be deleted (S9.1); -1: no time limit."""
        return self.values["retention.ms"]

    @property
    def retention_bytes(self) -> int:
        """A partition may be trimmed down to this size (S9.1); -1: no size limit."""
        return self.values["retention.bytes"]

    @property
    def cleanup_policy(self) -> frozenset[str]:
        """`delete`, `compact` or both (S9.1, S9.3)."""
        return frozenset(policy for policy in self.values["cleanup.policy"].split(",") if policy)

    @property
    def deletes(self) -> bool:
        """True if retention applies (cleanup.policy holds delete)."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        """True if the log is compacted by key (cleanup.policy holds compact, S9.3)."""
        return "compact" in self.cleanup_policy


def _to_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
