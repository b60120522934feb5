"""Sidecar files: derived caches kept in a table's folder under `_lakelog/`, never state.

Whatever a sidecar holds can be derived from the table's rows alone, so a reader
ignores one that is missing or unreadable, anyone may write or delete one, and
losing them all costs time, never correctness. Delta readers and vacuums skip
folders whose names start with `_`, so sidecars are invisible to them. Writes
are atomic (a temporary name, then a move), so readers never see half a file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from lakelog.errors import KafkaStorageError
from lakelog.store.delta.table import Table

logger = logging.getLogger(__name__)

SIDECAR_DIR = "_lakelog"
_TEMPORARY = ".tmp-"
# The newest snapshots kept in a folder; older ones are deleted when a new one is written.
SNAPSHOTS_KEPT = 2


def _uri(table: Table, folder: str, name: str | None = None) -> str:
    return table.child_uri(f"{SIDECAR_DIR}/{folder}" + (f"/{name}" if name else ""))


def list_sidecars(table: Table, folder: str) -> list[str]:
    """Names of the sidecar files in `folder`, sorted; none if the folder is missing or unreadable."""
    try:
        infos = table.io.list(_uri(table, folder))
    except KafkaStorageError as error:
        logger.warning("%s: cannot list sidecars in %s: %s", table.uri, folder, error)
        return []
    return sorted(info.name for info in infos if not info.is_dir and _TEMPORARY not in info.name)


def read_sidecar(table: Table, folder: str, name: str) -> bytes | None:
    """A sidecar file's bytes, or None if it is missing or unreadable."""
    try:
        return table.io.read(_uri(table, folder, name))
    except FileNotFoundError:
        return None
    except KafkaStorageError as error:
        logger.warning("%s: cannot read sidecar %s/%s: %s", table.uri, folder, name, error)
        return None


def write_sidecar(table: Table, folder: str, name: str, data: bytes) -> bool:
    """Write a sidecar file atomically (FileIO.write); False if the storage refused (a read-only root, say)."""
    try:
        table.io.write(_uri(table, folder, name), data)
        return True
    except KafkaStorageError as error:
        logger.warning("%s: cannot write sidecar %s/%s: %s", table.uri, folder, name, error)
        return False


def delete_sidecar(table: Table, folder: str, name: str) -> None:
    """Delete a sidecar file if it is there; a failure leaves it (it is only a cache)."""
    try:
        table.io.delete(_uri(table, folder, name))
    except KafkaStorageError as error:
        logger.warning("%s: cannot delete sidecar %s/%s: %s", table.uri, folder, name, error)


# -- snapshots: state derived from the rows below a position, named by that position -----------

# The format of a snapshot written before snapshots named one.
UNVERSIONED_FORMAT = 1


def read_snapshots(table: Table, folder: str, at_most: int, format_version: int = 1) -> Iterator[tuple[int, Any]]:
    """(position, body) of the snapshots in `folder` at or below `at_most`, newest first.

    Only snapshots that parse and name this table's id, their own position and
    `format_version` are given: one of a table created again in the same place,
    or one its writer's code laid out otherwise, is skipped. The caller still
    checks the body and moves on to the next if it does not fit.
    """
    positions = sorted(filter(None, map(_snapshot_position, list_sidecars(table, folder))), reverse=True)
    table_id = table.table_id
    for position in positions:
        if position > at_most:
            continue
        data = read_sidecar(table, folder, _snapshot_name(position))
        try:
            snapshot = json.loads(data) if data is not None else None
            if snapshot is None or snapshot["table_id"] != table_id or snapshot["position"] != position:
                continue
            if snapshot.get("format", UNVERSIONED_FORMAT) != format_version:
                logger.info(
                    "%s: snapshot %s/%d is of format %r, not %d; skipped",
                    table.uri,
                    folder,
                    position,
                    snapshot.get("format", UNVERSIONED_FORMAT),
                    format_version,
                )
                continue
            yield position, snapshot["body"]
        except (ValueError, KeyError, TypeError, AttributeError):
            continue


def write_snapshot(table: Table, folder: str, position: int, body: Any, format_version: int = 1) -> bool:
    """Write the snapshot of `position` (of `format_version`) and delete all but the newest `SNAPSHOTS_KEPT`;
    False if refused."""
    snapshot = {"table_id": table.table_id, "position": position, "format": format_version, "body": body}
    if not write_sidecar(table, folder, _snapshot_name(position), json.dumps(snapshot, separators=(",", ":")).encode()):
        return False
    found = {name: _snapshot_position(name) for name in list_sidecars(table, folder)}
    positions = {name: number for name, number in found.items() if number}
    for name in sorted(positions, key=positions.__getitem__)[:-SNAPSHOTS_KEPT]:
        delete_sidecar(table, folder, name)
    return True


def _snapshot_name(position: int) -> str:
    return f"{position:020d}.json"


def _snapshot_position(name: str) -> int | None:
    """The position a snapshot file's name says, or None for any other file."""
    stem, dot, suffix = name.partition(".")
    return int(stem) if dot and suffix == "json" and len(stem) == 20 and stem.isdigit() else None
