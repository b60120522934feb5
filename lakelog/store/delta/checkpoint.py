"""Classic single-file Parquet checkpoints and `_last_checkpoint` (Delta's PROTOCOL.md, "Checkpoints").

A checkpoint of version v is the snapshot at v written as rows of actions, one
action per row in a column of its kind (`protocol`, `metaData`, `txn`, `add`,
`remove` for the tombstones not yet expired). `_last_checkpoint` names the
newest one so a reader opens from it. lakelog writes both from its own
snapshot (`checkpoint_table`, `last_checkpoint`) and reads checkpoints any Delta
writer made (`snapshot_from_checkpoint`: delta-rs's, with its extra columns,
and multi-part ones read part by part).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from lakelog.store.delta.snapshot import Snapshot, SnapshotError

logger = logging.getLogger(__name__)

_STRING_MAP = pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string()))
_DELETION_VECTOR = pa.struct(
    [
        pa.field("storageType", pa.string(), False),
        pa.field("pathOrInlineDv", pa.string(), False),
        pa.field("offset", pa.int32()),
        pa.field("sizeInBytes", pa.int32(), False),
        pa.field("cardinality", pa.int64(), False),
    ]
)
ADD = pa.struct(
    [
        pa.field("path", pa.string(), False),
        pa.field("partitionValues", _STRING_MAP, False),
        pa.field("size", pa.int64(), False),
        pa.field("modificationTime", pa.int64(), False),
        pa.field("dataChange", pa.bool_(), False),
        pa.field("stats", pa.string()),
        pa.field("tags", _STRING_MAP),
        pa.field("deletionVector", _DELETION_VECTOR),
        pa.field("baseRowId", pa.int64()),
        pa.field("defaultRowCommitVersion", pa.int64()),
        pa.field("clusteringProvider", pa.string()),
    ]
)
REMOVE = pa.struct(
    [
        pa.field("path", pa.string(), False),
        pa.field("deletionTimestamp", pa.int64()),
        pa.field("dataChange", pa.bool_(), False),
        pa.field("extendedFileMetadata", pa.bool_()),
        pa.field("partitionValues", _STRING_MAP),
        pa.field("size", pa.int64()),
        pa.field("stats", pa.string()),
        pa.field("tags", _STRING_MAP),
        pa.field("deletionVector", _DELETION_VECTOR),
        pa.field("baseRowId", pa.int64()),
        pa.field("defaultRowCommitVersion", pa.int64()),
    ]
)
METADATA = pa.struct(
    [
        pa.field("id", pa.string(), False),
        pa.field("name", pa.string()),
        pa.field("description", pa.string()),
        pa.field(
            "format",
            pa.struct([pa.field("provider", pa.string(), False), pa.field("options", _STRING_MAP, False)]),
            False,
        ),
        pa.field("schemaString", pa.string(), False),
        pa.field("partitionColumns", pa.list_(pa.field("element", pa.string(), False)), False),
        pa.field("createdTime", pa.int64()),
        pa.field("configuration", _STRING_MAP, False),
    ]
)
PROTOCOL = pa.struct(
    [
        pa.field("minReaderVersion", pa.int32(), False),
        pa.field("minWriterVersion", pa.int32(), False),
        pa.field("readerFeatures", pa.list_(pa.field("element", pa.string(), False))),
        pa.field("writerFeatures", pa.list_(pa.field("element", pa.string(), False))),
    ]
)
TXN = pa.struct(
    [pa.field("appId", pa.string(), False), pa.field("version", pa.int64(), False), pa.field("lastUpdated", pa.int64())]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        pa.field("add", ADD),
        pa.field("remove", REMOVE),
        pa.field("metaData", METADATA),
        pa.field("protocol", PROTOCOL),
        pa.field("txn", TXN),
    ]
)
_KINDS = [field.name for field in CHECKPOINT_SCHEMA]


def checkpoint_table(snapshot: Snapshot, tombstone_cutoff_ms: int) -> pa.Table:
    """The checkpoint of `snapshot`: protocol, metaData, every txn and add, and tombstones deleted at or after the cutoff.

    One row per action, the action in the column of its kind (the others null); built a kind at a time, the
    tombstones (`remove`) last, so a writer can put them in a row group of their own (`DeltaLog.write_checkpoint`).
    """
    snapshot.check("a checkpoint")
    groups: list[tuple[str, list[dict[str, Any]]]] = [
        ("protocol", [snapshot.protocol or {}]),
        ("metaData", [snapshot.metadata or {}]),
        ("txn", list(snapshot.txns.values())),
        ("add", [body if "partitionValues" in body else dict(body, partitionValues={}) for body in snapshot.adds.values()]),
        (
            "remove",
            [body for body in snapshot.tombstones.values() if (body.get("deletionTimestamp") or 0) >= tombstone_cutoff_ms],
        ),
    ]
    pieces = []
    for kind, bodies in groups:
        if not bodies:
            continue
        columns = {
            name: pa.array(bodies, CHECKPOINT_SCHEMA.field(name).type)
            if name == kind
            else pa.array([None] * len(bodies), CHECKPOINT_SCHEMA.field(name).type)
            for name in _KINDS
        }
        pieces.append(pa.table(columns, schema=CHECKPOINT_SCHEMA))
    return pa.concat_tables(pieces)


def snapshot_from_checkpoint(
    parts: list[pa.Table], version: int, unread_removes: Sequence[Callable[[], pa.ChunkedArray]] = ()
) -> Snapshot:
    """The snapshot a checkpoint of `version` holds (its parts in order; extra columns are ignored).

    `unread_removes` read the `remove` columns of parts read without them; they are called, and their rows made
    into tombstones, when the snapshot's tombstones are first asked for (a cold open needs none).
    """
    snapshot = Snapshot(version)
    removes: list[pa.ChunkedArray | Callable[[], pa.ChunkedArray]] = list(unread_removes)
    for part in parts:
        for kind in _KINDS:
            if kind not in part.column_names:
                continue
            column = part.column(kind)
            if column.null_count == len(column):
                continue
            if kind == "remove":
                removes.append(column.drop_null())  # made into bodies when first needed (vacuum, S9.5, the next checkpoint)
                continue
            for body in _bodies(column.drop_null()):
                _load(snapshot, kind, body)
    if removes:
        snapshot.defer_tombstones(lambda: [_plain(body) for column in removes for body in _rows(column)])
    return snapshot


def _bodies(column: pa.ChunkedArray) -> list[dict[str, Any]]:
    """The action bodies of a column of non-null structs, as `_plain` makes them, a field at a time.

    A cold open of an old partition reads a checkpoint of hundreds of adds: one list per field (a field null
    in every row is skipped) costs about half of making each row a dict and walking it (`to_pylist`, `_plain`).
    """
    structs = column.combine_chunks()
    if not isinstance(structs, pa.StructArray):
        return [_plain(body) for body in structs.to_pylist()]
    bodies: list[dict[str, Any]] = [{} for _ in range(len(structs))]
    # `flatten` applies the structs' validity and offset to their fields.
    for field, child in zip(structs.type, structs.flatten(), strict=True):
        if child.null_count == len(child):
            continue
        name = field.name
        nested = pa.types.is_nested(field.type)
        for body, value in zip(bodies, child.to_pylist(), strict=True):
            if value is not None:
                body[name] = _plain(value, name) if nested else value
    return bodies


def _rows(column: pa.ChunkedArray | Callable[[], pa.ChunkedArray]) -> list[Any]:
    if callable(column):
        try:
            column = column().drop_null()
        except pa.ArrowException as error:
            raise SnapshotError(f"the tombstones of a checkpoint are unreadable: {error}") from error
    return column.to_pylist()


def _load(snapshot: Snapshot, kind: str, body: dict[str, Any]) -> None:
    if kind == "add":
        snapshot.adds[body["path"]] = body
    elif kind == "txn":
        snapshot.txns[body["appId"]] = body
    elif kind == "metaData":
        snapshot.metadata = body
    elif kind == "protocol":
        snapshot.protocol = body


# Fields of map type: a checkpoint gives them back as lists of (key, value) pairs.
_MAP_FIELDS = {"partitionValues", "configuration", "options", "tags"}


def _plain(value: Any, name: str | None = None) -> Any:
    """A row read back as the JSON action body: maps as dicts, null fields dropped."""
    if isinstance(value, dict):
        # Scalars (most fields) are taken as they are, without a call each.
        return {
            key: _plain(item, key) if type(item) is dict or type(item) is list else item
            for key, item in value.items()
            if item is not None
        }
    if isinstance(value, list):
        if name in _MAP_FIELDS:
            return dict(value)
        return [_plain(item) for item in value]
    return value


def last_checkpoint(version: int, table: pa.Table, size_in_bytes: int, parts: int | None = None) -> bytes:
    """The `_last_checkpoint` file naming the checkpoint of `version`."""
    body: dict[str, Any] = {
        "version": version,
        "size": table.num_rows,
        "sizeInBytes": size_in_bytes,
        "numOfAddFiles": table.column("add").length() - table.column("add").null_count,
    }
    if parts is not None:
        body["parts"] = parts
    return json.dumps(body).encode("utf-8")


def read_last_checkpoint(data: bytes) -> tuple[int, int | None] | None:
    """(version, parts) from a `_last_checkpoint` file's bytes; None if they are unreadable."""
    try:
        body = json.loads(data)
        version = body["version"]
        parts = body.get("parts")
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(version, int) or version < 0:
        return None
    return version, parts if isinstance(parts, int) and parts > 1 else None


__all__ = [
    "CHECKPOINT_SCHEMA",
    "checkpoint_table",
    "last_checkpoint",
    "read_last_checkpoint",
    "snapshot_from_checkpoint",
]
