"""Avro schema resolution as the Avro specification states it: can a reader schema read what a writer wrote?

`parse` checks a schema and names its named types (records, enums, fixed) by full name, with the named types of
its references; `incompatibilities(reader, writer)` lists why the reader cannot read the writer's data (empty:
it can). Rules: promotions int->long/float/double, long->float/double, float->double, string<->bytes; a writer's
union is read if each branch is; a reader's union reads a writer if one branch does; a record reads by field name
(or alias), a reader's field missing from the writer needs a default; an enum's writer symbols are the reader's,
or the reader has a default; fixed sizes and named types' names match.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class AvroSchemaError(ValueError):
    """A schema that is not Avro."""


class Named:
    """The named types of one schema and the schemas it references, by full name."""

    def __init__(self, types: Mapping[str, Any] | None = None) -> None:
        self.types: dict[str, Any] = dict(types or {})


def parse(text: str, referenced: Named | None = None) -> tuple[Any, Named]:
    """The schema of `text`, normalized (full names, explicit types), and its named types with `referenced`'s."""
    try:
        raw = json.loads(text)
    except ValueError:
        raw = text  # a bare name: "string", or a named type of a reference
    named = Named(referenced.types if referenced else None)
    return _normalize(raw, None, named), named


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _normalize(schema: Any, namespace: str | None, named: Named) -> Any:
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema
        name = schema if schema in named.types else _full_name(schema, namespace)
        if name not in named.types:
            raise AvroSchemaError(f"unknown type {schema!r}")
        return {"ref": name}
    if isinstance(schema, list):
        return {"type": "union", "branches": [_normalize(branch, namespace, named) for branch in schema]}
    if not isinstance(schema, Mapping) or "type" not in schema:
        raise AvroSchemaError(f"not an Avro schema: {schema!r}")
    kind = schema["type"]
    if kind in PRIMITIVES:
        return kind  # logical types read as their underlying type
    if kind in ("record", "error", "enum", "fixed"):
        if not isinstance(schema.get("name"), str):
            raise AvroSchemaError(f"a {kind} needs a name")
        full = _full_name(schema["name"], schema.get("namespace", namespace))
        space = full.rpartition(".")[0] or None
        aliases = {_full_name(alias, space) for alias in schema.get("aliases", [])}
        node: dict[str, Any] = {"type": "record" if kind == "error" else kind, "name": full, "aliases": aliases}
        named.types[full] = node
        if kind == "enum":
            node["symbols"] = list(schema.get("symbols", []))
            node["default"] = schema.get("default")
        elif kind == "fixed":
            node["size"] = schema.get("size")
        else:
            if not isinstance(schema.get("fields"), list):
                raise AvroSchemaError(f"record {full} needs a list of fields")
            node["fields"] = [
                {
                    "name": item["name"],
                    "aliases": set(item.get("aliases", [])),
                    "type": _normalize(item["type"], space, named),
                    "has_default": "default" in item,
                }
                for item in schema["fields"]
            ]
        return {"ref": full}
    if kind == "array":
        return {"type": "array", "items": _normalize(schema.get("items"), namespace, named)}
    if kind == "map":
        return {"type": "map", "values": _normalize(schema.get("values"), namespace, named)}
    if isinstance(kind, (str, list, Mapping)):
        return _normalize(kind, namespace, named)  # {"type": <a name, a union or a schema>}
    raise AvroSchemaError(f"unknown type {kind!r}")


def incompatibilities(reader: tuple[Any, Named], writer: tuple[Any, Named]) -> list[str]:
    """Why `reader` cannot read data written with `writer` (each as `parse` returns it); empty if it can."""
    problems: list[str] = []
    _check(reader[0], reader[1], writer[0], writer[1], "/", problems, set())
    return problems


def _resolve(schema: Any, named: Named) -> Any:
    return named.types[schema["ref"]] if isinstance(schema, dict) and "ref" in schema else schema


def _kind(schema: Any) -> str:
    return schema if isinstance(schema, str) else str(schema["type"])


def _check(reader: Any, r_named: Named, writer: Any, w_named: Named, path: str, problems: list[str], seen: set[Any]) -> None:
    pair = (json.dumps(reader, default=str, sort_keys=True), json.dumps(writer, default=str, sort_keys=True))
    if pair in seen:
        return  # a recursive type already being compared
    seen.add(pair)
    r, w = _resolve(reader, r_named), _resolve(writer, w_named)
    r_kind, w_kind = _kind(r), _kind(w)
    if w_kind == "union":
        for index, branch in enumerate(w["branches"]):
            _check(reader, r_named, branch, w_named, f"{path}{index}/", problems, seen)
        return
    if r_kind == "union":
        for branch in r["branches"]:
            attempt: list[str] = []
            _check(branch, r_named, writer, w_named, path, attempt, seen)
            if not attempt:
                return
        problems.append(f"{path}: the reader's union has no branch for the writer's {w_kind}")
        return
    if r_kind != w_kind:
        if w_kind in PROMOTIONS and r_kind in PROMOTIONS[w_kind]:
            return
        problems.append(f"{path}: the reader's type {r_kind} does not read the writer's {w_kind}")
        return
    if r_kind in ("record", "enum", "fixed") and r["name"] != w["name"] and w["name"] not in r["aliases"]:
        problems.append(f"{path}: the reader's {r_kind} {r['name']} is not the writer's {w['name']}")
        return
    if r_kind == "array":
        _check(r["items"], r_named, w["items"], w_named, f"{path}items/", problems, seen)
    elif r_kind == "map":
        _check(r["values"], r_named, w["values"], w_named, f"{path}values/", problems, seen)
    elif r_kind == "fixed" and r["size"] != w["size"]:
        problems.append(f"{path}: fixed {r['name']} has size {r['size']}, the writer's {w['size']}")
    elif r_kind == "enum" and r["default"] is None:
        missing = [symbol for symbol in w["symbols"] if symbol not in r["symbols"]]
        if missing:
            problems.append(f"{path}: the reader's enum {r['name']} lacks the writer's symbols {missing}")
    elif r_kind == "record":
        by_name = {field["name"]: field for field in w["fields"]}
        for field in r["fields"]:
            found = by_name.get(field["name"]) or next((by_name[a] for a in field["aliases"] if a in by_name), None)
            if found is None:
                if not field["has_default"]:
                    problems.append(f"{path}{field['name']}: the reader's field has no default and the writer has none")
                continue
            _check(field["type"], r_named, found["type"], w_named, f"{path}{field['name']}/", problems, seen)
