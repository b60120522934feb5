"""Arrow schemas to Delta's `schemaString` and back (PROTOCOL.md, "Schema Serialization Format").

The conversion is the one delta-rs applies, so a table lakelog creates has the
schema delta-rs would have given it, and `Table.schema` is the Arrow schema
delta-rs's `schema().to_arrow()` returned for the same table: unsigned integers
are stored as the signed type of their width, large and view variants as the
plain type, timestamps with a UTC zone as `timestamp` and without a zone as
`timestamp_ntz` (both read back in microseconds), lists read back with items
named `element`.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pyarrow as pa

logger = logging.getLogger(__name__)

_PRIMITIVE_TO_DELTA = [
    (pa.types.is_boolean, "boolean"),
    (lambda t: pa.types.is_int8(t) or pa.types.is_uint8(t), "byte"),
    (lambda t: pa.types.is_int16(t) or pa.types.is_uint16(t), "short"),
    (lambda t: pa.types.is_int32(t) or pa.types.is_uint32(t), "integer"),
    (lambda t: pa.types.is_int64(t) or pa.types.is_uint64(t), "long"),
    (pa.types.is_float32, "float"),
    (pa.types.is_float64, "double"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t), "string"),
    (
        lambda t: (
            pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t)
        ),
        "binary",
    ),
    (pa.types.is_date, "date"),
    (pa.types.is_null, "void"),
]

_DELTA_TO_ARROW = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "timestamp_nanos_ntz": pa.timestamp("ns"),
    "void": pa.null(),
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


class UnsupportedSchema(ValueError):
    """An Arrow type Delta has no type for (a timestamp in seconds or in a zone other than UTC, a union...)."""


def schema_string(schema: pa.Schema) -> str:
    """The Delta `schemaString` of an Arrow schema."""
    return json.dumps({"type": "struct", "fields": [_field_to_delta(field) for field in schema]}, separators=(",", ":"))


def arrow_schema(text: str) -> pa.Schema:
    """The Arrow schema of a Delta `schemaString`."""
    struct = json.loads(text)
    return pa.schema([_field_to_arrow(field) for field in struct["fields"]])


def _field_to_delta(field: pa.Field) -> dict[str, Any]:
    metadata = {key.decode(): value.decode() for key, value in (field.metadata or {}).items()}
    return {"name": field.name, "type": _type_to_delta(field.type), "nullable": field.nullable, "metadata": metadata}


def _type_to_delta(data_type: pa.DataType) -> Any:
    for test, name in _PRIMITIVE_TO_DELTA:
        if test(data_type):
            return name
    if pa.types.is_timestamp(data_type):
        if data_type.unit == "s" or data_type.tz not in (None, "UTC", "+00:00", "Etc/UTC"):
            raise UnsupportedSchema(f"Delta has no type for {data_type}")
        if data_type.tz is not None:
            return "timestamp"
        return "timestamp_nanos_ntz" if data_type.unit == "ns" else "timestamp_ntz"
    if pa.types.is_decimal(data_type):
        return f"decimal({data_type.precision},{data_type.scale})"
    if pa.types.is_map(data_type):
        return {
            "type": "map",
            "keyType": _type_to_delta(data_type.key_type),
            "valueType": _type_to_delta(data_type.item_type),
            "valueContainsNull": data_type.item_field.nullable,
        }
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return {
            "type": "array",
            "elementType": _type_to_delta(data_type.value_type),
            "containsNull": data_type.value_field.nullable,
        }
    if pa.types.is_list_view(data_type) or pa.types.is_large_list_view(data_type):
        return {
            "type": "array",
            "elementType": _type_to_delta(data_type.value_type),
            "containsNull": data_type.value_field.nullable,
        }
    if pa.types.is_struct(data_type):
        return {"type": "struct", "fields": [_field_to_delta(data_type.field(i)) for i in range(data_type.num_fields)]}
    if pa.types.is_dictionary(data_type):
        return _type_to_delta(data_type.value_type)
    raise UnsupportedSchema(f"Delta has no type for {data_type}")


def _field_to_arrow(field: dict[str, Any]) -> pa.Field:
    metadata = field.get("metadata") or {}
    text = {key: value if isinstance(value, str) else json.dumps(value) for key, value in metadata.items()}
    return pa.field(field["name"], _type_to_arrow(field["type"]), field.get("nullable", True), metadata=text or None)


def _type_to_arrow(data_type: Any) -> pa.DataType:
    if isinstance(data_type, str):
        if data_type in _DELTA_TO_ARROW:
            return _DELTA_TO_ARROW[data_type]
        match = _DECIMAL.match(data_type)
        if match:
            return pa.decimal128(int(match.group(1)), int(match.group(2)))
        raise UnsupportedSchema(f"unknown Delta type {data_type!r}")
    kind = data_type.get("type")
    if kind == "array":
        element = pa.field("element", _type_to_arrow(data_type["elementType"]), data_type.get("containsNull", True))
        return pa.list_(element)
    if kind == "map":
        key = pa.field("key", _type_to_arrow(data_type["keyType"]), False)
        value = pa.field("value", _type_to_arrow(data_type["valueType"]), data_type.get("valueContainsNull", True))
        return pa.map_(key, value)
    if kind == "struct":
        return pa.struct([_field_to_arrow(field) for field in data_type["fields"]])
    raise UnsupportedSchema(f"unknown Delta type {data_type!r}")


__all__ = ["UnsupportedSchema", "arrow_schema", "schema_string"]
