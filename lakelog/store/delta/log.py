"""A table's `_delta_log` folder: reading commits and checkpoints into a `Snapshot`, putting commits, writing checkpoints.

Costs, which are the point of this module (none grows with the commit files kept):

- `advance` moves a snapshot forward by reading `<v+1>.json`, `<v+2>.json`, ...
  until one is absent: a GET (an open) per version, never a listing. When none
  is newer it also looks up `<v>.json` (one HEAD): log cleanup deletes commit
  files in ascending version order, so if `<v>.json` is still there, `<v+1>.json`
  was never deleted and the snapshot is the latest; if it is gone, the log has
  moved past this snapshot's reach and the snapshot is loaded cold.
- `load` (a cold open) reads `_last_checkpoint`, the checkpoint it names, and
  the commits after it, then lists the folder once to prove the end: a commit
  after the first absent version is a hole (DamagedLog), which no writer may
  fill. An unreadable checkpoint is passed over for an older one, or for the
  commits from `0.json` (logged). With no `_last_checkpoint` it replays from `0.json`.
  Only if neither is there (a table whose `_last_checkpoint` was lost after
  cleanup), or the checkpoint it names is gone, is the folder listed once to find
  the newest checkpoint: on S3 one request per 1,000 keys, starting after the
  named checkpoint when there is one; on a local root one directory read.
- `put_commit` is one put-if-absent of `<v+1>.json`.
- `write_checkpoint` writes the Parquet checkpoint and then `_last_checkpoint`,
  unless that already names a newer one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import KafkaStorageError
from lakelog.store.delta.actions import decode_commit
from lakelog.store.delta.checkpoint import checkpoint_table, last_checkpoint, read_last_checkpoint, snapshot_from_checkpoint
from lakelog.store.delta.snapshot import DamagedLog, Snapshot
from lakelog.store.io.fileio import one_line
from lakelog.store.io.location import Location

logger = logging.getLogger(__name__)

DELTA_LOG = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_COMMIT = re.compile(r"^(\d{20})\.json$")
# A cold open that meets a file cleanup deleted under it starts again (cleanup only deletes behind newer checkpoints).
LOAD_ATTEMPTS = 5


class TableNotFoundError(Exception):
    """No Delta table at this location (no commit, no checkpoint)."""


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int, part: int | None = None, parts: int | None = None) -> str:
    if part is None or parts is None:
        return f"{version:020d}.checkpoint.parquet"
    return f"{version:020d}.checkpoint.{part:010d}.{parts:010d}.parquet"


class DeltaLog:
    """The `_delta_log` folder of the table at `location`."""

    def __init__(self, location: Location) -> None:
        self.location = location
        self.io = location.io
        self.uri = f"{location.uri.rstrip('/')}/{DELTA_LOG}"

    def file_uri(self, name: str) -> str:
        return f"{self.uri}/{name}"

    # -- commits -----------------------------------------------------------------------

    def read_commit(self, version: int) -> list[dict] | None:
        """The actions of commit `version`, or None if its file is absent."""
        try:
            data = self.io.read(self.file_uri(commit_name(version)))
        except FileNotFoundError:
            return None
        return decode_commit(data, f"{self.file_uri(commit_name(version))}")

    def read_commit_bytes(self, version: int) -> bytes | None:
        try:
            return self.io.read(self.file_uri(commit_name(version)))
        except FileNotFoundError:
            return None

    def commit_exists(self, version: int) -> bool:
        return self.io.file_exists(self.file_uri(commit_name(version)))

    def put_commit(self, version: int, data: bytes) -> bool:
        """Put-if-absent of `<version>.json`: True if this call created it, False if the version was taken."""
        return self.io.put_if_absent(self.file_uri(commit_name(version)), data)

    def delete_commit(self, version: int) -> bool:
        return self.io.delete(self.file_uri(commit_name(version)))

    # -- the snapshot -------------------------------------------------------------------

    def advance(self, snapshot: Snapshot) -> Snapshot:
        """`snapshot` moved to the latest version (in place), or a cold-loaded one if the log moved past its reach."""
        moved = False
        while True:
            actions = self.read_commit(snapshot.version + 1)
            if actions is None:
                break
            snapshot.apply(actions, snapshot.version + 1)
            moved = True
        if moved or snapshot.version < 0:
            return snapshot
        # The one in hand, read again (a GET, as cheap as a HEAD for a commit): still there, and still this table's.
        current = self.read_commit(snapshot.version)
        if current is not None:
            if not snapshot.still_holds(current):
                raise DamagedLog(f"commit {snapshot.version} belongs to another table now: a table deleted and made again?")
            return snapshot
        logger.info(
            "%s: commit %d is gone (log cleanup): opening from the latest checkpoint", self.location.uri, snapshot.version
        )
        return self.load()

    def load(self, version: int | None = None) -> Snapshot:
        """The snapshot at the latest version (or at `version`): `TableNotFoundError` if there is no table."""
        for attempt in range(LOAD_ATTEMPTS):
            try:
                return self._load(version)
            except _Vanished as vanished:
                if attempt == LOAD_ATTEMPTS - 1:
                    raise KafkaStorageError(
                        f"opening {self.location.uri}: {vanished} was deleted under each of {LOAD_ATTEMPTS} attempts",
                        uri=self.location.uri,
                    ) from None
                logger.debug("%s: %s vanished while opening; again", self.location.uri, vanished)
        raise AssertionError("unreachable")

    def _load(self, version: int | None) -> Snapshot:
        listed: list[str] = []  # the folder's names, if `_start` listed it (then the end's proof need not list again)
        start = self._start(version, listed)
        snapshot = Snapshot(-1) if start is None else self._open_checkpoint(start, version)
        first = snapshot.version
        while True:
            while version is None or snapshot.version < version:
                actions = self.read_commit(snapshot.version + 1)
                if actions is None:
                    break
                snapshot.apply(actions, snapshot.version + 1)
            if version is not None or snapshot.version < 0 or not self._beyond_the_end(snapshot.version, listed):
                break
            listed = []
        if snapshot.version < 0:
            raise TableNotFoundError(f"no Delta table at {self.location.uri}")
        if version is not None and snapshot.version != version:
            raise TableNotFoundError(f"version {version} of {self.location.uri} is not in its log")
        if version is None and snapshot.version == first and not self.commit_exists(first):
            # Cleanup deleted the checkpoint's successors after it was read: the log moved past it.
            raise _Vanished(commit_name(first))
        snapshot.check(self.location.uri)
        return snapshot

    def _beyond_the_end(self, version: int, listed: list[str]) -> bool:
        """The proof that `version` ends the log (its successor was absent): one listing of the folder.

        True if the successor is listed now (a writer committed it meanwhile: read on); DamagedLog if a later commit
        is there without it: a hole, which a writer must never fill (its commit would take an offset the log gave).
        `listed`, a listing made before the successor was found absent, is proof enough that nothing is later (a
        writer commits w only after w-1); what it shows later than `version` is listed again before it is believed.
        """
        if listed and not _commits_after(listed, version):
            return False
        later = _commits_after(list(self.names()), version)
        if not later:
            return False
        if later[0] == version + 1:
            return True
        raise DamagedLog(f"commit {version + 1} is missing while commit {later[0]} is there (a hole in the log)")

    def _open_checkpoint(self, start: tuple[int, int | None], version: int | None) -> Snapshot:
        """The snapshot of the checkpoint `start`; if it is unreadable, of an older one or of no checkpoint (logged)."""
        while True:
            try:
                return self._read_checkpoint(*start)
            except _Unreadable as unreadable:
                older = self.latest_checkpoint(before=start[0])
                if older is None and not self.commit_exists(0):
                    raise DamagedLog(f"{unreadable} and the commits before it are gone") from None
                logger.warning(
                    "%s: %s; opening from %s instead (`lakelog verify --repair` writes it again)",
                    self.location.uri,
                    unreadable,
                    f"checkpoint {older[0]}" if older is not None else "the first commit",
                )
                if older is None:
                    return Snapshot(-1)
                start = older

    def _start(self, version: int | None, listed: list[str]) -> tuple[int, int | None] | None:
        """The checkpoint (version, parts) to start from; None: replay from 0.json."""
        try:
            named = read_last_checkpoint(self.io.read(self.file_uri(LAST_CHECKPOINT)))
        except FileNotFoundError:
            named = None
        if named is not None and (version is None or named[0] <= version) and self._checkpoint_exists(*named):
            return named
        if (named is None or version is not None) and self.commit_exists(0):
            return None
        # `_last_checkpoint` is missing or names a checkpoint that is gone, and 0.json is gone: list once.
        listed.extend(self.names())
        found = self.latest_checkpoint(before=None if version is None else version + 1, names=listed)
        if found is not None:
            return found
        if self.commit_exists(0):
            return None
        if named is not None:
            raise _Vanished(checkpoint_name(named[0]))
        raise TableNotFoundError(f"no Delta table at {self.location.uri}")

    def _checkpoint_exists(self, version: int, parts: int | None) -> bool:
        return self.io.file_exists(self.file_uri(checkpoint_name(version, 1 if parts else None, parts)))

    def _read_checkpoint(self, version: int, parts: int | None) -> Snapshot:
        names = [checkpoint_name(version)] if not parts else [checkpoint_name(version, i, parts) for i in range(1, parts + 1)]
        tables, removes = [], []
        for name in names:
            try:
                data = self.io.read(self.file_uri(name))
            except FileNotFoundError:
                raise _Vanished(name) from None
            try:
                # One file read as it is, on this thread: read_table's dataset layer and thread pool cost more than the read.
                parquet = pq.ParquetFile(pa.BufferReader(data))
                columns = parquet.schema_arrow.names
                # The tombstones (every file removed within the retention) are decoded when first asked for, and the
                # row groups that hold nothing else (lakelog writes them apart) are not read for the other actions.
                tables.append(
                    parquet.read_row_groups(
                        _groups_with_live_actions(parquet.metadata),
                        columns=[column for column in columns if column != "remove"],
                        use_threads=False,
                    )
                )
                if "remove" in columns:
                    removes.append(lambda parquet=parquet: parquet.read(columns=["remove"], use_threads=False).column("remove"))
            except pa.ArrowException as error:
                raise _Unreadable(f"checkpoint {self.file_uri(name)} is unreadable ({one_line(error)})") from error
        try:
            return snapshot_from_checkpoint(tables, version, removes)
        except (KeyError, TypeError, ValueError, pa.ArrowException) as error:
            raise _Unreadable(f"checkpoint {self.file_uri(names[0])} holds malformed actions ({one_line(error)})") from error

    def latest_checkpoint(self, *, before: int | None = None, names: list[str] | None = None) -> tuple[int, int | None] | None:
        """The newest complete checkpoint (below `before`), by one listing of the folder (or in `names`, one made)."""
        found: dict[int, set[int]] = {}
        totals: dict[int, int | None] = {}
        for name in self.names() if names is None else names:
            match = _CHECKPOINT.match(name)
            if match is None:
                continue
            version = int(match.group(1))
            if before is not None and version >= before:
                continue
            if match.group(2) is None:
                totals[version] = None
                found.setdefault(version, set())
            else:
                parts = int(match.group(3))
                found.setdefault(version, set()).add(int(match.group(2)))
                if len(found[version]) == parts:
                    totals.setdefault(version, parts)
        return (max(totals), totals[max(totals)]) if totals else None

    def names(self) -> Iterator[str]:
        """Names of the log's files (one listing)."""
        for entry in self.io.list(self.uri):
            if not entry.is_dir:
                yield entry.name

    def exists(self) -> bool:
        """Whether a table is here: a `_last_checkpoint`, a `0.json`, or (listed) any commit or checkpoint."""
        if self.io.file_exists(self.file_uri(LAST_CHECKPOINT)) or self.commit_exists(0):
            return True
        return any(_COMMIT.match(name) or _CHECKPOINT.match(name) for name in self.names())

    # -- checkpoints -------------------------------------------------------------------

    def write_checkpoint(self, snapshot: Snapshot, tombstone_cutoff_ms: int) -> None:
        """Write the checkpoint of `snapshot`, then point `_last_checkpoint` at it unless it names a newer one."""
        table = checkpoint_table(snapshot, tombstone_cutoff_ms)
        # The tombstones (the table's last rows) go in a row group of their own, which a cold open skips.
        removes = table.column("remove").length() - table.column("remove").null_count
        sink = pa.BufferOutputStream()
        # No dictionaries (paths and statistics are unique strings), and statistics only where a reader skips row
        # groups by them: 1.47 -> 1.25 ms and 35 -> 25 KB for a checkpoint of 33 actions and 100 tombstones.
        with pq.ParquetWriter(
            sink, table.schema, compression="snappy", use_dictionary=False, write_statistics=list(_LIVE_ACTION_LEAVES)
        ) as writer:
            writer.write_table(table.slice(0, table.num_rows - removes))
            if removes:
                writer.write_table(table.slice(table.num_rows - removes))
        data = sink.getvalue()
        self.io.write(self.file_uri(checkpoint_name(snapshot.version)), data)
        try:
            named = read_last_checkpoint(self.io.read(self.file_uri(LAST_CHECKPOINT)))
        except FileNotFoundError:
            named = None
        if named is not None and named[0] >= snapshot.version:
            return
        self.io.write(self.file_uri(LAST_CHECKPOINT), last_checkpoint(snapshot.version, table, data.size))


