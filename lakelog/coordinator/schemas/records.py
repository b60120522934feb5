"""The records of `__schemas` and their codecs: a subject's version, versions deleted, a compatibility level.

A record is one row: key = its subject (the global config's key is empty), value = its fields as JSON with its
`kind` and the codec's version `"v"` (lakelog.coordinator.runtime.record_codec); a row of any other shape is
`CorruptRecord`. Confluent's registry keeps the same three kinds in its `_schemas` topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.runtime.record_codec import RecordCodec, flag, integer, optional_text, sequence, text
from lakelog.coordinator.schemas.types import Schema, SchemaReference
from lakelog.errors import CorruptRecord

SCHEMA_RECORD_VERSION = 1


@dataclass(frozen=True)
class SchemaVersionRecord:
    """`schema` registered under `subject` as `version`, with the id `schema_id`."""

    subject: str
    version: int
    schema_id: int
    schema: Schema

    @property
    def key(self) -> str:
        return self.subject

    def to_row(self) -> dict[str, Any]:
        return _SCHEMA_CODEC.encode(self)


@dataclass(frozen=True)
class VersionsDeletedRecord:
    """Versions of a subject deleted: soft (hidden, kept) or permanent (gone; only a soft-deleted one may go)."""

    subject: str
    versions: tuple[int, ...]
    permanent: bool

    @property
    def key(self) -> str:
        return self.subject

    def to_row(self) -> dict[str, Any]:
        return _DELETED_CODEC.encode(self)


@dataclass(frozen=True)
class CompatibilityRecord:
    """The compatibility level of a subject (None: the global one); a None level removes the subject's own."""

    subject: str | None
    level: str | None

    @property
    def key(self) -> str:
        return self.subject or ""

    def to_row(self) -> dict[str, Any]:
        return _CONFIG_CODEC.encode(self)


SchemaLogRecord = SchemaVersionRecord | VersionsDeletedRecord | CompatibilityRecord


def _schema_fields(record: SchemaVersionRecord) -> dict[str, Any]:
    return {
        "kind": "schema",
        "subject": record.subject,
        "version": record.version,
        "id": record.schema_id,
        "type": record.schema.schema_type,
        "schema": record.schema.schema_str,
        "references": [reference.to_dict() for reference in record.schema.references],
    }


def _schema_build(row: Mapping[str, Any]) -> SchemaVersionRecord:
    references = tuple(
        SchemaReference(text(item, "name"), text(item, "subject"), integer(item, "version"))
        for item in sequence(row, "references")
    )
    schema = Schema(text(row, "schema"), text(row, "type"), references)
    return SchemaVersionRecord(text(row, "subject"), integer(row, "version"), integer(row, "id"), schema)


def _deleted_build(row: Mapping[str, Any]) -> VersionsDeletedRecord:
    versions = tuple(int(version) for version in sequence(row, "versions"))
    return VersionsDeletedRecord(text(row, "subject"), versions, flag(row, "permanent"))


def _config_build(row: Mapping[str, Any]) -> CompatibilityRecord:
    return CompatibilityRecord(optional_text(row, "subject"), optional_text(row, "level"))


_SCHEMA_CODEC = RecordCodec("schema", SCHEMA_RECORD_VERSION, _schema_fields, _schema_build)
_DELETED_CODEC = RecordCodec(
    "deleted",
    SCHEMA_RECORD_VERSION,
    lambda record: {
        "kind": "deleted",
        "subject": record.subject,
        "versions": list(record.versions),
        "permanent": record.permanent,
    },
    _deleted_build,
)
_CONFIG_CODEC = RecordCodec(
    "config",
    SCHEMA_RECORD_VERSION,
    lambda record: {"kind": "config", "subject": record.subject, "level": record.level},
    _config_build,
)
_CODECS: dict[str, RecordCodec[Any]] = {"schema": _SCHEMA_CODEC, "deleted": _DELETED_CODEC, "config": _CONFIG_CODEC}


def record_from_row(row: Any) -> SchemaLogRecord:
    """The record of a stored row; CorruptRecord if it is none of the three kinds."""
    kind = row.get("kind") if isinstance(row, Mapping) else None
    codec = _CODECS.get(kind) if isinstance(kind, str) else None
    if codec is None:
        raise CorruptRecord(f"not a __schemas record (kind {kind!r})", reason="unknown kind")
    record: SchemaLogRecord = codec.decode(row)
    return record
