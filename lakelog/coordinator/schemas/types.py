"""The schema registry's shapes, as confluent-kafka's `schema_registry` names them, and its one error type.

`Schema`, `SchemaReference` and `RegisteredSchema` carry confluent's attribute names, so confluent's serializers
read them unchanged; any object with `schema_str`, `schema_type` and `references` is taken as a schema.
`SchemaRegistryError` has confluent's shape (`http_status_code`, `error_code`, `error_message`) and codes.
"""

from __future__ import annotations

import enum
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)
# The namespace of the guids derived from a schema's content (every process derives the same one).
_GUID_NAMESPACE = uuid.UUID("8b0d1c5e-6a0f-4c55-9e36-0e0c5f3b7a21")


class CompatibilityLevel(enum.Enum):
    """A subject's compatibility level (confluent's names; BACKWARD is the default)."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


DEFAULT_COMPATIBILITY = CompatibilityLevel.BACKWARD


class SchemaRegistryError(Exception):
    """An error of the registry, as confluent's: an HTTP status, a registry error code, a message."""

    UNKNOWN = -1
    SUBJECT_NOT_FOUND = 40401
    VERSION_NOT_FOUND = 40402
    SCHEMA_NOT_FOUND = 40403
    SUBJECT_SOFT_DELETED = 40404
    SUBJECT_NOT_SOFT_DELETED = 40405
    VERSION_SOFT_DELETED = 40406
    VERSION_NOT_SOFT_DELETED = 40407
    SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
    INCOMPATIBLE_SCHEMA = 409
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_COMPATIBILITY_LEVEL = 42203
    STORE_ERROR = 50001
    TIMEOUT = 50002

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return f"{self.error_message} (HTTP status code {self.http_status_code}, SR code {self.error_code})"


def registry_error(error_code: int, message: str) -> SchemaRegistryError:
    """The error of a registry code, with the HTTP status confluent's server answers it with."""
    status = error_code if error_code < 1000 else error_code // 100
    return SchemaRegistryError(status, error_code, message)


@dataclass(frozen=True)
class SchemaReference:
    """A named reference to the schema of `subject` at `version`."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema: its text, its type (AVRO by default) and its references."""

    schema_str: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    # What confluent's Schema carries for its data contracts: a root's registry keeps none.
    metadata: None = field(default=None, compare=False)
    rule_set: None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "references", tuple(self.references or ()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema_str,
            "schemaType": self.schema_type,
            "references": [reference.to_dict() for reference in self.references],
        }


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as registered: its id and guid, and the subject and version it was looked up by."""

    schema_id: int
    schema: Schema
    subject: str | None = None
    version: int | None = None
    guid: str | None = None


def as_schema(schema: Any) -> Schema:
    """Any object with confluent's schema attributes (confluent's own `Schema`, say) as a lakelog `Schema`."""
    if isinstance(schema, Schema):
        return schema
    text = getattr(schema, "schema_str", None)
    if not isinstance(text, str):
        raise registry_error(SchemaRegistryError.INVALID_SCHEMA, f"a schema has a schema_str, not {schema!r}")
    schema_type = getattr(schema, "schema_type", None) or AVRO
    references = tuple(
        SchemaReference(reference.name, reference.subject, int(reference.version))
        for reference in (getattr(schema, "references", None) or ())
    )
    return Schema(text, schema_type, references)


def canonical_text(schema: Schema) -> str:
    """The text two equal schemas share: JSON schemas (Avro, JSON Schema) re-serialized with sorted keys."""
    if schema.schema_type == PROTOBUF:
        return schema.schema_str.strip()
    try:
        return json.dumps(json.loads(schema.schema_str), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return schema.schema_str


def schema_guid(schema: Schema) -> str:
    """The guid of a schema, derived from its type, canonical text and references."""
    references = ",".join(f"{r.name}={r.subject}/{r.version}" for r in schema.references)
    return str(uuid.uuid5(_GUID_NAMESPACE, f"{schema.schema_type}\n{canonical_text(schema)}\n{references}"))
