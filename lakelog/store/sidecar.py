"""Sidecar files: derived caches kept in a table's folder under `_lakelog/`, never state.

Whatever a sidecar holds can be derived from the table's rows alone, so a reader
ignores one that is missing or unreadable, anyone may write or delete one, and
losing them all costs time, never correctness. Delta readers and vacuums skip
folders whose names start with `_`, so sidecars are invisible to them. Writes
are atomic (a temporary name, then a move), so readers never see half a file.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.store.maintenance import _filesystem, _join
from lakelog.store.table import Table

SIDECAR_DIR = "_lakelog"
_TEMPORARY = ".tmp-"
# The newest snapshots kept in a folder; older ones are deleted when a new one is written.
SNAPSHOTS_KEPT = 2


def list_sidecars(table: Table, folder: str) -> list[str]:
    """Names of the sidecar files in `folder`, sorted; none if the folder is missing or unreadable."""
    fs, path = _filesystem(_join(table.uri, f"{SIDECAR_DIR}/{folder}"))
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except (OSError, pa.ArrowException):
        return []
    return sorted(info.base_name for info in infos if info.type == pafs.FileType.File and _TEMPORARY not in info.base_name)


def read_sidecar(table: Table, folder: str, name: str) -> bytes | None:
    """A sidecar file's bytes, or None if it is missing or unreadable."""
    fs, path = _filesystem(_join(table.uri, f"{SIDECAR_DIR}/{folder}/{name}"))
    try:
        with fs.open_input_stream(path) as stream:
            return stream.read()
    except (OSError, pa.ArrowException):
        return None


def write_sidecar(table: Table, folder: str, name: str, data: bytes) -> bool:
    """Write a sidecar file atomically; False if the storage refused (a read-only root, say)."""
    fs, path = _filesystem(_join(table.uri, f"{SIDECAR_DIR}/{folder}/{name}"))
    temporary = f"{path}{_TEMPORARY}{uuid.uuid4().hex}"
    try:
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(temporary) as stream:
            stream.write(data)
        fs.move(temporary, path)
        return True
    except (OSError, pa.ArrowException):
        delete_sidecar(table, folder, temporary.rsplit("/", 1)[1])
        return False


def delete_sidecar(table: Table, folder: str, name: str) -> None:
    """Delete a sidecar file if it is there; a failure leaves it (it is only a cache)."""
    fs, path = _filesystem(_join(table.uri, f"{SIDECAR_DIR}/{folder}/{name}"))
    try:
        fs.delete_file(path)
    except (OSError, pa.ArrowException):
        pass


# -- snapshots: state derived from the rows below a position, named by that position -----------


def read_snapshots(table: Table, folder: str, at_most: int) -> Iterator[tuple[int, Any]]:
    """(position, body) of the snapshots in `folder` at or below `at_most`, newest first.

    Only snapshots that parse and name this table's id and their own position
    are given: one of a table created again in the same place is skipped. The
    caller still checks the body and moves on to the next if it does not fit.
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
            yield position, snapshot["body"]
        except (ValueError, KeyError, TypeError):
            continue


def write_snapshot(table: Table, folder: str, position: int, body: Any) -> bool:
    """Write the snapshot of `position` and delete all but the newest `SNAPSHOTS_KEPT`; False if refused."""
    snapshot = {"table_id": table.table_id, "position": position, "body": body}
    if not write_sidecar(table, folder, _snapshot_name(position), json.dumps(snapshot, separators=(",", ":")).encode()):
        return False
    names = [name for name in list_sidecars(table, folder) if _snapshot_position(name)]
    for name in sorted(names, key=_snapshot_position)[:-SNAPSHOTS_KEPT]:
        delete_sidecar(table, folder, name)
    return True


def _snapshot_name(position: int) -> str:
    return f"{position:020d}.json"


def _snapshot_position(name: str) -> int | None:
    """The position a snapshot file's name says, or None for any other file."""
    stem, dot, suffix = name.partition(".")
    return int(stem) if dot and suffix == "json" and len(stem) == 20 and stem.isdigit() else None
