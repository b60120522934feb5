"""Helpers shared by tests (import as `from helpers import ...`; tests/ is on sys.path via conftest)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def table_fingerprint(path: str | os.PathLike[str]) -> list[tuple[str, int, str]]:
    """Every file under a folder as sorted (relative path, size, sha256): equal means byte-for-byte equal (S8.3).

    A folder that does not exist has the empty fingerprint, so "nothing was created" compares too.
    """
    base = Path(path)
    if not base.exists():
        return []
    entries = []
    for file in base.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            entries.append((file.relative_to(base).as_posix(), len(data), hashlib.sha256(data).hexdigest()))
    return sorted(entries)


def folder_listing(path: str | os.PathLike[str]) -> list[str]:
    """Every file and folder under `path` (relative, sorted): catches empty folders a fingerprint misses."""
    base = Path(path)
    if not base.exists():
        return []
    return sorted(entry.relative_to(base).as_posix() + ("/" if entry.is_dir() else "") for entry in base.rglob("*"))
