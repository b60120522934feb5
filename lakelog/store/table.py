"""Delta table access with the strict commit: exactly version v+1, or `CommitConflict`.

This is the only module that imports `deltalake`. A `Table` holds one handle at a
known snapshot version. Callers decide on that snapshot, then `append` commits
version `version + 1` with no retry: if another writer took that version first,
`CommitConflict` is raised, the handle is brought up to date, and the caller
decides again. delta-rs' own retries (which rebase an append onto a newer
version) are always switched off.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import AddAction
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from lakelog.errors import CommitConflict, CorruptRecord, InvalidConfig, KafkaStorageError

# A handle reused for many commits slows down (FINDINGS.md); reopen it this often.
REOPEN_EVERY_COMMITS = 100


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


class Table:
    """One Delta table and a handle at a known snapshot version."""

    def __init__(self, uri: str, handle: DeltaTable) -> None:
        self.uri = uri
        self._handle = handle
        self._commits_on_handle = 0
        self._files: tuple[int, list[FileEntry]] | None = None

    # -- opening and creating -------------------------------------------------

    @classmethod
    def open(cls, uri: str) -> Table:
        """Open an existing table at its latest version; `TableNotFoundError` if absent."""
        return cls(uri, load_handle(uri))

    @classmethod
    def create(cls, uri: str, schema: pa.Schema, configuration: Mapping[str, str]) -> tuple[Table, bool]:
        """Create the table as version 0 (put-if-absent); returns (table, created by this call)."""
        Path(uri).mkdir(parents=True, exist_ok=True)
        try:
            handle = DeltaTable.create(
                uri,
                schema,
                mode="error",
                configuration=dict(configuration),
                raise_if_key_not_exists=False,
                # With retries a creator that lost version 0 would commit a second CREATE as version 1.
                commit_properties=CommitProperties(max_commit_retries=0),
            )
            return cls(uri, handle), True
        except DeltaError:
            if DeltaTable.is_deltatable(uri):
                return cls.open(uri), False
            raise

    @staticmethod
    def exists(uri: str) -> bool:
        return DeltaTable.is_deltatable(uri)

    # -- the snapshot in hand -------------------------------------------------

    @property
    def version(self) -> int:
        return self._handle.version()

    @property
    def table_id(self) -> str:
        """The Delta table's id: a table created again in the same place gets a new one."""
        return self._handle.metadata().id

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self._handle.metadata().configuration)

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(self._handle.schema().to_arrow())

    def app_version(self, app_id: str) -> int | None:
        """The `txn` version recorded for `app_id` in this snapshot (survives checkpoints)."""
        return self._handle.transaction_version(app_id)

    def files(self) -> list[FileEntry]:
        """Active data files of this snapshot, ordered by first offset; cached per version."""
        version = self.version
        if self._files is None or self._files[0] != version:
            actions = pa.table(self._handle.get_add_actions(flatten=True))
            entries = []
            if actions.num_rows:
                columns = actions.to_pydict()
                for i in range(actions.num_rows):
                    entries.append(
                        FileEntry(
                            path=columns["path"][i],
                            min_offset=columns["min.offset"][i],
                            max_offset=columns["max.offset"][i],
                            num_records=columns["num_records"][i],
                            size_bytes=columns["size_bytes"][i],
                            min_producer_id=columns["min.producer_id"][i],
                            max_producer_id=columns["max.producer_id"][i],
                        )
                    )
            entries.sort(key=lambda entry: entry.min_offset)
            self._files = (version, entries)
        return self._files[1]

    def file_path(self, entry: FileEntry) -> str:
        return os.path.join(self.uri, entry.path)

    def data_paths(self) -> list[str]:
        """Paths of the active data files of this snapshot, for tables of any schema (views, status)."""
        actions = pa.table(self._handle.get_add_actions(flatten=True))
        if not actions.num_rows:
            return []
        return sorted(os.path.join(self.uri, path) for path in actions.column("path").to_pylist())

    def pin(self, app_ids: tuple[str, ...] = ()) -> PinnedSnapshot:
        """This snapshot as a `PinnedSnapshot`: its files, the `txn` versions of `app_ids`, schema and config."""
        return PinnedSnapshot(
            self.uri,
            version=self.version,
            table_id=self.table_id,
            files=tuple(self.files()),
            app_versions={app_id: self.app_version(app_id) for app_id in app_ids},
            schema=self.schema,
            configuration=self.configuration,
        )

    def read_file(self, entry: FileEntry, columns: list[str] | None = None, predicate: pc.Expression | None = None) -> pa.Table:
        """Read one data file of the snapshot; a missing or unreadable file is `CorruptRecord`."""
        path = self.file_path(entry)
        where = f"data file {entry.path} of {self.uri} (offsets {entry.min_offset}-{entry.max_offset})"
        try:
            if predicate is None:
                # A whole file reads faster without the dataset layer that filters need.
                with pq.ParquetFile(path) as parquet:
                    return parquet.read(columns=columns)
            return pq.read_table(path, columns=columns, filters=predicate)
        except FileNotFoundError as error:
            raise CorruptRecord(f"{where} is missing", path=path) from error
        except (pa.ArrowException, OSError) as error:
            raise CorruptRecord(f"{where} is unreadable: {error}", path=path) from error

    def history(self, limit: int) -> list[dict]:
        return self._handle.history(limit)

    # -- moving the handle ----------------------------------------------------

    def refresh(self) -> int:
        """Bring the handle to the latest version (reopening an aged handle); returns it."""
        if self._commits_on_handle < REOPEN_EVERY_COMMITS:
            try:
                self._handle.update_incremental()
                return self.version
            except (DeltaError, OSError):
                # Log cleanup may have deleted commits this old handle would replay: load from a checkpoint.
                pass
        self._handle = load_handle(self.uri)
        self._commits_on_handle = 0
        return self.version

    # -- the strict commit ----------------------------------------------------

    def append(
        self,
        data: pa.Table,
        *,
        app_versions: Mapping[str, int] | None = None,
        metadata: Mapping[str, str] | None = None,
        compression: str = "snappy",
    ) -> int:
        """Commit `data` as one new file in version `self.version + 1`, or raise `CommitConflict`.

        The file is written under a fresh name first; if the commit loses its race
        the file is deleted again, so a refused append leaves the folder as it was.
        """
        decided_on = self.version
        name = f"part-{decided_on + 1:020d}-{uuid.uuid4().hex}.parquet"
        path = os.path.join(self.uri, name)
        try:
            pq.write_table(data, path, compression=compression)
            action = AddAction(
                path=name,
                size=os.path.getsize(path),
                partition_values={},
                modification_time=time.time_ns() // 1_000_000,
                data_change=True,
                stats=_statistics(data),
            )
            self._handle.create_write_transaction(
                [action],
                mode="append",
                schema=data.schema,
                commit_properties=CommitProperties(
                    max_commit_retries=0,
                    app_transactions=[Transaction(app_id, version) for app_id, version in (app_versions or {}).items()],
                    custom_metadata=dict(metadata or {}),
                ),
            )
        except CommitFailedError as error:
            _remove_quietly(path)
            self.refresh()
            raise CommitConflict(
                f"version {decided_on + 1} of {self.uri} was taken by another writer",
                decided_on=decided_on,
                current_version=self.version,
            ) from error
        except (DeltaError, OSError) as error:
            raise KafkaStorageError(
                f"committing version {decided_on + 1} of {self.uri} failed: {error}", decided_on=decided_on
            ) from error
        self._commits_on_handle += 1
        self.refresh()
        if self.version < decided_on + 1:
            raise KafkaStorageError(f"{self.uri}: version {decided_on + 1} is not visible after its commit")
        return decided_on + 1

    def commit_files(
        self,
        names: list[str],
        schema: pa.Schema,
        *,
        app_versions: Mapping[str, int] | None = None,
        overwrite: bool = False,
    ) -> int:
        """Commit Parquet files already written in the table's folder as version `self.version + 1`.

        For data written by other engines (Spark's executors). `names` are paths
        relative to the table; their statistics are read from the Parquet footers.
        `overwrite` also removes every file of the snapshot in hand. `app_versions`
        are recorded in the same commit (a job's progress, atomically with its
        data); a commit of no files records only them. Raises `CommitConflict` if
        another writer took the version (the files are left for the caller).
        """
        decided_on = self.version
        actions = []
        for name in names:
            path = os.path.join(self.uri, name)
            try:
                statistics = _footer_statistics(path)
                size = os.path.getsize(path)
            except (OSError, pa.ArrowException) as error:
                raise KafkaStorageError(f"cannot commit {path}: {error}") from error
            actions.append(
                AddAction(
                    path=name,
                    size=size,
                    partition_values={},
                    modification_time=time.time_ns() // 1_000_000,
                    data_change=True,
                    stats=statistics,
                )
            )
        try:
            self._handle.create_write_transaction(
                actions,
                mode="overwrite" if overwrite else "append",
                schema=schema,
                commit_properties=CommitProperties(
                    max_commit_retries=0,
                    app_transactions=[Transaction(app_id, version) for app_id, version in (app_versions or {}).items()],
                ),
            )
        except CommitFailedError as error:
            self.refresh()
            raise CommitConflict(
                f"version {decided_on + 1} of {self.uri} was taken by another writer",
                decided_on=decided_on,
                current_version=self.version,
            ) from error
        except (DeltaError, OSError) as error:
            raise KafkaStorageError(
                f"committing version {decided_on + 1} of {self.uri} failed: {error}", decided_on=decided_on
            ) from error
        self._commits_on_handle += 1
        self.refresh()
        if self.version < decided_on + 1:
            raise KafkaStorageError(f"{self.uri}: version {decided_on + 1} is not visible after its commit")
        return decided_on + 1


