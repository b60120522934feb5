"""Helpers shared by tests (import as `from helpers import ...`; tests/ is on sys.path via conftest)."""

from __future__ import annotations

import hashlib
import logging
import os

from lakelog.store import Location
from lakelog.store.delta.cluster import CLUSTER_METADATA_DIR


def table_fingerprint(path: str | os.PathLike[str]) -> list[tuple[str, int, str]]:
    """Every file under a folder or URI as sorted (relative path, size, sha256): equal means byte-for-byte equal (S8.3).

    Read through lakelog's file-IO layer, so it works on every kind of root. A folder that does not exist
    has the empty fingerprint, so "nothing was created" compares too. A root's identity (`lakelog init`)
    is not counted: it is made with the root, by no code a test watches.
    """
    base = Location.of(path)
    entries = []
    for entry in base.list(recursive=True):
        if not entry.is_dir and not _is_identity(base, entry.uri):
            data = base.io.read(entry.uri)
            entries.append((entry.uri[len(base.uri) + 1 :], len(data), hashlib.sha256(data).hexdigest()))
    return sorted(entries)


def fingerprint_but_sweeps(root: str | os.PathLike[str]) -> list[tuple[str, int, str]]:
    """`table_fingerprint` of a root less its `__sweeps` log, where every sweep leaves its row (a sweep that changes
    nothing else is idempotent: S8.2)."""
    return [entry for entry in table_fingerprint(root) if not entry[0].startswith("__sweeps/")]


def folder_listing(path: str | os.PathLike[str]) -> list[str]:
    """Every file and folder under `path` (relative, sorted): catches empty folders a fingerprint misses.

    On object stores folders are the prefixes of the files' keys. A root's identity is not listed (see
    table_fingerprint).
    """
    base = Location.of(path)
    names = set()
    for entry in base.list(recursive=True):
        if _is_identity(base, entry.uri):
            continue
        relative = entry.uri[len(base.uri) + 1 :]
        names.add(relative + ("/" if entry.is_dir else ""))
        parts = relative.split("/")
        names.update("/".join(parts[:index]) + "/" for index in range(1, len(parts)))
    return sorted(names)


def unchanged(folder: str):
    """Context: the body must leave every file and folder under `folder` as it was (S8.3)."""

    class Unchanged:
        def __enter__(self):
            self.files, self.listing = table_fingerprint(folder), folder_listing(folder)

        def __exit__(self, *exc_info):
            assert table_fingerprint(folder) == self.files
            assert folder_listing(folder) == self.listing
            return False

    return Unchanged()


def _is_identity(base: Location, uri: str) -> bool:
    """Is `uri` the identity of the root `base` (its `__cluster_metadata` table)?"""
    return uri[len(base.uri) + 1 :].split("/", 1)[0] == CLUSTER_METADATA_DIR


class FakeClock:
    """A clock in milliseconds that moves only when a test says so: pass it as `clock=` (S4.7, S6.5 timeouts).

    `FakeClock()` starts at a fixed instant; `FakeClock(wall_clock_ms())` starts at now, for tests whose other
    processes run on the wall clock (advancing it then reads as "that much later" to the in-test actors only).
    """

    def __init__(self, start_ms: int = 1_000_000_000_000) -> None:
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> int:
        """Move the clock `ms` milliseconds on; returns the new time."""
        if ms < 0:
            raise ValueError(f"a clock does not go back ({ms} ms)")
        self.now_ms += ms
        return self.now_ms


class Crash(Exception):
    """Stands for a process dying at a fault point (in-process crash tests; tests/processes kills real ones)."""


def crash_at(point: str, index: int | None = None):
    """A coordinator fault hook raising Crash at `point` (and, if given, at the marker of partition `index`)."""

    def hook(name, details):
        if name == point and (index is None or details.get("index") == index):
            raise Crash(f"{name} {details}")

    return hook


def topic_rows(root: str, topic: str, isolation_level: str = "read_committed") -> list[dict]:
    """Every data row (key, value, headers) of every partition of `topic`, as a reader with `isolation_level` sees it."""
    from lakelog.log import open_partition

    rows: list[dict] = []
    for partition in range(open_partition(root, topic, 0).config.num_partitions):
        log = open_partition(root, topic, partition)
        offset = 0
        while offset < log.high_watermark():
            fetched = log.fetch(offset, max_records=100_000, max_bytes=1 << 28, isolation_level=isolation_level)
            data = fetched.rows.filter(fetched.rows.column("control").is_null())
            rows.extend(data.select(["key", "value", "headers"]).to_pylist())
            if fetched.next_offset <= offset:
                break
            offset = fetched.next_offset
    return rows


def root_logger_state() -> tuple[int, list[logging.Handler]]:
    """The root logger's level and handlers, leaving out pytest's own (it adds and removes them around each phase)."""
    root = logging.getLogger()
    return root.level, [handler for handler in root.handlers if type(handler).__module__ != "_pytest.logging"]
