"""Delta table access with the strict commit: exactly version v+1, or `CommitConflict`.

A `Table` holds a `Snapshot` at a known version, replayed by lakelog from the
table's log (lakelog.store.delta.log). Callers decide on that snapshot, then
`append` commits version `version + 1` with no retry: if another writer took
that version first, `CommitConflict` is raised, the snapshot is brought up to
date, and the caller decides again. Nothing here calls delta-rs: lakelog builds
the commit's actions (lakelog.store.delta.actions) and writes
`_delta_log/<v+1>.json` itself, put-if-absent through the file IO.

After every put the commit is proven to be the log's version v+1 and not a
refill of a file log cleanup deleted (S9.5: no timing bound on how long a writer
paused between its decision and its put): a HEAD of `<v>.json`, the only guard,
since nothing between the decision and the put reads the log. Only then does
the snapshot take the commit (from the actions in hand: no read) and lakelog
write a checkpoint when one is due. The append path is a Parquet put, the
commit put and that HEAD: three requests on S3, none growing with the log.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.errors import CorruptRecord, InvalidArgument, KafkaStorageError, UnknownTopicOrPartition
from lakelog.store.delta.actions import (
    COMMIT_ID_KEY,
    add_action,
    metadata_action,
    remove_action,
)
from lakelog.store.delta.commit import (
    DELETED_KEY,
    Commit,
    _now_ms,
    _remove_quietly,
    checkpoint_interval,
    deleted_file_retention_ms,
    is_checkpoint_version,
    table_gone_or_replaced,
)
from lakelog.store.delta.data_file import DataFile, row_groups_of
from lakelog.store.delta.file_stats import file_statistics, footer_statistics
from lakelog.store.delta.log import DeltaLog, TableNotFoundError
from lakelog.store.delta.snapshot import FileChange, Snapshot, replay
from lakelog.store.delta.table_create import created_in_the_log, put_version_zero
from lakelog.store.delta.table_errors import is_decoding_error, storage_errors
from lakelog.store.io.fileio import one_line
from lakelog.store.io.location import Location

logger = logging.getLogger(__name__)

# A handle keeps the rows of its last appended file up to this many rows (a marker, a coordinator's record).
WRITTEN_ROWS_KEPT = 64

T = TypeVar("T")


class Table:
    """One Delta table and a snapshot of it at a known version. Every pyarrow or OS failure leaves here as
    `KafkaStorageError` (retriable) or `CorruptRecord` (not), naming the table and version."""

    def __init__(self, location: Location | str, snapshot: Snapshot | None) -> None:
        self.location = Location.of(location, what="table")
        self.uri = self.location.uri
        self.io = self.location.io
        self._log = DeltaLog(self.location)
        self._snapshot = snapshot if snapshot is not None else Snapshot(-1)
        # The rows of the small file this handle's last append wrote, by file name: a read of that file (a
        # coordinator replaying the marker it just wrote through this handle) is served from them.
        self._written: tuple[str, pa.Table] | None = None

    # -- opening and creating -------------------------------------------------

    @classmethod
    def open(cls, location: Location | str, version: int | None = None) -> Table:
        """Open an existing table at its latest version (or at `version`); `TableNotFoundError` if absent."""
        location = Location.of(location, what="table")
        with storage_errors(location.uri, "opening"):
            return cls(location, DeltaLog(location).load(version))

    @classmethod
    def open_or_create(cls, location: Location | str, schema: pa.Schema, configuration: Mapping[str, str]) -> tuple[Table, bool]:
        """The table at `location`, opened if it exists, else created as `create` does; (table, created by this call).

        Opening first matters for a table whose log cleanup deleted `0.json` behind its checkpoints: a create's
        put-if-absent would land in that hole (S9.5), be found out and removed, with a WARNING, each time.
        """
        location = Location.of(location, what="table")
        try:
            return cls.open(location), False
        except TableNotFoundError:
            return cls.create(location, schema, configuration)

    @classmethod
    def create(cls, location: Location | str, schema: pa.Schema, configuration: Mapping[str, str]) -> tuple[Table, bool]:
        """Create the table as version 0 (put-if-absent); returns (table, created by this call)."""
        location = Location.of(location, what="table")
        actions, created = put_version_zero(location, schema, configuration)
        if not created:
            return cls.open(location), False
        table = cls(location, replay([(0, actions)]))
        if not created_in_the_log(table._log, table.table_id):
            return cls.open(location), False
        logger.info("created table %s", location.uri)
        return table, True

    @staticmethod
    def exists(location: Location | str) -> bool:
        location = Location.of(location, what="table")
        with storage_errors(location.uri, "looking up"):
            return DeltaLog(location).exists()

    # -- the snapshot in hand -------------------------------------------------

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def table_id(self) -> str:
        """The Delta table's id: a table created again in the same place gets a new one."""
        return self._snapshot.table_id

    @property
    def configuration(self) -> dict[str, str]:
        return self._snapshot.configuration

    @property
    def schema(self) -> pa.Schema:
        return self._snapshot.schema

    def app_version(self, app_id: str) -> int | None:
        """The `txn` version recorded for `app_id` in this snapshot (survives checkpoints)."""
        return self._snapshot.app_version(app_id)

    def derived(
        self, key: object, derive: Callable[[list[DataFile]], T], step: Callable[[T, FileChange], T | None] | None = None
    ) -> T:
        """A value derived from this snapshot's active files, made once per version (`Snapshot.derived`)."""
        return self._snapshot.derived(key, derive, step)

    def file_path(self, entry: DataFile) -> str:
        return self.child_uri(entry.path)

    def child_uri(self, name: str) -> str:
        """The URI of a file in the table's folder (`name` relative to it, as Delta paths are); CorruptRecord for a
        name reaching outside it (a `..` segment): a log naming such a file is damaged, and nothing reads or
        deletes it."""
        try:
            return self.location.child(name).uri
        except InvalidArgument:
            raise CorruptRecord(f"{self.uri} names the file {name!r}, outside its folder", path=self.uri) from None

    def data_paths(self) -> list[str]:
        """URIs of the active data files of this snapshot, for tables of any schema (views, status)."""
        return [self.child_uri(entry.path) for entry in self.data_files()]

    def data_files(self) -> list[DataFile]:
        """Active data files of this snapshot, by path."""
        return sorted(self._snapshot.entries(), key=lambda entry: entry.path)

    def read_data_file(self, entry: DataFile) -> pa.Table:
        """One data file of a table of any schema, in the table's schema; CorruptRecord if unreadable."""
        schema = self.schema
        rows = self._read(entry.path, f"data file {entry.path} of {self.uri} (version {self.version})", None, None)
        return rows.select(schema.names).cast(schema)

    def read_file(
        self,
        entry: DataFile,
        columns: list[str] | None = None,
        predicate: pc.Expression | None = None,
        *,
        row_groups: Sequence[int] | None = None,
        metadata: pq.FileMetaData | None = None,
    ) -> pa.Table:
        """Read one data file of the snapshot (only `row_groups`, if given; `metadata`: its footer, if read already).

        A missing or unreadable file is `CorruptRecord`, and so is one whose footer or rows disagree with what its
        statistics promise (`entry.read_check`: a partition's file holds the offsets its add claims): no row of it
        leaves here.
        """
        where = f"data file {entry.path} of {self.uri} (version {self.version})"
        return self._read(entry.path, where, columns, predicate, entry, row_groups, metadata)

    def _read(
        self,
        name: str,
        where: str,
        columns: list[str] | None,
        predicate: pc.Expression | None,
        entry: DataFile | None = None,
        row_groups: Sequence[int] | None = None,
        metadata: pq.FileMetaData | None = None,
    ) -> pa.Table:
        written = self._written
        if written is not None and written[0] == name:
            # The rows the file was written from: what reading it gives, with no read.
            rows = written[1]
            if row_groups is not None:
                rows = row_groups_of(rows, row_groups, metadata)
            rows = rows if predicate is None else rows.filter(predicate)
            return rows if columns is None else rows.select(columns)
        path = self.child_uri(name)
        check = None if entry is None else entry.read_check(self.uri, path, self.schema)
        where = where if check is None else check.where
        # The checked column is read even when the caller wants other columns (it costs little).
        read_columns = columns if check is None or columns is None or check.column in columns else [*columns, check.column]
        try:
            footer = None if check is None else check.footer
            rows = self.io.read_parquet(path, read_columns, predicate, footer=footer, row_groups=row_groups, metadata=metadata)
        except FileNotFoundError as error:
            raise CorruptRecord(f"{where} is missing", path=path) from error
        except KafkaStorageError as error:
            cause = error.__cause__
            if cause is not None and is_decoding_error(cause):
                raise CorruptRecord(f"{where} is unreadable: {one_line(cause)}", path=path) from error
            raise
        except pa.ArrowException as error:
            raise CorruptRecord(f"{where} is unreadable: {one_line(error)}", path=path) from error
        if check is not None:
            whole = predicate is None and row_groups is None
            check.rows(
                rows.column(check.column),
                whole=whole,
                row_groups=None if predicate is not None else row_groups,
                metadata=metadata,
            )
            if read_columns is not columns:
                rows = rows.select(columns)
        return rows

    def history(self, limit: int) -> list[dict]:
        """The commitInfo of the newest `limit` commits still in the log, newest first, each with its `version`."""
        entries: list[dict] = []
        with storage_errors(self.uri, "reading the history of", self.version):
            for version in range(self.version, max(-1, self.version - limit), -1):
                actions = self._log.read_commit(version)
                if actions is None:
                    break
                info: dict = next((action["commitInfo"] for action in actions if "commitInfo" in action), {})
                entries.append({**info, "version": version})
        return entries

    # -- moving the snapshot ----------------------------------------------------

    def refresh(self) -> int:
        """Bring the snapshot to the latest version (reading only the commits after it); returns it."""
        try:
            with storage_errors(self.uri, "reloading", self.version):
                self._snapshot = self._log.advance(self._snapshot)
        except CorruptRecord:
            # A commit of another table after this handle's version: this table was deleted and made again?
            with storage_errors(self.uri, "reloading", self.version):
                replaced = table_gone_or_replaced(self._log, self.table_id, self.uri)
            if replaced:
                raise UnknownTopicOrPartition(f"{self.uri} was deleted after this handle read it", uri=self.uri) from None
            raise
        if self.deleted:
            raise UnknownTopicOrPartition(f"{self.uri} was deleted at version {self.version}", uri=self.uri)
        return self.version

    @property
    def deleted(self) -> bool:
        """Whether the snapshot in hand is the table's last: marked for deletion, nothing more commits to it."""
        return DELETED_KEY in self._snapshot.configuration

    def mark_deleted(self) -> int:
        """Commit the table's last version, which marks it deleted, strictly as `set_configuration` (a no-op if marked).

        A writer that decided on an earlier snapshot loses its race to this version and then sees the mark
        (UnknownTopicOrPartition); only after it may the table's files go (lakelog.store.upkeep.deletion).
        """
        if self.deleted:
            return self.version
        decided_on = self.version
        current = self._snapshot.metadata or {}
        merged = {**self.configuration, DELETED_KEY: str(_now_ms())}
        action = metadata_action(self.table_id, self._snapshot.schema_string, merged, current.get("createdTime") or _now_ms())
        return self._commit([action], self.schema, "mark_deleted", decided_on, None, None, [])

    # -- the strict commit ----------------------------------------------------

    def _commit(
        self,
        actions: list[dict[str, Any]],
        schema: pa.Schema,
        mode: str,
        decided_on: int,
        app_versions: Mapping[str, int] | None,
        metadata: Mapping[str, str] | None,
        owned: list[str],
    ) -> int:
        """`actions` as exactly version `decided_on + 1` (a `Commit`): its version, or its outcome raised
        (`Conflict` as CommitConflict, `Unknown` as KafkaStorageError)."""
        commit = Commit(
            self,
            actions,
            schema=schema,
            mode=mode,
            decided_on=decided_on,
            app_versions=app_versions,
            metadata=metadata,
            owned=owned,
        )
        return commit.attempt().result()

    def append(
        self,
        data: pa.Table,
        *,
        app_versions: Mapping[str, int] | None = None,
        metadata: Mapping[str, str] | None = None,
        compression: str = "snappy",
        modification_time_ms: int | None = None,
        statistics: str | None = None,
        tags: Mapping[str, str] | None = None,
        before_put: Callable[[], object] | None = None,
    ) -> int:
        """Commit `data` as one new file in version `self.version + 1`, or raise `CommitConflict`.

        The file is written under a fresh name first; if the commit loses its race
        the file is deleted again, so a refused append leaves the folder as it was.
        `modification_time_ms` is the add action's time (default: the wall clock);
        the log passes its own clock, the append time of the batch. `statistics` are
        the add action's (as `file_statistics(data)` gives them), when the caller
        knows them without a pass over the rows (the log's stamped batches do). `tags` go in the add action
        (`DataFile.tags` gives them back).

        `before_put` runs once the file is written, before the commit's put: the caller's wait for what the commit
        needs and the file does not (a file no commit names is no data; vacuum removes it). If it raises, the file
        is deleted and nothing commits.
        """
        decided_on = self.version
        name = f"part-{decided_on + 1:020d}-{uuid.uuid4().hex}.parquet"
        path = self.child_uri(name)
        size = self.io.write_parquet(data, path, compression=compression, fresh=True)
        if before_put is not None:
            try:
                before_put()
            except BaseException as error:
                logger.debug("%s: %s deleted, its commit not put: %s", self.uri, name, one_line(error))
                _remove_quietly(self.io, self.uri, path)
                raise
        modified_ms = _now_ms() if modification_time_ms is None else modification_time_ms
        action = add_action(name, size, modified_ms, True, file_statistics(data) if statistics is None else statistics, tags)
        version = self._commit([action], data.schema, "append", decided_on, app_versions, metadata, [path])
        self._written = (name, data) if data.num_rows <= WRITTEN_ROWS_KEPT else None
        return version

    def rewrite(
        self,
        removed: Sequence[DataFile] = (),
        added: Sequence[
            pa.Table
            | tuple[pa.Table, Mapping[str, tuple[int, int]] | None]
            | tuple[pa.Table, Mapping[str, tuple[int, int]] | None, int | None]
        ] = (),
        *,
        app_versions: Mapping[str, int] | None = None,
        metadata: Mapping[str, str] | None = None,
        compression: str = "snappy",
        data_change: bool = True,
    ) -> int:
        """Commit, as exactly version `self.version + 1`, the removal of `removed` and new files from `added`.

        Each item of `added` is a pyarrow table, or a pair `(table, claimed)`
        whose file then claims, for each column of `claimed`, its range (low, high)
        in its statistics (`file_statistics`: the log's key-compacted file keeps
        the offset range of the files it replaces, S9.3), or a triple
        `(table, claimed, modification_time_ms)` whose add action keeps that time
        (the log passes the newest of the files it replaces, so a producer's idle
        time, S9.4, still runs from its last append).
        This call writes them under fresh names, deleted again if the commit loses its race (`CommitConflict`:
        the folder as it was, S8.3); an unknown outcome is resolved by reading the log (S12.3). `app_versions`
        and `metadata` go in the same commit; with nothing removed or added it records only them.
        Retention (S9.1: removes, plus the txn `lakelog.log_start_offset`) and key
        compaction (S9.3: removes and adds) commit through here.
        `data_change=False` marks a rewrite that changes no row (Delta's flag for
        compaction).
        """
        decided_on = self.version
        if not removed and not added and not app_versions:
            raise ValueError(f"{self.uri}: a rewrite with no file and no app version would commit nothing")
        now_ms = _now_ms()
        actions: list[dict[str, Any]] = []
        owned: list[str] = []
        schema: pa.Schema | None = None
        try:
            for item in added:
                data, claimed, modified_ms = _added_item(item)
                name = f"part-{decided_on + 1:020d}-{uuid.uuid4().hex}.parquet"
                path = self.child_uri(name)
                owned.append(path)
                size = self.io.write_parquet(data, path, compression=compression, fresh=True)
                modified_ms = now_ms if modified_ms is None else modified_ms
                actions.append(add_action(name, size, modified_ms, data_change, file_statistics(data, claimed)))
                schema = schema or data.schema
        except BaseException:
            for path in owned:
                _remove_quietly(self.io, self.uri, path)
            raise
        for entry in removed:
            actions.append(remove_action(entry.path, now_ms, data_change, entry.size_bytes))
        return self._commit(actions, schema or self.schema, "append", decided_on, app_versions, metadata, owned)

    def commit_files(
        self,
        names: list[str],
        schema: pa.Schema,
        *,
        app_versions: Mapping[str, int] | None = None,
        overwrite: bool = False,
        metadata: Mapping[str, str] | None = None,
    ) -> int:
        """Commit Parquet files already written in the table's folder as version `self.version + 1`.

        For data written by other engines (Spark's executors). `names` are paths
        relative to the table; their statistics are read from the Parquet footers.
        `overwrite` also removes every file of the snapshot in hand. `app_versions`
        are recorded in the same commit (a job's progress, atomically with its
        data); a commit of no files records only them; `metadata` goes in the
        commit's info. Raises `CommitConflict` if another writer took the version
        (the files are left for the caller).
        """
        decided_on = self.version
        now_ms = _now_ms()
        actions = []
        for name in names:
            path = self.child_uri(name)
            try:
                footer = self.io.parquet_metadata(path)
                statistics = footer_statistics(footer)
            except FileNotFoundError as error:
                raise KafkaStorageError(f"cannot commit {path}: it is missing", uri=path) from error
            except pa.ArrowException as error:
                raise CorruptRecord(f"cannot commit {path}: {one_line(error)}", path=path) from error
            info = self.io.info(path)
            actions.append(add_action(name, info.size if info is not None else 0, now_ms, True, statistics))
        if overwrite:
            actions.extend(remove_action(entry.path, now_ms, True, entry.size_bytes) for entry in self.data_files())
        mode = "overwrite" if overwrite else "append"
        return self._commit(actions, schema, mode, decided_on, app_versions, metadata, [])

    @property
    def protocol(self) -> dict[str, Any]:
        """The snapshot's `protocol` action (a copy)."""
        return dict(self._snapshot.protocol or {})

    def commit_protocol(self, protocol: Mapping[str, Any]) -> int:
        """Commit a protocol action alone (an upgrade) as exactly version `self.version + 1`, strict as `append`."""
        return self._commit([{"protocol": dict(protocol)}], self.schema, "upgrade_protocol", self.version, None, None, [])

    def set_configuration(self, configuration: Mapping[str, str]) -> int:
        """Commit `configuration` (table properties, merged into the table's) as exactly version `self.version + 1`,
        strict as `append` (`CommitConflict`; an unknown outcome resolved by reading the log, S12.3)."""
        decided_on = self.version
        current = self._snapshot.metadata or {}
        merged = {**self.configuration, **{str(key): str(value) for key, value in configuration.items()}}
        action = metadata_action(self.table_id, self._snapshot.schema_string, merged, current.get("createdTime") or _now_ms())
        return self._commit([action], self.schema, "set_configuration", decided_on, None, None, [])


def _added_item(item: Any) -> tuple[pa.Table, Mapping[str, tuple[int, int]] | None, int | None]:
    """A `rewrite` item as (rows, claimed ranges by column or None, modification time or None)."""
    if not isinstance(item, tuple):
        return item, None, None
    if len(item) == 2:
        return item[0], item[1], None
    return item[0], item[1], item[2]


__all__ = [
    "COMMIT_ID_KEY",
    "DataFile",
    "Table",
    "TableNotFoundError",
    "checkpoint_interval",
    "deleted_file_retention_ms",
    "is_checkpoint_version",
    "storage_errors",
]
