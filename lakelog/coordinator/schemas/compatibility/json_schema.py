"""JSON Schema compatibility: does every document the writer's schema accepts pass the reader's?

A sound subset of confluent's rules, on each (sub)schema: the reader's types include the writer's (`integer` is a
`number`); an object's reader requires no property the writer did not require; a property both declare is compared
again; a property the writer declares is refused by a reader closed to it (`additionalProperties: false`); a
reader's `enum` holds the writer's values; a string's, number's or array's reader bounds are no tighter; an array's
items are compared again. A `true`/absent schema accepts everything; `false` nothing. `$ref`s inside one document
are followed; keywords lakelog does not model (`oneOf`, `pattern`, ...) compare as equal-or-refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

TYPES = {"null", "boolean", "object", "array", "number", "integer", "string"}
_UNMODELLED = ("oneOf", "anyOf", "allOf", "not", "pattern", "patternProperties", "if", "then", "else", "const", "format")
_LOWER_BOUNDS = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_UPPER_BOUNDS = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")


class JsonSchemaError(ValueError):
    """A document that is not a JSON Schema."""


def parse(text: str) -> Any:
    """The schema document of `text`: an object or a boolean."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise JsonSchemaError(f"not JSON: {error}") from None
    if not isinstance(document, (Mapping, bool)):
        raise JsonSchemaError(f"a JSON Schema is an object or a boolean, not {type(document).__name__}")
    return document


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why documents valid for `writer` may fail `reader`; empty if every one passes."""
    problems: list[str] = []
    _check(reader, reader, writer, writer, "#", problems, 0)
    return problems


def _deref(schema: Any, root: Any) -> Any:
    for _ in range(32):
        if not (isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#")):
            return schema
        node = root
        for part in schema["$ref"][1:].split("/")[1:]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        schema = node
    return schema


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if declared is None:
        return set(TYPES)
    types = {declared} if isinstance(declared, str) else set(declared)
    if "number" in types:
        types.add("integer")
    return types


def _check(reader: Any, r_root: Any, writer: Any, w_root: Any, path: str, problems: list[str], depth: int) -> None:
    if depth > 64:
        return  # a recursive schema compared as far as any document nests
    reader, writer = _deref(reader, r_root), _deref(writer, w_root)
    if reader is True or reader == {} or writer is False:
        return
    if reader is False:
        problems.append(f"{path}: the reader accepts nothing")
        return
    if writer is True:
        writer = {}
    for keyword in _UNMODELLED:
        if reader.get(keyword) != writer.get(keyword) and keyword in reader:
            problems.append(f"{path}: the reader's {keyword} differs from the writer's")
    missing_types = _types(writer) - _types(reader)
    if missing_types:
        problems.append(f"{path}: the reader does not accept the writer's types {sorted(missing_types)}")
    if "enum" in reader:
        values = writer.get("enum")
        if values is None or any(value not in reader["enum"] for value in values):
            problems.append(f"{path}: the reader's enum does not hold every value the writer accepts")
    for keyword in _LOWER_BOUNDS:
        if keyword in reader and (keyword not in writer or writer[keyword] < reader[keyword]):
            problems.append(f"{path}: the reader's {keyword} is tighter than the writer's")
    for keyword in _UPPER_BOUNDS:
        if keyword in reader and (keyword not in writer or writer[keyword] > reader[keyword]):
            problems.append(f"{path}: the reader's {keyword} is tighter than the writer's")
    _check_object(reader, r_root, writer, w_root, path, problems, depth)
    if "items" in reader or "items" in writer:
        _check(reader.get("items", True), r_root, writer.get("items", True), w_root, f"{path}/items", problems, depth + 1)


def _check_object(reader: Any, r_root: Any, writer: Any, w_root: Any, path: str, problems: list[str], depth: int) -> None:
    newly_required = set(reader.get("required", [])) - set(writer.get("required", []))
    if newly_required:
        problems.append(f"{path}: the reader requires {sorted(newly_required)}, which the writer does not")
    r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
    r_extra = reader.get("additionalProperties", True)
    for name, w_prop in w_props.items():
        if name in r_props:
            _check(r_props[name], r_root, w_prop, w_root, f"{path}/properties/{name}", problems, depth + 1)
        elif r_extra is False:
            problems.append(f"{path}/properties/{name}: the reader is closed to the writer's property")
        elif isinstance(r_extra, Mapping):
            _check(r_extra, r_root, w_prop, w_root, f"{path}/properties/{name}", problems, depth + 1)
    w_extra = writer.get("additionalProperties", True)
    for name, r_prop in r_props.items():
        if name not in w_props and w_extra is not False:
            # The writer's open content model may hold this property with any value.
            _check(r_prop, r_root, w_extra, w_root, f"{path}/properties/{name}", problems, depth + 1)
