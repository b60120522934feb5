"""Delta log actions in their JSON encoding (Delta's PROTOCOL.md, "Actions"), as lakelog writes and reads them.

An action is a dict of one key (`add`, `remove`, `txn`, `metaData`, `protocol`,
`commitInfo`, ...) holding the action's fields, exactly as it appears on one
line of a commit file `_delta_log/<version>.json`. The builders here make the
actions lakelog commits; `encode_commit` and `decode_commit` turn a commit's
actions into the file's bytes and back.

Tables lakelog creates declare `minReaderVersion` 1 (every Delta reader reads
them) and `minWriterVersion` 7 with the writer features `invariants` (their NOT
NULL columns) and `LAKELOG_WRITER_FEATURE`:
a conforming Delta writer refuses a table with a writer feature it does not
implement, and only lakelog implements this one (its commits are strict v+1,
checked against log cleanup after the put, S9.5), so no other engine writes a
lakelog table.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

LAKELOG_WRITER_FEATURE = "lakelogStrictCommit"
# `invariants`: lakelog's schemas have NOT NULL columns (offset, producer_id, ...), which Delta's Spark connector
# counts as column invariants; at writer version 7 it refuses to read a table whose protocol does not list the feature.
INVARIANTS_FEATURE = "invariants"
PROTOCOL: dict[str, Any] = {
    "minReaderVersion": 1,
    "minWriterVersion": 7,
    "writerFeatures": [INVARIANTS_FEATURE, LAKELOG_WRITER_FEATURE],
}
# What commitInfo names as its writer (Delta's engineInfo / clientVersion).
ENGINE_INFO = "lakelog"
# commitInfo key naming each commit, so a writer can tell its own commit in the log (S12.3).
COMMIT_ID_KEY = "lakelog.commit"
# commitInfo key naming the table (its metaData id) a commit was decided on: a table deleted and created again under
# the same name has a new id, so a late commit of the old one is never read as the new one's.
TABLE_ID_KEY = "lakelog.table"


# json.dumps(action, separators=(",", ":")) builds an encoder per call; this one is made once.
_COMMIT_ENCODER = json.JSONEncoder(separators=(",", ":"))


class MalformedCommit(ValueError):
    """A commit file that is not Delta's newline-delimited JSON of actions."""


def add_action(
    path: str,
    size: int,
    modification_time_ms: int,
    data_change: bool,
    stats: str | None,
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An `add` of a data file in the table's folder (`path` relative to it; lakelog writes no partitions), with the
    spec's `tags` (metadata about the file that readers may ignore) when given."""
    body: dict[str, Any] = {
        "path": path,
        "partitionValues": {},
        "size": size,
        "modificationTime": modification_time_ms,
        "dataChange": data_change,
        "stats": stats,
    }
    if tags:
        body["tags"] = dict(tags)
    return {"add": body}


def remove_action(path: str, deletion_timestamp_ms: int, data_change: bool, size: int | None) -> dict[str, Any]:
    """A `remove` (a tombstone, kept for the table's `delta.deletedFileRetentionDuration`)."""
    body: dict[str, Any] = {
        "path": path,
        "deletionTimestamp": deletion_timestamp_ms,
        "dataChange": data_change,
        "extendedFileMetadata": size is not None,
        "partitionValues": {},
    }
    if size is not None:
        body["size"] = size
    return {"remove": body}


def txn_action(app_id: str, version: int, last_updated_ms: int) -> dict[str, Any]:
    return {"txn": {"appId": app_id, "version": int(version), "lastUpdated": last_updated_ms}}


def metadata_action(
    table_id: str | None, schema_string: str, configuration: Mapping[str, str], created_time_ms: int
) -> dict[str, Any]:
    """A `metaData` action: a new table (`table_id` None draws one) or a changed configuration."""
    return {
        "metaData": {
            "id": table_id or str(uuid.uuid4()),
            "name": None,
            "description": None,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": [],
            "configuration": {str(key): str(value) for key, value in configuration.items()},
            "createdTime": created_time_ms,
        }
    }


def protocol_action() -> dict[str, Any]:
    return {"protocol": dict(PROTOCOL, writerFeatures=list(PROTOCOL["writerFeatures"]))}


def commit_info(
    timestamp_ms: int,
    operation: str,
    commit_id: str,
    parameters: Mapping[str, Any] | None,
    metadata: Mapping[str, str] | None,
    table_id: str | None = None,
) -> dict[str, Any]:
    """The commit's provenance: Delta's fields, the caller's custom metadata, lakelog's commit id (S12.3) and the id of
    the table it was decided on."""
    info: dict[str, Any] = {
        "timestamp": timestamp_ms,
        "operation": operation,
        "operationParameters": dict(parameters or {}),
        "engineInfo": ENGINE_INFO,
        "clientVersion": ENGINE_INFO,
    }
    info.update({str(key): str(value) for key, value in (metadata or {}).items()})
    info[COMMIT_ID_KEY] = commit_id
    if table_id:
        info[TABLE_ID_KEY] = table_id
    return {"commitInfo": info}


def encode_commit(actions: list[dict[str, Any]]) -> bytes:
    """A commit file's bytes: one action per line (commitInfo first, as Delta writers put it)."""
    ordered = sorted(actions, key=lambda action: "commitInfo" not in action)
    encode = _COMMIT_ENCODER.encode
    return ("\n".join([encode(action) for action in ordered]) + "\n").encode("utf-8")


def decode_commit(data: bytes, where: str = "a commit file") -> list[dict[str, Any]]:
    """A commit file's actions; MalformedCommit if a line is not a JSON object."""
    actions = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as error:
            raise MalformedCommit(f"{where}, line {number}: {error}") from error
        if not isinstance(action, dict):
            raise MalformedCommit(f"{where}, line {number}: not an action")
        actions.append(action)
    return actions


def commit_id_of(actions: list[dict[str, Any]]) -> str | None:
    """The lakelog commit id a commit's commitInfo carries (None: not lakelog's, or none recorded)."""
    for action in actions:
        info = action.get("commitInfo")
        if isinstance(info, dict):
            value = info.get(COMMIT_ID_KEY)
            return value if isinstance(value, str) else None
    return None


__all__ = [
    "COMMIT_ID_KEY",
    "INVARIANTS_FEATURE",
    "LAKELOG_WRITER_FEATURE",
    "MalformedCommit",
    "PROTOCOL",
    "TABLE_ID_KEY",
    "add_action",
    "commit_id_of",
    "commit_info",
    "decode_commit",
    "encode_commit",
    "metadata_action",
    "protocol_action",
    "remove_action",
    "txn_action",
]
