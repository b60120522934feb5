"""Compatibility of a new schema with a subject's versions under the subject's level.

BACKWARD: the new schema reads data written with the latest version; FORWARD: the latest reads the new one's;
FULL: both; the _TRANSITIVE forms hold the new schema to every live version, not only the latest; NONE checks
nothing. `parse_schema` checks a schema's text (SchemaRegistryError 42201 if it is not of its type).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lakelog.coordinator.schemas.compatibility import avro, json_schema, protobuf
from lakelog.coordinator.schemas.types import (
    AVRO,
    JSON,
    PROTOBUF,
    CompatibilityLevel,
    Schema,
    SchemaRegistryError,
    registry_error,
)

# Resolves a schema's references: the referenced schemas, each already registered.
References = Callable[[Schema], Sequence[Schema]]


def parse_schema(schema: Schema, references: References) -> Any:
    """The parsed form the compatibility rules compare; SchemaRegistryError INVALID_SCHEMA if it does not parse."""
    try:
        if schema.schema_type == AVRO:
            named = avro.Named()
            for referenced in references(schema):
                _, named = avro.parse(referenced.schema_str, named)
            return avro.parse(schema.schema_str, named)
        if schema.schema_type == JSON:
            return json_schema.parse(schema.schema_str)
        if schema.schema_type == PROTOBUF:
            return protobuf.parse(schema.schema_str)
    except (avro.AvroSchemaError, json_schema.JsonSchemaError, protobuf.ProtobufSchemaError, KeyError, TypeError) as error:
        raise registry_error(SchemaRegistryError.INVALID_SCHEMA, f"Invalid {schema.schema_type} schema: {error}") from None
    raise registry_error(SchemaRegistryError.INVALID_SCHEMA, f"Unknown schema type {schema.schema_type!r}")


def _reads(schema_type: str, reader: Any, writer: Any) -> list[str]:
    if schema_type == AVRO:
        return avro.incompatibilities(reader, writer)
    if schema_type == JSON:
        return json_schema.incompatibilities(reader, writer)
    return protobuf.incompatibilities(reader, writer)


def incompatibilities(level: CompatibilityLevel, new: Schema, existing: Sequence[Schema], references: References) -> list[str]:
    """Why `new` breaks `level` against `existing` (the subject's live versions, oldest first); empty if it keeps it."""
    if level == CompatibilityLevel.NONE or not existing:
        return []
    transitive = level.value.endswith("_TRANSITIVE")
    against = list(existing) if transitive else [existing[-1]]
    base = level.value.removesuffix("_TRANSITIVE")
    parsed_new = parse_schema(new, references)
    problems: list[str] = []
    for old in against:
        if old.schema_type != new.schema_type:
            problems.append(f"the schema type changed from {old.schema_type} to {new.schema_type}")
            continue
        parsed_old = parse_schema(old, references)
        if base in ("BACKWARD", "FULL"):
            problems += [f"BACKWARD: {why}" for why in _reads(new.schema_type, parsed_new, parsed_old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"FORWARD: {why}" for why in _reads(new.schema_type, parsed_old, parsed_new)]
    return problems
