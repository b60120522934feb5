"""What a transform may return (see `run_transform`): tables with a `value` column and optionally `key`, `headers` and
`timestamp`, checked before anything is written (S8.3)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidRequest

# The columns a transform's output may have; `value` is required.
OUTPUT_COLUMNS = ("value", "key", "headers", "timestamp")
OUTPUT_CONTRACT = (
    "a transform returns a pyarrow Table or RecordBatch (or a list of them, or None) with a `value` column "
    "(binary or string) and optionally `key` (binary or string), `headers` (list<struct<key: string, value: binary>>) "
    "and `timestamp` (timestamp, or int64 milliseconds)"
)


def outputs(result: Any, where: str) -> list[pa.Table | pa.RecordBatch]:
    """A transform's result as a list of tables (None: none); InvalidRequest for anything else."""
    if result is None:
        return []
    if isinstance(result, (pa.Table, pa.RecordBatch)):
        return [result]
    if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
        raise InvalidRequest(f"transform output for {where} is a {type(result).__name__}: {OUTPUT_CONTRACT}")
    outputs = list(result)
    for output in outputs:
        if not isinstance(output, (pa.Table, pa.RecordBatch)):
            raise InvalidRequest(f"transform output for {where} holds a {type(output).__name__}: {OUTPUT_CONTRACT}")
    return outputs


def check_output(output: pa.Table | pa.RecordBatch, where: str = "a batch") -> pa.Table:
    """A transform's output table, checked against the contract (see `run_transform`); InvalidRequest names what is wrong."""
    table = pa.Table.from_batches([output]) if isinstance(output, pa.RecordBatch) else output
    names = table.column_names
    problem = None
    unknown = [name for name in names if name not in OUTPUT_COLUMNS]
    if len(set(names)) != len(names):
        problem = f"has a column twice ({', '.join(names)})"
    elif unknown:
        problem = f"has unknown column(s) {', '.join(unknown)}"
    elif "value" not in names:
        problem = "has no value column"
    else:
        for name in names:
            kind = table.schema.field(name).type
            if not _CHECKS[name](kind):
                problem = f"has column {name} of type {kind}"
                break
    if problem is not None:
        raise InvalidRequest(f"transform output for {where} {problem}: {OUTPUT_CONTRACT}")
    return table


def _is_bytes(kind: pa.DataType) -> bool:
    return pa.types.is_null(kind) or any(
        check(kind) for check in (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_string, pa.types.is_large_string)
    )


def _is_headers(kind: pa.DataType) -> bool:
    if pa.types.is_null(kind):
        return True
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        return False
    item = kind.value_type
    fields = {item.field(i).name: item.field(i).type for i in range(item.num_fields)}
    return (
        set(fields) == {"key", "value"}
        and (pa.types.is_string(fields["key"]) or pa.types.is_large_string(fields["key"]))
        and _is_bytes(fields["value"])
    )


def _is_timestamp(kind: pa.DataType) -> bool:
    return pa.types.is_null(kind) or pa.types.is_timestamp(kind) or pa.types.is_integer(kind)


_CHECKS: dict[str, Callable[[pa.DataType], bool]] = {
    "value": _is_bytes,
    "key": _is_bytes,
    "headers": _is_headers,
    "timestamp": _is_timestamp,
}


def milliseconds(column: pa.ChunkedArray) -> list[int | None]:
    """An output's `timestamp` column as milliseconds since the epoch (None where unset)."""
    if pa.types.is_timestamp(column.type):
        column = pc.cast(pc.cast(column, pa.timestamp("ms", tz=column.type.tz)), pa.int64())
    elif pa.types.is_null(column.type):
        return [None] * len(column)
    values = column.to_pylist()
    for value in values:
        if value is not None and value < 0:
            raise InvalidRequest(f"transform output has a timestamp before 1970 ({value} ms): {OUTPUT_CONTRACT}")
    return values
