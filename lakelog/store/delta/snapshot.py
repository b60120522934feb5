"""A Delta table's state at one version, replayed from its log (Delta's PROTOCOL.md, "Action Reconciliation").

`Snapshot` holds what lakelog reads of a table: the active files (their add
actions, and each file's statistics as a `DataFile`, parsed once), the
tombstones (remove actions, kept until the table's
`delta.deletedFileRetentionDuration` has passed since their deletion
timestamp, for vacuum and for telling a commit in the past, S9.5), the
metadata, the protocol and the app transactions (`txn`). `apply` moves it one
version on with a commit's actions; a checkpoint is this state written out.
What a layer above derives from the files (the log's offset-ordered index) is
kept here per version (`derived`) and moved across each commit as it is
applied, so it is never stale and never made twice for a version.

Reconciliation as the spec gives it: the last `add` or `remove` of a path wins
(an add takes the path's tombstone away, a remove its add); the last `txn` of
an app id, the last `metaData` and the last `protocol` win.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from lakelog.store.delta.actions import COMMIT_ID_KEY, LAKELOG_WRITER_FEATURE, TABLE_ID_KEY
from lakelog.store.delta.data_file import DataFile, data_file
from lakelog.store.delta.schema import arrow_schema

logger = logging.getLogger(__name__)

# Held while a snapshot makes its checkpoint's tombstones into bodies (two threads asking at once read them once).
_READING_TOMBSTONES = threading.Lock()

T = TypeVar("T")


@dataclass(frozen=True)
class FileChange:
    """What the commit of `version` did to the active files: the files it added, and whether it removed any."""

    version: int
    added: tuple[DataFile, ...]
    removed: bool


# How a derived value follows a commit: the value at the version after it, or None to derive it again when asked.
Step = Callable[[Any, FileChange], Any]


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
        self._entries: dict[str, DataFile] = {}
        # Values a layer above derived from this snapshot (`derived`), by its key: (version, value, step).
        self._derived: dict[object, tuple[int, Any, Step | None]] = {}
        self._schema: tuple[str, pa.Schema] | None = None
        # The lakelog commit id of the commit at `version`, if this snapshot read that commit (not a checkpoint's).
        self.commit_id: str | None = None

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
        self.commit_id = info[COMMIT_ID_KEY]
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
        self.version = version
        self._carry_derived(version, added, removed)

    def _carry_derived(self, version: int, added: list[str], removed: bool) -> None:
        """Move each derived value of the version before with its step (an append's commit costs the new files only)."""
        if not self._derived:
            return
        carried: dict[object, tuple[int, Any, Step | None]] = {}
        change: FileChange | None = None
        for key, (at, value, step) in list(self._derived.items()):  # a reader may add one meanwhile
            if step is None or at != version - 1:
                continue
            if change is None:
                if any(path not in self.adds for path in added):
                    self._derived = {}  # an add the same commit removed: derive again when asked
                    return
                change = FileChange(version, tuple(self.entry(path) for path in dict.fromkeys(added)), removed)
            moved = step(value, change)
            if moved is not None:
                carried[key] = (version, moved, step)
        self._derived = carried

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
        other.commit_id = self.commit_id
        return other

    def still_holds(self, actions: list[dict[str, Any]]) -> bool:
        """Whether `actions`, commit `version` read again, is still the commit this snapshot ends with: False if the
        table was deleted and made again under its name up to the same version (another table id or commit id).

        A table lakelog does not write (no commit info to tell) is taken as unchanged.
        """
        if not _is_lakelog_protocol(self.protocol):
            return True
        info = next((action["commitInfo"] for action in actions if "commitInfo" in action), None)
        if not isinstance(info, dict) or not isinstance(info.get(COMMIT_ID_KEY), str):
            raise DamagedLog(f"commit {self.version} {'is empty' if not actions else 'has no lakelog commit info'} now")
        table = info.get(TABLE_ID_KEY)
        if table is not None and table != self.table_id:
            return False
        if self.commit_id is not None and info[COMMIT_ID_KEY] != self.commit_id:
            return False
        self.commit_id = info[COMMIT_ID_KEY]
        return True

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

    def entry(self, path: str, add: dict[str, Any] | None = None) -> DataFile:
        """The active file `path` with its statistics (parsed once)."""
        found = self._entries.get(path)
        if found is None:
            found = self._entries[path] = data_file(self.adds[path] if add is None else add)
        return found

    def entries(self) -> list[DataFile]:
        """Active files in no order (a copy of the adds is taken first: another thread may apply a commit)."""
        return [self.entry(path, add) for path, add in list(self.adds.items())]

    def derived(
        self, key: object, derive: Callable[[list[DataFile]], T], step: Callable[[T, FileChange], T | None] | None = None
    ) -> T:
        """A value a layer above derives from the active files, made once per version and kept by `key`.

        `derive(files)` makes it from the files in no order; `step(value, change)`, if given, moves it across a
        commit as the commit is applied (None: derive it again when next asked), so a value such as an ordered
        index costs an append's commit only its new files.
        """
        version = self.version
        found = self._derived.get(key)
        if found is not None and found[0] == version:
            value: T = found[1]
            return value
        value = derive(self.entries())
        self._derived[key] = (version, value, step)
        return value


def _is_lakelog_protocol(protocol: Any) -> bool:
    features = protocol.get("writerFeatures") if isinstance(protocol, dict) else None
    return isinstance(features, list) and LAKELOG_WRITER_FEATURE in features


def replay(commits: list[tuple[int, list[dict[str, Any]]]], start: Snapshot | None = None) -> Snapshot:
    """The snapshot after `commits` (ascending versions, each one after the other), from `start` or from nothing."""
    snapshot = start if start is not None else Snapshot(commits[0][0] - 1 if commits else -1)
    for version, actions in commits:
        snapshot.apply(actions, version)
    return snapshot


__all__ = ["DamagedLog", "FileChange", "Snapshot", "SnapshotError", "replay"]