class PinnedSnapshot(Table):
    """One snapshot of a table carried whole, with no Delta handle: picklable and read-only.

    A Spark driver pins a partition's snapshot and hands it to executors, which
    read exactly its files (files a later compaction removes stay readable for
    the table's `delete.retention.ms`). It never moves: `refresh` is a no-op,
    and `app_version` knows only the app ids it was pinned with.
    """

    def __init__(
        self,
        uri: str,
        *,
        version: int,
        table_id: str,
        files: tuple[FileEntry, ...],
        app_versions: Mapping[str, int | None],
        schema: pa.Schema,
        configuration: Mapping[str, str],
    ) -> None:
        super().__init__(uri, None)  # type: ignore[arg-type]
        self._version = version
        self._table_id = table_id
        self._pinned_files = list(files)
        self._app_versions = dict(app_versions)
        self._schema = schema
        self._configuration = dict(configuration)

    @property
    def version(self) -> int:
        return self._version

    @property
    def table_id(self) -> str:
        return self._table_id

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self._configuration)

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def app_version(self, app_id: str) -> int | None:
        if app_id not in self._app_versions:
            raise KeyError(f"{app_id!r} was not pinned with the snapshot of {self.uri}")
        return self._app_versions[app_id]

    def files(self) -> list[FileEntry]:
        return self._pinned_files

    def data_paths(self) -> list[str]:
        return [self.file_path(entry) for entry in self._pinned_files]

    def history(self, limit: int) -> list[dict]:
        raise InvalidConfig(f"a pinned snapshot of {self.uri} has no history")

    def refresh(self) -> int:
        return self._version

    def append(self, data: pa.Table, **_: object) -> int:
        raise InvalidConfig(f"a pinned snapshot of {self.uri} is read-only")

    def commit_files(self, names: list[str], schema: pa.Schema, **_: object) -> int:
        raise InvalidConfig(f"a pinned snapshot of {self.uri} is read-only")

    def __reduce__(self):
        state = dict(
            version=self._version,
            table_id=self._table_id,
            files=tuple(self._pinned_files),
            app_versions=self._app_versions,
            schema=self._schema,
            configuration=self._configuration,
        )
        return (_pinned_snapshot, (self.uri, state))


