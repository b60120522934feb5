"""A Delta table's state at one version, replayed from its log (Delta's PROTOCOL.md, "Action Reconciliation").

`Snapshot` holds what lakelog reads of a table: the active files (their add
actions, with statistics), the tombstones (remove actions, kept until the
table's `delta.deletedFileRetentionDuration` has passed since their deletion
timestamp, for vacuum and for telling a commit in the past, S9.5), the
metadata, the protocol and the app transactions (`txn`). `apply` moves it one
version on with a commit's actions; a checkpoint is this state written out.

Reconciliation as the spec gives it: the last `add` or `remove` of a path wins
(an add takes the path's tombstone away, a remove its add); the last `txn` of
an app id, the last `metaData` and the last `protocol` win.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakelog.store.delta.actions import COMMIT_ID_KEY, LAKELOG_WRITER_FEATURE, TABLE_ID_KEY
from lakelog.store.delta.schema import arrow_schema

logger = logging.getLogger(__name__)

# Held while a snapshot makes its checkpoint's tombstones into bodies (two threads asking at once read them once).
_READING_TOMBSTONES = threading.Lock()


@dataclass(frozen=True)
class FileEntry:
    """One active data file of a snapshot, with the offset range its statistics give."""

    path: str
    min_offset: int
    max_offset: int
    num_records: int
    size_bytes: int
    min_producer_id: int
    max_producer_id: int
    # The add action's modificationTime: when the file was committed, by the clock its writer passed in.
    modification_time_ms: int = 0
    # Rows whose key is null, from the statistics (-1: not recorded): a file of markers only has no keyed row.
    null_keys: int = -1
    # The add action's `tags` (what its writer said of the file), sorted by key.
    tags: tuple[tuple[str, str], ...] = ()

    def tag(self, key: str) -> str | None:
        for name, value in self.tags:
            if name == key:
                return value
        return None


class SnapshotError(ValueError):
    """A log that cannot be replayed: a commit out of order, or a table with no metadata."""


class DamagedLog(SnapshotError):
    """A commit that cannot be lakelog's: empty, without lakelog's commit info, of another table, or malformed.

    Permanent damage (the store returned bytes no lakelog writer put there), not an outage: read as CorruptRecord.
    """


class Snapshot:
    """The replayed state of one table at `version` (mutable: `apply` advances it in place)."""

    def __init__(self, version: int = -1) -> None:
        self.version = version
        self.protocol: dict[str, Any] | None = None
        self.metadata: dict[str, Any] | None = None
        self.adds: dict[str, dict[str, Any]] = {}
        # The tombstones (see `tombstones`): those of commits after the checkpoint, and the checkpoint's, unread
        # until first asked for (a cold open and the appends after it need none), less those an add took away.
        self._tombstones: dict[str, dict[str, Any]] = {}
        self._unread_tombstones: Callable[[], list[dict[str, Any]]] | None = None
        self._taken_away: set[str] = set()
        self.txns: dict[str, dict[str, Any]] = {}
        self._entries: dict[str, FileEntry] = {}
        self._ordered: tuple[int, list[FileEntry]] | None = None
        self._schema: tuple[str, pa.Schema] | None = None

    # -- replay ------------------------------------------------------------------

    def apply(self, actions: list[dict[str, Any]], version: int) -> None:
        """Move to `version` (exactly one after this one) with the commit's actions."""
        if version != self.version + 1:
            raise SnapshotError(f"commit {version} cannot follow version {self.version}")
        self._check_commit(actions, version)
        try:
            self._reconcile(actions, version)
        except (KeyError, TypeError, AttributeError) as error:
            raise DamagedLog(f"commit {version} holds a malformed action ({type(error).__name__}: {error})") from None

    def _check_commit(self, actions: list[dict[str, Any]], version: int) -> None:
        """DamagedLog unless a commit of a lakelog table is lakelog's, of this table (S12.3, S9.5).

        Every commit lakelog makes carries a commitInfo with its commit id and, since tables carry it, the id of the
        table it was decided on. An empty commit file (what a power loss can leave), a commit any other writer made,
        and a commit of a deleted table of the same name (a zombie's debris) are refused, never read as a commit.
        """
        protocol = self.protocol
        if protocol is None:
            protocol = next((action["protocol"] for action in actions if isinstance(action.get("protocol"), dict)), None)
        if not _is_lakelog_protocol(protocol):
            return
        info = next((action["commitInfo"] for action in actions if "commitInfo" in action), None)
        if not isinstance(info, dict) or not isinstance(info.get(COMMIT_ID_KEY), str):
            what = "is empty" if not actions else "has no lakelog commit info"
            raise DamagedLog(f"commit {version} {what}: no lakelog writer made it")
        table = info.get(TABLE_ID_KEY)
        if table is None:
            return  # a commit of a writer from before tables carried their id
        current = self.metadata.get("id") if self.metadata is not None else None
        if current is None:
            current = next((action["metaData"].get("id") for action in actions if isinstance(action.get("metaData"), dict)), None)
        if table != current:
            raise DamagedLog(f"commit {version} belongs to another table ({table}, not {current}): a deleted table's debris?")

    def _reconcile(self, actions: list[dict[str, Any]], version: int) -> None:
        added: list[str] = []
        removed = False
        for action in actions:
            if "add" in action:
                body = action["add"]
                path = body["path"]
                removed = removed or path in self.adds
                added.append(path)
                self.adds[path] = body
                self._entries.pop(path, None)
                self._tombstones.pop(path, None)
                if self._unread_tombstones is not None:
                    self._taken_away.add(path)
            elif "remove" in action:
                body = action["remove"]
                path = body["path"]
                removed = True
                self.adds.pop(path, None)
                self._entries.pop(path, None)
                self._tombstones[path] = body
                self._taken_away.discard(path)
            elif "txn" in action:
                body = action["txn"]
                self.txns[body["appId"]] = body
            elif "metaData" in action:
                self.metadata = action["metaData"]
            elif "protocol" in action:
                self.protocol = action["protocol"]
        self._carry_order(version, added, removed)
        self.version = version

    def _carry_order(self, version: int, added: list[str], removed: bool) -> None:
        """Keep `files()`'s order across a commit that only appends files after the last one (an append's commit)."""
        ordered, self._ordered = self._ordered, None
        if ordered is None or ordered[0] != version - 1 or removed:
            return
        if not added:
            self._ordered = (version, ordered[1])
            return
        if any(path not in self.adds for path in added):
            return
        entries = sorted((self.entry(path) for path in dict.fromkeys(added)), key=_order)
        if ordered[1] and _order(entries[0]) < _order(ordered[1][-1]):
            return
        self._ordered = (version, ordered[1] + entries)

    @property
    def tombstones(self) -> dict[str, dict[str, Any]]:
        """The remove actions still kept, by path (a checkpoint's are made into action bodies on the first call)."""
        if self._unread_tombstones is not None:
            with _READING_TOMBSTONES:
                read = self._unread_tombstones
                if read is not None:
                    kept = {body["path"]: body for body in read() if body["path"] not in self._taken_away}
                    kept.update(self._tombstones)
                    self._tombstones, self._taken_away = kept, set()
                    self._unread_tombstones = None
        return self._tombstones

    def defer_tombstones(self, read: Callable[[], list[dict[str, Any]]]) -> None:
        """The tombstones of a checkpoint this snapshot starts from: `read()` gives their bodies when first needed."""
        self._unread_tombstones = read

    def expire_tombstones(self, cutoff_ms: int) -> int:
        """Drop tombstones deleted before `cutoff_ms` (as a checkpoint does); returns how many."""
        expired = [path for path, body in self.tombstones.items() if (body.get("deletionTimestamp") or 0) < cutoff_ms]
        for path in expired:
            del self.tombstones[path]
        return len(expired)

    def copy(self) -> Snapshot:
        """An independent copy (the action bodies are shared: they are never changed in place)."""
        other = Snapshot(self.version)
        other.protocol, other.metadata = self.protocol, self.metadata
        other.adds, other._tombstones, other.txns = dict(self.adds), dict(self._tombstones), dict(self.txns)
        other._unread_tombstones, other._taken_away = self._unread_tombstones, set(self._taken_away)
        other._entries = dict(self._entries)
        other._schema = self._schema
        return other

    # -- reading -------------------------------------------------------------------

    def check(self, where: str) -> None:
        """SnapshotError unless the state has the metadata and protocol every Delta table has."""
        if self.metadata is None or self.protocol is None:
            raise SnapshotError(f"{where} at version {self.version} has no {'metaData' if self.metadata is None else 'protocol'}")

    @property
    def table_id(self) -> str:
        return (self.metadata or {}).get("id", "")

    @property
    def configuration(self) -> dict[str, str]:
        return {key: value for key, value in ((self.metadata or {}).get("configuration") or {}).items() if value is not None}

    @property
    def schema_string(self) -> str:
        return (self.metadata or {}).get("schemaString", '{"type":"struct","fields":[]}')

    @property
    def schema(self) -> pa.Schema:
        text = self.schema_string
        if self._schema is None or self._schema[0] != text:
            self._schema = (text, arrow_schema(text))
        return self._schema[1]

    def app_version(self, app_id: str) -> int | None:
        body = self.txns.get(app_id)
        return None if body is None else int(body["version"])

    def entry(self, path: str, add: dict[str, Any] | None = None) -> FileEntry:
        """The active file `path` with what its statistics say (parsed once)."""
        found = self._entries.get(path)
        if found is None:
            found = self._entries[path] = file_entry(self.adds[path] if add is None else add)
        return found

    def entries(self) -> list[FileEntry]:
        """Active files in no order (a copy of the adds is taken first: another thread may apply a commit)."""
        return [self.entry(path, add) for path, add in list(self.adds.items())]

    def files(self) -> list[FileEntry]:
        """Active files ordered by first offset (then path); cached per version."""
        ordered = self._ordered
        if ordered is None or ordered[0] != self.version:
            version = self.version
            entries = self.entries()
            entries.sort(key=_order)
            ordered = self._ordered = (version, entries)
        return ordered[1]


