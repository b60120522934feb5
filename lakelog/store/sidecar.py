"""Sidecar files: derived caches kept in a table's folder under `_lakelog/`, never state.

Whatever a sidecar holds can be derived from the table's rows alone, so a reader
ignores one that is missing or unreadable, anyone may write or delete one, and
losing them all costs time, never correctness. Delta readers and vacuums skip
folders whose names start with `_`, so sidecars are invisible to them. Writes
are atomic (a temporary name, then a move), so readers never see half a file.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.store.maintenance import _filesystem, _join
from lakelog.store.table import Table

SIDECAR_DIR = "_lakelog"
_TEMPORARY = ".tmp-"


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