def _pinned_snapshot(uri: str, state: dict) -> PinnedSnapshot:
    return PinnedSnapshot(uri, **state)


def _footer_statistics(path: str) -> str:
    """Delta file statistics from a Parquet footer: record count, null counts, min/max of integer columns."""
    metadata = pq.read_metadata(path)
    minimums: dict[str, int] = {}
    maximums: dict[str, int] = {}
    nulls: dict[str, int] = {}
    schema = metadata.schema.to_arrow_schema()
    leaves = {metadata.schema.column(index).path: index for index in range(metadata.num_columns)}
    for field in schema:
        if pa.types.is_nested(field.type):
            continue
        column_nulls, low, high, complete = 0, None, None, True
        for group in range(metadata.num_row_groups):
            column = metadata.row_group(group).column(leaves[field.name])
            stats = column.statistics
            if stats is None or not stats.has_null_count:
                complete = False
                break
            column_nulls += stats.null_count
            if pa.types.is_integer(field.type) and stats.has_min_max:
                low = stats.min if low is None else min(low, stats.min)
                high = stats.max if high is None else max(high, stats.max)
        if not complete:
            continue
        nulls[field.name] = column_nulls
        if low is not None:
            minimums[field.name], maximums[field.name] = int(low), int(high)
    return json.dumps({"numRecords": metadata.num_rows, "minValues": minimums, "maxValues": maximums, "nullCount": nulls})