# A leaf of each action other than `remove` that is never null in a row of that action.
_LIVE_ACTION_LEAVES = ("add.path", "metaData.id", "protocol.minReaderVersion", "txn.appId")


def _groups_with_live_actions(metadata: pq.FileMetaData) -> list[int]:
    """The row groups of a checkpoint that may hold an action other than `remove`, by their null counts.

    A row group whose statistics say every one of those leaves is null holds only tombstones. A row group
    without statistics is read.
    """
    paths = {metadata.schema.column(index).path: index for index in range(metadata.num_columns)}
    leaves = [paths[path] for path in _LIVE_ACTION_LEAVES if path in paths]
    groups = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for leaf in leaves:
            statistics = row_group.column(leaf).statistics
            if statistics is None or not statistics.has_null_count or statistics.null_count < row_group.num_rows:
                groups.append(group)
                break
    return groups if leaves else list(range(metadata.num_row_groups))


def _commits_after(names: list[str], version: int) -> list[int]:
    return sorted(int(match.group(1)) for match in map(_COMMIT.match, names) if match and int(match.group(1)) > version)


class _Vanished(Exception):
    """A log file the open chose was deleted before it was read."""


class _Unreadable(Exception):
    """A checkpoint whose bytes are not a checkpoint (truncated, garbled): the commits it sums up may still be there."""


__all__ = ["DELTA_LOG", "DeltaLog", "LAST_CHECKPOINT", "TableNotFoundError", "checkpoint_name", "commit_name"]
