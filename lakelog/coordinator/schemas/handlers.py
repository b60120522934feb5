"""The registry's pure handlers: `(state, request) -> RegistryOutcome`, records to append and an answer.

A registration that finds its schema already a live version of the subject answers that version with no
record; a new schema takes the id its text already has anywhere in the root, else the next id; the subject's
next version follows every version it ever had. Because `CoordinatorLog.run` appends at exactly the offset the
state was replayed to, two processes registering at once cannot both take an id: the loser replays the winner's
row and decides again, finding the schema (one id) or the next free id. A refusal carries no record (S8.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.schemas.compatibility import incompatibilities, parse_schema
from lakelog.coordinator.schemas.records import (
    CompatibilityRecord,
    SchemaLogRecord,
    SchemaVersionRecord,
    VersionsDeletedRecord,
)
from lakelog.coordinator.schemas.state import RegistryState
from lakelog.coordinator.schemas.types import (
    DEFAULT_COMPATIBILITY,
    CompatibilityLevel,
    RegisteredSchema,
    Schema,
    SchemaRegistryError,
    registry_error,
    schema_guid,
)


@dataclass(frozen=True)
class RegistryOutcome:
    """Records to append in one commit, then the answer or the error."""

    records: tuple[SchemaLogRecord, ...] = ()
    response: Any = None
    error: SchemaRegistryError | None = None


def _refuse(code: int, message: str) -> RegistryOutcome:
    return RegistryOutcome(error=registry_error(code, message))


def level_of(state: RegistryState, subject: str | None) -> CompatibilityLevel:
    """The level a subject is held to: its own, else the global one, else BACKWARD."""
    level = state.compatibility.get(subject) or state.compatibility.get(None)
    return CompatibilityLevel(level) if level else DEFAULT_COMPATIBILITY


def references_of(state: RegistryState, schema: Schema) -> list[Schema]:
    """The schemas `schema` references, recursively, dependencies first; INVALID_SCHEMA for one not registered."""
    found: list[Schema] = []
    for reference in schema.references:
        entry = state.subjects.get(reference.subject, {}).get(reference.version)
        if entry is None:
            raise registry_error(
                SchemaRegistryError.INVALID_SCHEMA,
                f"Invalid schema: reference {reference.name} to {reference.subject} version {reference.version} not found",
            )
        referenced = state.schemas[entry.schema_id]
        found += references_of(state, referenced) + [referenced]
    return found


def check(state: RegistryState, subject: str, schema: Schema, against: Sequence[Schema] | None = None) -> list[str]:
    """Why `schema` breaks the subject's level against `against` (default: its live versions); raises for a bad schema."""
    if against is None:
        against = [state.schemas[entry.schema_id] for entry in state.live_versions(subject).values()]
    parse_schema(schema, lambda s: references_of(state, s))
    return incompatibilities(level_of(state, subject), schema, against, lambda s: references_of(state, s))


def register(state: RegistryState, subject: str, schema: Schema) -> RegistryOutcome:
    """Register `schema` under `subject`: its RegisteredSchema, or 409 if it breaks the subject's level."""
    if not isinstance(subject, str) or not subject:
        return _refuse(SchemaRegistryError.INVALID_SCHEMA, f"a subject is a non-empty string, not {subject!r}")
    schema_id = state.id_of(schema)
    for version, entry in state.live_versions(subject).items():
        if entry.schema_id == schema_id:
            return RegistryOutcome(response=_registered(state, subject, version, entry.schema_id))
    try:
        problems = check(state, subject, schema)
    except SchemaRegistryError as error:
        return RegistryOutcome(error=error)
    if problems:
        return _refuse(
            SchemaRegistryError.INCOMPATIBLE_SCHEMA,
            f"Schema being registered is incompatible with an earlier schema for subject {subject!r}: " + "; ".join(problems),
        )
    new_id = state.next_id() if schema_id is None else schema_id
    version = max(state.subjects.get(subject, {}), default=0) + 1
    record = SchemaVersionRecord(subject, version, new_id, schema)
    return RegistryOutcome((record,), RegisteredSchema(new_id, schema, subject, version, schema_guid(schema)))


def _registered(state: RegistryState, subject: str, version: int, schema_id: int) -> RegisteredSchema:
    schema = state.schemas[schema_id]
    return RegisteredSchema(schema_id, schema, subject, version, schema_guid(schema))


def delete_subject(state: RegistryState, subject: str, permanent: bool) -> RegistryOutcome:
    """Soft-delete a subject's live versions, or remove a soft-deleted subject for good; the versions deleted."""
    versions = state.subjects.get(subject)
    if not versions:
        return _refuse(SchemaRegistryError.SUBJECT_NOT_FOUND, f"Subject {subject!r} not found")
    live = list(state.live_versions(subject))
    if permanent:
        if live:
            return _refuse(
                SchemaRegistryError.SUBJECT_NOT_SOFT_DELETED,
                f"Subject {subject!r} was not deleted first before being permanently deleted",
            )
        every = sorted(versions)
        return RegistryOutcome((VersionsDeletedRecord(subject, tuple(every), True),), every)
    if not live:
        return _refuse(SchemaRegistryError.SUBJECT_SOFT_DELETED, f"Subject {subject!r} was soft deleted")
    return RegistryOutcome((VersionsDeletedRecord(subject, tuple(live), False),), live)


def delete_version(state: RegistryState, subject: str, version: int, permanent: bool) -> RegistryOutcome:
    """Soft-delete one version, or remove a soft-deleted one for good; the version deleted."""
    versions = state.subjects.get(subject)
    if not versions:
        return _refuse(SchemaRegistryError.SUBJECT_NOT_FOUND, f"Subject {subject!r} not found")
    if version == -1 and state.live_versions(subject):
        version = max(state.live_versions(subject))
    entry = versions.get(version)
    if entry is None:
        return _refuse(SchemaRegistryError.VERSION_NOT_FOUND, f"Version {version} not found")
    if permanent and not entry.deleted:
        return _refuse(
            SchemaRegistryError.VERSION_NOT_SOFT_DELETED,
            f"Subject {subject!r} version {version} was not deleted first before being permanently deleted",
        )
    if not permanent and entry.deleted:
        return _refuse(SchemaRegistryError.VERSION_SOFT_DELETED, f"Subject {subject!r} version {version} was soft deleted")
    return RegistryOutcome((VersionsDeletedRecord(subject, (version,), permanent),), version)


def set_compatibility(state: RegistryState, subject: str | None, level: Any) -> RegistryOutcome:
    """Set the level of a subject (None: the global one); 42203 for a level that is not one."""
    try:
        chosen = CompatibilityLevel(level.upper() if isinstance(level, str) else level)
    except ValueError:
        return _refuse(SchemaRegistryError.INVALID_COMPATIBILITY_LEVEL, f"Invalid compatibility level {level!r}")
    if state.compatibility.get(subject) == chosen.value:
        return RegistryOutcome(response=chosen.value)
    return RegistryOutcome((CompatibilityRecord(subject, chosen.value),), chosen.value)