def _is_lakelog_protocol(protocol: Any) -> bool:
    features = protocol.get("writerFeatures") if isinstance(protocol, dict) else None
    return isinstance(features, list) and LAKELOG_WRITER_FEATURE in features


def _order(entry: FileEntry) -> tuple[int, str]:
    return entry.min_offset, entry.path


def file_entry(add: dict[str, Any]) -> FileEntry:
    """A `FileEntry` from an add action's body; statistics a file lacks read as 0 (and null keys as -1)."""
    stats = add.get("stats")
    parsed: dict[str, Any] = {}
    if isinstance(stats, str) and stats:
        try:
            parsed = json.loads(stats)
        except ValueError:
            parsed = {}
    minimums = parsed.get("minValues") or {}
    maximums = parsed.get("maxValues") or {}
    nulls = parsed.get("nullCount") or {}
    null_keys = nulls.get("key")
    return FileEntry(
        path=add["path"],
        min_offset=_integer(minimums.get("offset")),
        max_offset=_integer(maximums.get("offset")),
        num_records=_integer(parsed.get("numRecords")),
        size_bytes=_integer(add.get("size")),
        min_producer_id=_integer(minimums.get("producer_id")),
        max_producer_id=_integer(maximums.get("producer_id")),
        modification_time_ms=_integer(add.get("modificationTime")),
        null_keys=null_keys if isinstance(null_keys, int) else -1,
        tags=_tags(add.get("tags")),
    )


def _tags(value: Any) -> tuple[tuple[str, str], ...]:
    """An add action's tags as sorted pairs (a map of strings; anything else reads as none)."""
    if not isinstance(value, dict) or not value:
        return ()
    return tuple(sorted((key, item) for key, item in value.items() if type(key) is str and type(item) is str))


def _integer(value: Any) -> int:
    return value if type(value) is int else 0  # not a bool, nor anything else JSON gives


def replay(commits: list[tuple[int, list[dict[str, Any]]]], start: Snapshot | None = None) -> Snapshot:
    """The snapshot after `commits` (ascending versions, each one after the other), from `start` or from nothing."""
    snapshot = start if start is not None else Snapshot(commits[0][0] - 1 if commits else -1)
    for version, actions in commits:
        snapshot.apply(actions, version)
    return snapshot


__all__ = ["DamagedLog", "FileEntry", "Snapshot", "SnapshotError", "file_entry", "replay"]
