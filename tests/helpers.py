"""Helpers shared by tests (import as `from helpers import ...`; tests/ is on sys.path via conftest)."""

from __future__ import annotations

import hashlib
import os

from lakelog.store import Location


def table_fingerprint(path: str | os.PathLike[str]) -> list[tuple[str, int, str]]:
    """Every file under a folder or URI as sorted (relative path, size, sha256): equal means byte-for-byte equal (S8.3).

    Read through lakelog's file-IO layer, so it works on every kind of root. A folder that does not exist
    has the empty fingerprint, so "nothing was created" compares too.
    """
    base = Location.of(path)
    entries = []
    for entry in base.list(recursive=True):
        if not entry.is_dir:
            data = base.io.read(entry.uri)
            entries.append((entry.uri[len(base.uri) + 1:], len(data), hashlib.sha256(data).hexdigest()))
    return sorted(entries)


def folder_listing(path: str | os.PathLike[str]) -> list[str]:
    """Every file and folder under `path` (relative, sorted): catches empty folders a fingerprint misses.

    On object stores folders are the prefixes of the files' keys.
    """
    base = Location.of(path)
    names = set()
    for entry in base.list(recursive=True):
        relative = entry.uri[len(base.uri) + 1:]
        names.add(relative + ("/" if entry.is_dir else ""))
        parts = relative.split("/")
        names.update("/".join(parts[:index]) + "/" for index in range(1, len(parts)))
    return sorted(names)
