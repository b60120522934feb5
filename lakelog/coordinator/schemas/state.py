"""The registry's state replayed from `__schemas`: schemas by id, each subject's versions, compatibility levels.

Ids are global (one schema text, one id, whatever subjects share it) and never reused: a schema's id outlives
its versions, as in confluent's registry. `replay` folds one record in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakelog.coordinator.schemas.records import (
    CompatibilityRecord,
    SchemaLogRecord,
    SchemaVersionRecord,
    VersionsDeletedRecord,
)
from lakelog.coordinator.schemas.types import Schema, canonical_text


@dataclass
class SubjectVersion:
    """One version of a subject: its schema id, and whether it was soft-deleted."""

    schema_id: int
    deleted: bool = False


@dataclass
class RegistryState:
    schemas: dict[int, Schema] = field(default_factory=dict)
    # The id of each schema, by (type, canonical text, references).
    ids: dict[tuple[str, str, tuple[object, ...]], int] = field(default_factory=dict)
    subjects: dict[str, dict[int, SubjectVersion]] = field(default_factory=dict)
    # A subject's own level; the key None is the global one.
    compatibility: dict[str | None, str] = field(default_factory=dict)

    def next_id(self) -> int:
        return max(self.schemas, default=0) + 1

    def id_of(self, schema: Schema) -> int | None:
        return self.ids.get(identity(schema))

    def live_versions(self, subject: str) -> dict[int, SubjectVersion]:
        """The subject's versions not soft-deleted, in version order."""
        versions = self.subjects.get(subject, {})
        return {version: entry for version, entry in sorted(versions.items()) if not entry.deleted}


def identity(schema: Schema) -> tuple[str, str, tuple[object, ...]]:
    return (schema.schema_type, canonical_text(schema), tuple((r.name, r.subject, r.version) for r in schema.references))


def replay(state: RegistryState, record: SchemaLogRecord) -> RegistryState:
    if isinstance(record, SchemaVersionRecord):
        state.schemas.setdefault(record.schema_id, record.schema)
        state.ids.setdefault(identity(record.schema), record.schema_id)
        state.subjects.setdefault(record.subject, {})[record.version] = SubjectVersion(record.schema_id)
    elif isinstance(record, VersionsDeletedRecord):
        versions = state.subjects.get(record.subject, {})
        for version in record.versions:
            if record.permanent:
                versions.pop(version, None)
            elif version in versions:
                versions[version].deleted = True
        if not versions:
            state.subjects.pop(record.subject, None)
    elif isinstance(record, CompatibilityRecord):
        if record.level is None:
            state.compatibility.pop(record.subject, None)
        else:
            state.compatibility[record.subject] = record.level
    return state
