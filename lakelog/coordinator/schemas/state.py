"""The registry's state replayed from `__schemas`: schemas by id, each subject's versions, compatibility levels.

Ids are global (one schema text, one id, whatever subjects share it) and never reused: a schema's id outlives
its versions, as in confluent's registry. `replay` folds one record in place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lakelog.coordinator.schemas.records import (
    CompatibilityRecord,
    SchemaLogRecord,
    SchemaVersionRecord,
    VersionsDeletedRecord,
)
from lakelog.coordinator.schemas.types import Schema, SchemaReference, canonical_text


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


def snapshot_of(state: RegistryState) -> dict[str, Any]:
    """The state as JSON (a snapshot, and what a compaction plan is checked on)."""
    return {
        "schemas": {str(schema_id): _schema_json(schema) for schema_id, schema in sorted(state.schemas.items())},
        "subjects": {
            subject: {str(version): [entry.schema_id, entry.deleted] for version, entry in sorted(versions.items())}
            for subject, versions in sorted(state.subjects.items())
        },
        "compatibility": {
            subject or "": level for subject, level in sorted(state.compatibility.items(), key=lambda kv: kv[0] or "")
        },
    }


def state_from_snapshot(body: dict[str, Any]) -> RegistryState:
    state = RegistryState()
    for schema_id, fields in body["schemas"].items():
        schema = Schema(fields["schema"], fields["type"], tuple(SchemaReference(*ref) for ref in fields["references"]))
        state.schemas[int(schema_id)] = schema
        state.ids.setdefault(identity(schema), int(schema_id))
    for subject, versions in body["subjects"].items():
        state.subjects[subject] = {int(v): SubjectVersion(entry[0], entry[1]) for v, entry in versions.items()}
    state.compatibility = {subject or None: level for subject, level in body["compatibility"].items()}
    return state


def _schema_json(schema: Schema) -> dict[str, Any]:
    references = [[r.name, r.subject, r.version] for r in schema.references]
    return {"schema": schema.schema_str, "type": schema.schema_type, "references": references}


def live_schema_offsets(entries: Iterable[tuple[int, Any]]) -> set[int]:
    """`__schemas` compacted by key (S9.3): the rows the replayed state needs.

    Kept: the row that gave each schema its id (an id outlives its versions), the row of every version still
    held, the deletions that touch a kept row's version after it, and the last level per subject.
    """
    rows = [(offset, record) for offset, record in entries if not hasattr(record, "control")]
    state = RegistryState()
    introduced: dict[int, int] = {}
    version_row: dict[tuple[str, int], int] = {}
    levels: dict[str | None, int] = {}
    for offset, record in rows:
        if isinstance(record, SchemaVersionRecord):
            introduced.setdefault(record.schema_id, offset)
            version_row[(record.subject, record.version)] = offset
        elif isinstance(record, CompatibilityRecord):
            levels[record.subject] = offset
        replay(state, record)
    kept = set(introduced.values()) | set(levels.values())
    kept |= {version_row[(subject, version)] for subject, versions in state.subjects.items() for version in versions}
    kept_versions: dict[tuple[str, int], list[int]] = {}
    for offset, record in rows:
        if isinstance(record, SchemaVersionRecord) and offset in kept:
            kept_versions.setdefault((record.subject, record.version), []).append(offset)
    for offset, record in rows:
        if isinstance(record, VersionsDeletedRecord) and any(
            any(at < offset for at in kept_versions.get((record.subject, version), [])) for version in record.versions
        ):
            kept.add(offset)
    return kept
