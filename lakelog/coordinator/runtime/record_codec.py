"""Versioned rows of the internal logs: one codec per record kind (Kafka's `CoordinatorRecordHelpers`).

A record is stored as a JSON object whose `"v"` names the version of the codec
that wrote it; rows written before versions existed have none and read as
version 0. A codec reads every version up to its own and ignores fields it does
not know (a newer writer's additions), so old and new processes share a log. A
row that does not decode (not an object, a newer version, a field missing or of
the wrong type) is `CorruptRecord`, never a raw KeyError or TypeError; the
coordinator log adds the table and offset of the row (`located`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from lakelog.errors import CorruptRecord

T = TypeVar("T")

VERSION_FIELD = "v"
# What a row without a version field was written as: the code before versions existed.
UNVERSIONED = 0
_MISSING: Any = object()


@dataclass(frozen=True)
class RecordCodec(Generic[T]):
    """One record kind's rows: `encode` stamps `version`, `decode` checks it and builds the record.

    `fields(record)` gives the record's plain fields, `build(row)` the record from
    a row of any version up to `version` (reading only the fields it knows).
    """

    kind: str
    version: int
    fields: Callable[[T], dict[str, Any]] | None = None
    build: Callable[[Mapping[str, Any]], T] | None = None

    def stamp(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """`fields` as a row of this codec's version."""
        return {**fields, VERSION_FIELD: self.version}

    def encode(self, record: T) -> dict[str, Any]:
        assert self.fields is not None
        return self.stamp(self.fields(record))

    def version_of(self, row: Any) -> int:
        """The version a row was written at; CorruptRecord if it is not a row this codec reads."""
        if not isinstance(row, Mapping):
            raise CorruptRecord(f"a {self.kind} record is a JSON object, not {type(row).__name__}", reason="not an object")
        version = row.get(VERSION_FIELD, UNVERSIONED)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise CorruptRecord(f"{self.kind} record version {version!r} is not a version", reason="bad version")
        if version > self.version:
            raise CorruptRecord(
                f"{self.kind} record version {version} is newer than this lakelog reads (up to {self.version})",
                reason="newer version",
            )
        return version

    def decode(self, row: Any) -> T:
        """The record of `row`; CorruptRecord if it does not decode."""
        assert self.build is not None
        self.version_of(row)
        try:
            return self.build(row)
        except CorruptRecord:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CorruptRecord(f"not a {self.kind} record: {_why(error)}", reason=_why(error)) from None


def located(error: CorruptRecord, table: str, offset: int) -> CorruptRecord:
    """`error` naming the table and offset of the row it is about."""
    return CorruptRecord(f"{table} offset {offset}: {error}", table=table, offset=offset, reason=str(error))


def integer(row: Mapping[str, Any], name: str, default: Any = _MISSING) -> int:
    """An integer field (not a bool, not a float); `default` if absent and one is given."""
    value = _get(row, name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"field {name!r} is {value!r}, not an integer")
    return value


def text(row: Mapping[str, Any], name: str, default: Any = _MISSING) -> str:
    value = _get(row, name, default)
    if not isinstance(value, str):
        raise TypeError(f"field {name!r} is {value!r}, not a string")
    return value


def optional_text(row: Mapping[str, Any], name: str) -> str | None:
    value = row.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"field {name!r} is {value!r}, not a string or null")
    return value


def flag(row: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = row.get(name, default)
    if not isinstance(value, bool):
        raise TypeError(f"field {name!r} is {value!r}, not a boolean")
    return value


def sequence(row: Mapping[str, Any], name: str) -> list[Any]:
    value = _get(row, name, _MISSING)
    if not isinstance(value, list):
        raise TypeError(f"field {name!r} is {value!r}, not a list")
    return value


def mapping(row: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = _get(row, name, _MISSING)
    if not isinstance(value, Mapping):
        raise TypeError(f"field {name!r} is {value!r}, not an object")
    return value


def _get(row: Mapping[str, Any], name: str, default: Any) -> Any:
    if name in row:
        return row[name]
    if default is _MISSING:
        raise KeyError(name)
    return default


def _why(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"field {error.args[0]!r} is missing"
    return str(error)


__all__ = [
    "UNVERSIONED",
    "VERSION_FIELD",
    "RecordCodec",
    "flag",
    "integer",
    "located",
    "mapping",
    "optional_text",
    "sequence",
    "text",
]