def _statistics(data: pa.Table) -> str:
    """Delta file statistics: record count, null counts, and min/max of integer columns (for pruning)."""
    minimums: dict[str, int] = {}
    maximums: dict[str, int] = {}
    nulls: dict[str, int] = {}
    for field, column in zip(data.schema, data.columns):
        if pa.types.is_nested(field.type):
            continue
        nulls[field.name] = column.null_count
        if pa.types.is_integer(field.type) and column.null_count < len(column):
            bounds = pc.min_max(column)
            minimums[field.name] = bounds["min"].as_py()
            maximums[field.name] = bounds["max"].as_py()
    return json.dumps({"numRecords": data.num_rows, "minValues": minimums, "maxValues": maximums, "nullCount": nulls})


# Opening lists _delta_log, then reads the checkpoint and commits it chose: a writer's log cleanup
# (maintenance.cleanup_log) may delete one in between. It deletes only behind a newer checkpoint, so a
# new listing loads; a partition written at heartbeat rate checkpoints every second or so.
OPEN_ATTEMPTS = 5


def load_handle(uri: str) -> DeltaTable:
    """A delta-rs handle at the table's latest version, listing the log again if a file vanished under it."""
    for attempt in range(OPEN_ATTEMPTS):
        try:
            return DeltaTable(uri)
        except TableNotFoundError:
            raise
        except DeltaError as error:
            vanished = "_delta_log" in str(error) and "not found" in str(error).lower()
            if not vanished or attempt == OPEN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def check_root(root: str) -> Path:
    """A root is a folder (created if absent); a root that is a file is refused."""
    if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
        raise InvalidConfig(f"lakelog.root must name a folder, not {root!r}", key="lakelog.root")
    path = Path(os.fspath(root))
    if path.exists() and not path.is_dir():
        raise InvalidConfig(f"lakelog.root {path} is a file, not a folder", key="lakelog.root")
    return path


__all__ = ["FileEntry", "PinnedSnapshot", "Table", "TableNotFoundError", "check_root", "REOPEN_EVERY_COMMITS"]
