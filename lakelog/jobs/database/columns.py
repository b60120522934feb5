"""A sink's declared columns, and records decoded into them.

`--columns id:bigint,name:text,paid:timestamptz` names the target table's columns and their types; a record's
value, a JSON object, gives each column the value of its key (a missing key is NULL). A user's function may
decode instead: it takes the Message and returns the row as a mapping (None: skip the record). In upsert mode a
record with a null value is a tombstone: it deletes the row of its key.

The types are PostgreSQL's names; DuckDB takes the same (jsonb is DuckDB's JSON).
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakelog.client import Message
from lakelog.errors import InvalidConfig, InvalidRequest

# PostgreSQL's type name -> (the Arrow type DuckDB is given, DuckDB's type name).
TYPES: dict[str, tuple[pa.DataType, str]] = {
    "text": (pa.string(), "VARCHAR"),
    "bigint": (pa.int64(), "BIGINT"),
    "integer": (pa.int32(), "INTEGER"),
    "double precision": (pa.float64(), "DOUBLE"),
    "boolean": (pa.bool_(), "BOOLEAN"),
    "numeric": (pa.string(), "DECIMAL(38, 9)"),
    "timestamptz": (pa.timestamp("us", tz="UTC"), "TIMESTAMPTZ"),
    "jsonb": (pa.string(), "JSON"),
    "bytea": (pa.binary(), "BLOB"),
}
ALIASES = {"int": "integer", "int8": "bigint", "int4": "integer", "double": "double precision", "float8": "double precision",
           "bool": "boolean", "varchar": "text", "json": "jsonb", "timestamp": "timestamptz"}  # fmt: skip
PARTITION_COLUMN = "lakelog_partition"
OFFSET_COLUMN = "lakelog_offset"

Decode = Callable[[Message], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Column:
    name: str
    type: str


def parse_columns(text: str) -> list[Column]:
    """`name:type,...`; InvalidConfig for an unknown type, a repeated or empty name."""
    columns: list[Column] = []
    for item in (part.strip() for part in text.split(",")):
        name, separator, kind = item.partition(":")
        name, kind = name.strip(), ALIASES.get(kind.strip().lower(), kind.strip().lower())
        if not separator or not name or not kind:
            raise InvalidConfig(f"--columns takes name:type,..., not {item!r}", key="columns")
        if kind not in TYPES:
            raise InvalidConfig(f"column {name}: type {kind!r} is not one of {', '.join(TYPES)}", key="columns")
        if name in {column.name for column in columns}:
            raise InvalidConfig(f"column {name} is declared twice", key="columns")
        columns.append(Column(name, kind))
    if not columns:
        raise InvalidConfig("--columns declares no column", key="columns")
    return columns


@dataclass(frozen=True)
class Decoded:
    """A batch decoded: rows (as tuples in the columns' order) and, in upsert mode, the keys to delete."""

    rows: list[tuple[Any, ...]]
    deletes: list[tuple[Any, ...]]


class Decoder:
    def __init__(self, columns: Sequence[Column], key: Sequence[str], upsert: bool, offsets: bool, decode: Decode | None) -> None:
        self.columns = list(columns)
        if offsets:
            self.columns += [Column(PARTITION_COLUMN, "integer"), Column(OFFSET_COLUMN, "bigint")]
        names = [column.name for column in self.columns]
        missing = [name for name in key if name not in names]
        if missing:
            raise InvalidConfig(f"key column(s) {', '.join(missing)} are not among the columns", key="key")
        if upsert and not key:
            raise InvalidConfig("upsert mode needs --key", key="key")
        self.key = list(key)
        self.upsert = upsert
        self.offsets = offsets
        self.decode = decode

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def batch(self, messages: Sequence[Message]) -> Decoded:
        """The batch's rows in offset order; in upsert mode one event per key, the last one (a delete or a row)."""
        decoded: list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]] = []
        for message in messages:
            fields = self._fields(message)
            if fields is None and not (self.upsert and message.value() is None):
                continue
            if fields is None:  # a tombstone: its key's row goes
                decoded.append((None, self._key_of_tombstone(message)))
                continue
            values = tuple(_value(column, fields.get(column.name), message) for column in self.columns)
            decoded.append((values, None))
        if not self.upsert:
            return Decoded([row for row, _ in decoded if row is not None], [])
        positions = [self.names.index(name) for name in self.key]
        last: dict[tuple[Any, ...], tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]] = {}
        for row, deleted in decoded:
            found = tuple(row[i] for i in positions) if row is not None else deleted
            assert found is not None
            last.pop(found, None)
            last[found] = (row, deleted)
        return Decoded([row for row, _ in last.values() if row is not None], [d for _, d in last.values() if d is not None])

    def _fields(self, message: Message) -> Mapping[str, Any] | None:
        if self.decode is not None:
            fields = self.decode(message)
        elif message.value() is None:
            fields = None
        else:
            try:
                fields = json.loads(message.value())  # type: ignore[arg-type]
            except ValueError:
                fields = None
            if not isinstance(fields, dict):
                raise InvalidRequest(f"{_where(message)}: the value is not a JSON object; give the sink a decode function")
        if fields is not None and self.offsets:
            fields = {**fields, PARTITION_COLUMN: message.partition(), OFFSET_COLUMN: message.offset()}
        return fields

    def _key_of_tombstone(self, message: Message) -> tuple[Any, ...]:
        """A tombstone's key columns from its record key: JSON of the key columns, or the one key column's text."""
        raw = message.key()
        if raw is None:
            raise InvalidRequest(f"{_where(message)}: a tombstone with no key cannot delete a row")
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        if not isinstance(parsed, dict):
            if len(self.key) != 1:
                raise InvalidRequest(f"{_where(message)}: a tombstone's key must be a JSON object of {', '.join(self.key)}")
            parsed = {self.key[0]: parsed}
        by_name = {column.name: column for column in self.columns}
        return tuple(_value(by_name[name], parsed.get(name), message) for name in self.key)


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    return pa.schema([pa.field(column.name, TYPES[column.type][0]) for column in columns])


def _value(column: Column, value: Any, message: Message) -> Any:
    if value is None:
        return None
    kind = column.type
    try:
        if kind == "text":
            return value if isinstance(value, str) else json.dumps(value)
        if kind in ("bigint", "integer"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind == "double precision":
            return float(value)
        if kind == "boolean":
            if not isinstance(value, bool):
                raise ValueError(value)
            return value
        if kind == "numeric":
            return str(decimal.Decimal(str(value)))
        if kind == "timestamptz":
            if isinstance(value, int | float) and not isinstance(value, bool):
                return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
            return datetime.datetime.fromisoformat(str(value)).astimezone(datetime.UTC)
        if kind == "jsonb":
            return json.dumps(value)
        if kind == "bytea":
            return value.encode() if isinstance(value, str) else bytes(value)
    except (ValueError, TypeError, decimal.InvalidOperation):
        pass
    raise InvalidRequest(f"{_where(message)}: {column.name}={value!r} is not a {kind}")


def _where(message: Message) -> str:
    return f"{message.topic()}-{message.partition()}@{message.offset()}"
