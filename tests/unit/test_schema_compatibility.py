"""The registry's compatibility rules, pure: Avro resolution, JSON Schema, the levels and their transitive forms."""

from __future__ import annotations

import json

import pytest

from lakelog.coordinator.schemas.compatibility import avro, incompatibilities, json_schema, parse_schema
from lakelog.coordinator.schemas.types import CompatibilityLevel, Schema, SchemaRegistryError


def avro_reads(reader: object, writer: object) -> bool:
    return not avro.incompatibilities(avro.parse(json.dumps(reader)), avro.parse(json.dumps(writer)))


def json_reads(reader: object, writer: object) -> bool:
    return not json_schema.incompatibilities(reader, writer)


def record(*fields: dict, name: str = "R") -> dict:
    return {"type": "record", "name": name, "fields": list(fields)}


def test_avro_promotions_one_way():
    assert avro_reads("long", "int") and avro_reads("double", "float") and avro_reads("bytes", "string")
    assert not avro_reads("int", "long") and not avro_reads("boolean", "int")


def test_avro_records_by_field_name_default_and_alias():
    writer = record({"name": "a", "type": "int"})
    assert avro_reads(record({"name": "a", "type": "long"}), writer)
    assert not avro_reads(record({"name": "a", "type": "int"}, {"name": "b", "type": "int"}), writer)
    assert avro_reads(record({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}), writer)
    assert avro_reads(record({"name": "z", "type": "int", "aliases": ["a"]}), writer)
    assert not avro_reads(record({"name": "a", "type": "int"}, name="Other"), writer)


def test_avro_unions_enums_and_recursion():
    assert avro_reads(["null", "string"], "string") and not avro_reads("string", ["null", "string"])
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    assert avro_reads(enum, {**enum, "symbols": ["A"]}) and not avro_reads({**enum, "symbols": ["A"]}, enum)
    assert avro_reads({**enum, "symbols": ["A"], "default": "A"}, enum)
    node = record({"name": "next", "type": ["null", "R"]}, {"name": "v", "type": "int"})
    assert avro_reads(node, node)


def test_json_types_required_and_closed_content():
    assert json_reads({"type": "number"}, {"type": "integer"}) and not json_reads({"type": "integer"}, {"type": "number"})
    writer = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    assert not json_reads({**writer, "required": ["a"]}, writer)
    assert json_reads({**writer, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}, writer)
    # An open writer may have written `b` with any value: a reader typing it refuses some of those documents.
    assert not json_reads({"type": "object", "properties": {"b": {"type": "integer"}}}, {"type": "object"})
    assert not json_reads({"type": "object", "additionalProperties": False}, writer)
    assert json_reads({"enum": ["x", "y"]}, {"enum": ["x"]}) and not json_reads({"enum": ["x"]}, {"type": "string"})
    assert not json_reads({"type": "string", "maxLength": 3}, {"type": "string", "maxLength": 5})


def test_levels_latest_versus_every_version():
    v1 = Schema(json.dumps(record({"name": "a", "type": "int"})))
    v2 = Schema(json.dumps(record({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0})))
    # Reads v2's data but not v1's: b has no default now.
    v3 = Schema(json.dumps(record({"name": "b", "type": "int"})))
    none = lambda schema: []  # noqa: E731
    assert not incompatibilities(CompatibilityLevel.BACKWARD, v3, [v1, v2], none)
    assert incompatibilities(CompatibilityLevel.BACKWARD_TRANSITIVE, v3, [v1, v2], none)
    assert incompatibilities(CompatibilityLevel.FORWARD, v1, [v3], none)
    assert incompatibilities(CompatibilityLevel.FULL, v3, [v2], none)
    assert not incompatibilities(CompatibilityLevel.NONE, v3, [v1], none)


def test_a_schema_that_does_not_parse_is_42201():
    for schema in (Schema('{"type": "nope"}'), Schema("[1", "JSON"), Schema("message M {}", "PROTOBUF"), Schema("{}", "XML")):
        with pytest.raises(SchemaRegistryError) as raised:
            parse_schema(schema, lambda s: [])
        assert raised.value.error_code == 42201
