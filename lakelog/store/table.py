"""Delta table access with the strict commit: exactly version v+1, or `CommitConflict`.

This is the only module that imports `deltalake`. A `Table` holds one handle at a
known snapshot version. Callers decide on that snapshot, then `append` commits
version `version + 1` with no retry: if another writer took that version first,
`CommitConflict` is raised, the handle is brought up to date, and the caller
decides again. delta-rs' own retries (which rebase an append onto a newer
version) are always switched off.

A commit is a put-if-absent of `_delta_log/<v+1>.json`. After every put the
commit is proven to be the log's version v+1 and not a refill of a file log
cleanup deleted (S9.5: no timing bound on how long a writer paused between its
decision and its put); only then does lakelog write a checkpoint (delta-rs's
post-commit hooks are off).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, PostCommitHookProperties, RemoveAction

from lakelog.errors import CommitConflict, CorruptRecord, KafkaException, KafkaStorageError
from lakelog.store.file_stats import file_statistics, footer_statistics
from lakelog.store.fileio import Location, one_line

if TYPE_CHECKING:
    from lakelog.store.pinned import PinnedSnapshot

log = logging.getLogger(__name__)
# custom_metadata key naming each commit, so a writer can tell its own commit in the log (S12.3).
COMMIT_ID_KEY = "lakelog.commit"

# A handle reused for many commits slows down (FINDINGS.md); reopen it this often.
REOPEN_EVERY_COMMITS = 100
DEFAULT_CHECKPOINT_INTERVAL = 100
# delta-rs's post-commit hook would write a checkpoint from the writer's own state before anyone checked
# that its commit is the log's version and not a refill of a hole log cleanup left (S9.5), and would
# delete log files by its own rule. lakelog does both itself: `Table._commit` checkpoints after its check,
# `maintenance.cleanup_log` deletes in ascending version order.
NO_POST_COMMIT_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


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


class Table:
    """One Delta table and a handle at a known snapshot version.

    Every delta-rs, pyarrow or OS failure leaves here as `KafkaStorageError`
    (retriable) or `CorruptRecord` (not), naming the table and version.
    """

    def __init__(self, location: Location | str, handle: DeltaTable) -> None:
        self.location = Location.of(location, what="table")
        self.uri = self.location.uri
        self.io = self.location.io
        self._handle = handle
        self._commits_on_handle = 0
        self._files: tuple[int, list[FileEntry]] | None = None

    # -- opening and creating -------------------------------------------------

    @classmethod
    def open(cls, location: Location | str) -> Table:
        """Open an existing table at its latest version; `TableNotFoundError` if absent."""
        location = Location.of(location, what="table")
        with storage_errors(location.uri, "opening"):
            return cls(location, load_handle(location))

    @classmethod
    def create(cls, location: Location | str, schema: pa.Schema, configuration: Mapping[str, str]) -> tuple[Table, bool]:
        """Create the table as version 0 (put-if-absent); returns (table, created by this call)."""
        location = Location.of(location, what="table")
        location.io.make_dirs(location.uri)
        try:
            with storage_errors(location.uri, "creating"):
                try:
                    handle = DeltaTable.create(
                        location.uri,
                        schema,
                        mode="error",
                        configuration=dict(configuration),
                        raise_if_key_not_exists=False,
                        storage_options=location.io.delta_options(),
                        # With retries a creator that lost version 0 would commit a second CREATE as version 1.
                        commit_properties=CommitProperties(max_commit_retries=0),
                    )
                except DeltaError:
                    if not DeltaTable.is_deltatable(location.uri, location.io.delta_options()):
                        raise
                    handle = None
        except KafkaStorageError:
            if not cls.exists(location):
                raise
            handle = None
        if handle is None:
            return cls.open(location), False
        table = cls(location, handle)
        if not table._created_in_the_log():
            return cls.open(location), False
        log.info("created table %s", location.uri)
        return table, True

    def _created_in_the_log(self) -> bool:
        """After a successful put of 0.json: is it the log's version 0, or a refill of one log cleanup deleted (S9.5)?

        A creator paused between delta-rs's look for the table and its put could
        put 0.json into the hole cleanup leaves behind a long-lived table's
        checkpoints. The latest snapshot then is that table's: another table id.
        The stray 0.json is removed (logged) and the creator opens the table.
        """
        try:
            latest = load_handle(self.location)
            if latest.metadata().id == self.table_id:
                return True
        except (DeltaError, OSError) as error:
            raise KafkaStorageError(
                f"creating {self.uri}: version 0 was written but the log cannot be read: {one_line(error)}", uri=self.uri
            ) from error
        stray = self.child_uri(f"_delta_log/{0:020d}.json")
        log.warning("%s: the create put version 0 into a hole of an existing table's log; removing it", self.uri)
        try:
            if self.table_id in self.io.read(stray).decode("utf-8", "replace"):
                self.io.delete(stray)
        except (FileNotFoundError, KafkaStorageError) as error:
            log.warning("%s: could not remove the stray commit file %s: %s", self.uri, stray, one_line(error))
        return False

    @staticmethod
    def exists(location: Location | str) -> bool:
        location = Location.of(location, what="table")
        with storage_errors(location.uri, "looking up"):
            return DeltaTable.is_deltatable(location.uri, location.io.delta_options())

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
        with storage_errors(self.uri, "reading", self.version):
            return self._handle.transaction_version(app_id)

    def files(self) -> list[FileEntry]:
        """Active data files of this snapshot, ordered by first offset; cached per version."""
        version = self.version
        if self._files is None or self._files[0] != version:
            with storage_errors(self.uri, "listing the files of", version):
                actions = pa.table(self._handle.get_add_actions(flatten=True))
            entries = []
            if actions.num_rows:
                columns = actions.to_pydict()
                null_keys = columns.get("null_count.key") or [None] * actions.num_rows
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
                            modification_time_ms=columns["modification_time"][i] or 0,
                            null_keys=-1 if null_keys[i] is None else null_keys[i],
                        )
                    )
            entries.sort(key=lambda entry: entry.min_offset)
            self._files = (version, entries)
        return self._files[1]

    def file_path(self, entry: FileEntry) -> str:
        return self.child_uri(entry.path)

    def child_uri(self, name: str) -> str:
        """The URI of a file in the table's folder (`name` relative to it, as Delta paths are)."""
        return f"{self.uri.rstrip('/')}/{name}"

    def data_paths(self) -> list[str]:
        """URIs of the active data files of this snapshot, for tables of any schema (views, status)."""
        return [self.child_uri(entry.path) for entry in self.data_files()]

    def data_files(self) -> list[FileEntry]:
        """Active data files of this snapshot, by path, for tables of any schema (no offset statistics)."""
        with storage_errors(self.uri, "listing the files of", self.version):
            actions = pa.table(self._handle.get_add_actions(flatten=True))
        if not actions.num_rows:
            return []
        columns = actions.to_pydict()
        entries = [
            FileEntry(path, 0, 0, records, size, 0, 0)
            for path, records, size in zip(columns["path"], columns["num_records"], columns["size_bytes"])
        ]
        return sorted(entries, key=lambda entry: entry.path)

    def read_data_file(self, entry: FileEntry) -> pa.Table:
        """One data file of a table of any schema, in the table's schema; CorruptRecord if unreadable."""
        schema = self.schema
        rows = self._read(entry.path, f"data file {entry.path} of {self.uri} (version {self.version})", None, None)
        return rows.select(schema.names).cast(schema)

    def pin(self, app_ids: tuple[str, ...] = ()) -> PinnedSnapshot:
        """This snapshot as a `PinnedSnapshot`: its files, the `txn` versions of `app_ids`, schema and config."""
        from lakelog.store.pinned import PinnedSnapshot

        return PinnedSnapshot(
            self.location,
            version=self.version,
            table_id=self.table_id,
            files=tuple(self.files()),
            app_versions={app_id: self.app_version(app_id) for app_id in app_ids},
            schema=self.schema,
            configuration=self.configuration,
        )

    def read_file(self, entry: FileEntry, columns: list[str] | None = None, predicate: pc.Expression | None = None) -> pa.Table:
        """Read one data file of the snapshot; a missing or unreadable file is `CorruptRecord`."""
        where = f"data file {entry.path} of {self.uri} (offsets {entry.min_offset}-{entry.max_offset})"
        return self._read(entry.path, where, columns, predicate)

    def _read(self, name: str, where: str, columns: list[str] | None, predicate: pc.Expression | None) -> pa.Table:
        path = self.child_uri(name)
        try:
            return self.io.read_parquet(path, columns, predicate)
        except FileNotFoundError as error:
            raise CorruptRecord(f"{where} is missing", path=path) from error
        except KafkaStorageError as error:
            if _is_decoding_error(error.__cause__):
                raise CorruptRecord(f"{where} is unreadable: {one_line(error.__cause__)}", path=path) from error
            raise
        except pa.ArrowException as error:
            raise CorruptRecord(f"{where} is unreadable: {one_line(error)}", path=path) from error

    def history(self, limit: int) -> list[dict]:
        with storage_errors(self.uri, "reading the history of", self.version):
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
        with storage_errors(self.uri, "reloading", self.version):
            self._handle = load_handle(self.location)
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
        modification_time_ms: int | None = None,
    ) -> int:
        """Commit `data` as one new file in version `self.version + 1`, or raise `CommitConflict`.

        The file is written under a fresh name first; if the commit loses its race
        the file is deleted again, so a refused append leaves the folder as it was.
        `modification_time_ms` is the add action's time (default: the wall clock);
        the log passes its own clock, the append time of the batch.
        """
        decided_on = self.version
        name = f"part-{decided_on + 1:020d}-{uuid.uuid4().hex}.parquet"
        path = self.child_uri(name)
        size = self.io.write_parquet(data, path, compression=compression)
        action = AddAction(
            path=name,
            size=size,
            partition_values={},
            modification_time=time.time_ns() // 1_000_000 if modification_time_ms is None else modification_time_ms,
            data_change=True,
            stats=file_statistics(data),
        )
        return self._commit([action], data.schema, "append", decided_on, app_versions, metadata, [path])

    def rewrite(
        self,
        removed: Sequence[FileEntry] = (),
        added: Sequence[pa.Table | tuple[pa.Table, tuple[int, int] | None]] = (),
        *,
        app_versions: Mapping[str, int] | None = None,
        metadata: Mapping[str, str] | None = None,
        compression: str = "snappy",
        data_change: bool = True,
    ) -> int:
        """Commit, as exactly version `self.version + 1`, the removal of `removed` and new files from `added`.

        Each item of `added` is a pyarrow table, or a pair `(table, (first, last))`
        whose file then claims the offset range first..last in its statistics
        (a key-compacted file keeps the range of the files it replaces, S9.3),
        or a triple `(table, (first, last), modification_time_ms)` whose add
        action keeps that time (the newest of the files it replaces, so a
        producer's idle time, S9.4, still runs from its last append).
        This call writes them under fresh names; if the commit loses its race they
        are deleted again and `CommitConflict` is raised, so a refused rewrite
        leaves the folder as it was (S8.3); an unknown outcome is resolved by
        reading the log (S12.3). `app_versions` and `metadata` go in the same
        commit; with nothing removed or added the commit records only them.
        Retention (S9.1: removes, plus the txn `lakelog.log_start_offset`) and key
        compaction (S9.3: removes and adds) commit through here.
        `data_change=False` marks a rewrite that changes no row (Delta's flag for
        compaction).
        """
        decided_on = self.version
        if not removed and not added and not app_versions:
            raise ValueError(f"{self.uri}: a rewrite with no file and no app version would commit nothing")
        now_ms = time.time_ns() // 1_000_000
        actions: list[AddAction | RemoveAction] = []
        owned: list[str] = []
        schema: pa.Schema | None = None
        try:
            for item in added:
                data, offset_range, modified_ms = _added_item(item)
                name = f"part-{decided_on + 1:020d}-{uuid.uuid4().hex}.parquet"
                path = self.child_uri(name)
                owned.append(path)
                size = self.io.write_parquet(data, path, compression=compression)
                modified_ms = now_ms if modified_ms is None else modified_ms
                actions.append(AddAction(name, size, {}, modified_ms, data_change, file_statistics(data, offset_range)))
                schema = schema or data.schema
        except BaseException:
            for path in owned:
                _remove_quietly(self, path)
            raise
        for entry in removed:
            actions.append(RemoveAction(entry.path, data_change, now_ms, entry.size_bytes, {}))
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
            actions.append(
                AddAction(
                    path=name,
                    size=info.size if info is not None else 0,
                    partition_values={},
                    modification_time=time.time_ns() // 1_000_000,
                    data_change=True,
                    stats=statistics,
                )
            )
        mode = "overwrite" if overwrite else "append"
        return self._commit(actions, schema, mode, decided_on, app_versions, metadata, [])

    def set_configuration(self, configuration: Mapping[str, str]) -> int:
        """Commit `configuration` (table properties, merged into the table's) as exactly version `self.version + 1`.

        The strict commit as `append`: `CommitConflict` if another writer took the
        version, an unknown outcome resolved by reading the log (S12.3).
        """
        decided_on = self.version
        commit_id = uuid.uuid4().hex
        properties = CommitProperties(max_commit_retries=0, custom_metadata={COMMIT_ID_KEY: commit_id})
        version = decided_on + 1
        try:
            self._handle.alter.set_table_properties(
                dict(configuration),
                raise_if_not_exists=False,
                commit_properties=properties,
                post_commithook_properties=NO_POST_COMMIT_HOOKS,
            )
        except (CommitFailedError, DeltaError, OSError) as error:
            if not self._landed(decided_on, commit_id, error, []):
                raise CommitConflict(
                    f"version {version} of {self.uri} was taken by another writer",
                    decided_on=decided_on,
                    current_version=self.version,
                ) from error
        self._check_not_in_the_past(version, commit_id, [], [])
        self._commits_on_handle += 1
        self.refresh()
        self._checkpoint_if_due(version)
        return version

    def _commit(
        self,
        actions: list[AddAction | RemoveAction],
        schema: pa.Schema,
        mode: str,
        decided_on: int,
        app_versions: Mapping[str, int] | None,
        metadata: Mapping[str, str] | None,
        owned: list[str],
    ) -> int:
        """Commit `actions` as exactly version `decided_on + 1`; resolve an unknown outcome by reading the log (S12.3).

        `owned` are files this call wrote: deleted again when the commit is known
        to have lost (S8.3), kept when its outcome is unknown (it may still land).
        """
        commit_id = uuid.uuid4().hex
        properties = CommitProperties(
            max_commit_retries=0,
            app_transactions=[Transaction(app_id, version) for app_id, version in (app_versions or {}).items()],
            custom_metadata={**dict(metadata or {}), COMMIT_ID_KEY: commit_id},
        )
        version = decided_on + 1
        added = [action.path for action in actions if isinstance(action, AddAction)]
        try:
            self._handle.create_write_transaction(
                actions, mode=mode, schema=schema, commit_properties=properties, post_commithook_properties=NO_POST_COMMIT_HOOKS
            )
        except (CommitFailedError, DeltaError, OSError) as error:
            if not self._landed(decided_on, commit_id, error, added):
                if owned:
                    log.debug(
                        "%s: version %d went to another writer; deleting this writer's %d file(s)", self.uri, version, len(owned)
                    )
                for path in owned:
                    _remove_quietly(self, path)
                raise CommitConflict(
                    f"version {version} of {self.uri} was taken by another writer",
                    decided_on=decided_on,
                    current_version=self.version,
                ) from error
            log.warning(
                "%s: commit of version %d reported %s, but the log holds it: committed", self.uri, version, one_line(error)
            )
        self._check_not_in_the_past(version, commit_id, added, owned)
        self._commits_on_handle += 1
        self.refresh()
        if self.version < version:
            raise KafkaStorageError(f"{self.uri}: version {version} is not visible after its commit", uri=self.uri)
        self._checkpoint_if_due(version)
        return version

    def _check_not_in_the_past(self, version: int, commit_id: str, added: list[str], owned: list[str]) -> None:
        """After a successful put of `version`.json: prove it is the log's version, not a hole's refill (S9.5).

        `maintenance.cleanup_log` deletes commit files in ascending version order
        and never one at or after the checkpoints it keeps, so if N.json had been
        deleted before this writer's put, (N-1).json was deleted before it. One
        HEAD of (N-1).json is the proof in the common case, whatever the writer's
        pause between its decision and its put. If (N-1).json is gone, the latest
        snapshot decides (`_in_latest_snapshot`); a commit found in the past is a
        lost race, `CommitConflict`, with its stray commit file and this writer's
        files removed (logged); one that cannot be told is `KafkaStorageError`.
        """
        if version == 0:
            return
        before = self.child_uri(f"_delta_log/{version - 1:020d}.json")
        try:
            if self.io.info(before) is not None:
                return
        except KafkaStorageError as failure:
            raise KafkaStorageError(
                f"version {version} of {self.uri} was written but its place in the log is unknown: {failure}",
                uri=self.uri,
                decided_on=version - 1,
            ) from failure
        if self._in_latest_snapshot(
            version, added, f"version {version} of {self.uri} was written but its place in the log is unknown"
        ):
            return
        log.warning(
            "%s: the put of version %d refilled a commit file log cleanup had deleted (the writer decided on a snapshot "
            "older than the kept log): a lost race; removing it and this writer's %d file(s)",
            self.uri,
            version,
            len(owned),
        )
        stray = self.child_uri(f"_delta_log/{version:020d}.json")
        try:
            if commit_id in self.io.read(stray).decode("utf-8", "replace"):
                self.io.delete(stray)
        except (FileNotFoundError, KafkaStorageError) as error:
            log.warning("%s: could not remove the stray commit file %s: %s", self.uri, stray, one_line(error))
        for path in owned:
            _remove_quietly(self, path)
        raise CommitConflict(
            f"version {version} of {self.uri} was taken by another writer long ago",
            decided_on=version - 1,
            current_version=self.version,
        )

    def _in_latest_snapshot(self, version: int, added: list[str], unknown: str) -> bool:
        """Whether a commit of `version` that added the files `added` is in the log, read on the latest snapshot.

        True if one of its files is active there or removed since (a tombstone);
        False if none is: the commit is not the log's `version` (the log's was
        another writer's). A commit that added no file cannot be told this way:
        `KafkaStorageError` (unknown outcome, S12.3), as when the log cannot be
        read. The one case read wrongly as False: the commit was the log's, and
        its files were removed and their tombstones expired (the table's
        `delete.retention.ms`) while this call was paused. The handle moves to the
        latest snapshot.
        """
        try:
            self._handle = load_handle(self.location)
            self._commits_on_handle = 0
            if self.version < version:
                raise KafkaStorageError(
                    f"{unknown}: the latest snapshot is version {self.version}", uri=self.uri, decided_on=version - 1
                )
            if not added:
                raise KafkaStorageError(f"{unknown}: the commit added no file to look for", uri=self.uri, decided_on=version - 1)
            active = set(pa.table(self._handle.get_add_actions(flatten=True)).column("path").to_pylist())
            removed = set(self._handle.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False))
        except (DeltaError, OSError) as error:
            raise KafkaStorageError(f"{unknown}: {one_line(error)}", uri=self.uri, decided_on=version - 1) from error
        return any(name in active or name in removed for name in added)

    def _checkpoint_if_due(self, version: int) -> None:
        """Write a checkpoint at the snapshot in hand if `version` or it is on the checkpoint interval.

        Called only after `_check_not_in_the_past`, so a checkpoint is never built
        from a commit that refilled a hole. The handle may have moved past
        `version` (others committed): the checkpoint is then of that later
        version, a snapshot read from the log. A failure is logged, not raised:
        the commit stands and the next interval checkpoints again.
        """
        interval = checkpoint_interval(self.configuration)
        if not (is_checkpoint_version(version, interval) or is_checkpoint_version(self.version, interval)):
            return
        try:
            self._handle.create_checkpoint()
        except (DeltaError, OSError) as error:
            log.warning("%s: checkpoint at version %d failed: %s", self.uri, self.version, one_line(error))

    def _landed(self, decided_on: int, commit_id: str, error: BaseException, added: list[str]) -> bool:
        """After a failed commit: True if version decided_on+1 holds this commit, False if another writer's.

        Raises KafkaStorageError if the log cannot tell (version decided_on+1 is not
        there, or cannot be read): the commit may still land, so it is neither failed
        nor to be retried blindly (S12.3). If log cleanup deleted that version's
        file, the latest snapshot decides (`_in_latest_snapshot`, S9.5).
        """
        version = decided_on + 1
        unknown = f"committing version {version} of {self.uri} failed ({one_line(error)}) and its outcome is unknown"
        try:
            self.refresh()
            if self.version < version:
                raise KafkaStorageError(f"{unknown}: the version is not in the log yet", uri=self.uri, decided_on=decided_on)
            text = self.io.read(self.child_uri(f"_delta_log/{version:020d}.json")).decode("utf-8", "replace")
        except FileNotFoundError:
            # Deleted by log cleanup: after this commit landed, or before a put into the past was tried (S9.5).
            return self._in_latest_snapshot(version, added, f"{unknown}: its log file is gone")
        except KafkaStorageError as failure:
            if failure.__cause__ is None:
                raise
            raise KafkaStorageError(f"{unknown}: {failure}", uri=self.uri, decided_on=decided_on) from error
        return commit_id in text


# Opening lists _delta_log, then reads the checkpoint and commits it chose: a writer's log cleanup
# (maintenance.cleanup_log) may delete one in between. It deletes only behind a newer checkpoint, so a
# new listing loads; a partition written at heartbeat rate checkpoints every second or so.
OPEN_ATTEMPTS = 5


def load_handle(location: Location | str) -> DeltaTable:
    """A delta-rs handle at the table's latest version, listing the log again if a file vanished under it."""
    location = Location.of(location, what="table")
    for attempt in range(OPEN_ATTEMPTS):
        try:
            return DeltaTable(location.uri, storage_options=location.io.delta_options())
        except TableNotFoundError:
            raise
        except DeltaError as error:
            vanished = "_delta_log" in str(error) and "not found" in str(error).lower()
            if not vanished or attempt == OPEN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def checkpoint_interval(configuration: Mapping[str, str | None]) -> int:
    """The table's `delta.checkpointInterval` (DEFAULT_CHECKPOINT_INTERVAL if unset or not a number)."""
    value = configuration.get("delta.checkpointInterval")
    try:
        return max(1, int(value)) if value is not None else DEFAULT_CHECKPOINT_INTERVAL
    except ValueError:
        return DEFAULT_CHECKPOINT_INTERVAL


def is_checkpoint_version(version: int, interval: int) -> bool:
    """Whether a checkpoint is written at this version (99, 199, ...: delta-rs 1.6's own schedule, kept)."""
    return version > 0 and (version + 1) % interval == 0


def _added_item(item: Any) -> tuple[pa.Table, tuple[int, int] | None, int | None]:
    """A `rewrite` item as (rows, claimed offset range or None, modification time or None)."""
    if not isinstance(item, tuple):
        return item, None, None
    if len(item) == 2:
        return item[0], item[1], None
    return item[0], item[1], item[2]


def _remove_quietly(table: Table, path: str) -> None:
    try:
        table.io.delete(path)
    except KafkaStorageError as error:
        # Only a cache of nothing: vacuum removes files in no commit later.
        log.warning("%s: could not delete %s after a lost commit: %s", table.uri, path, error)


def _is_decoding_error(error: BaseException | None) -> bool:
    """A pyarrow error about the bytes of a file (not about reaching it)."""
    if error is None or isinstance(error, FileNotFoundError):
        return False
    if isinstance(error, pa.ArrowInvalid):
        return True
    text = str(error)
    return any(word in text for word in ("Parquet", "parquet", "magic bytes", "footer", "Couldn't deserialize"))


@contextlib.contextmanager
def storage_errors(uri: str, doing: str, version: int | None = None) -> Iterator[None]:
    """Turn a delta-rs, pyarrow or OS failure into KafkaStorageError naming the table and version."""
    try:
        yield
    except (KafkaException, TableNotFoundError, CommitFailedError):
        raise
    except (DeltaError, OSError, pa.ArrowException) as error:
        at = f" at version {version}" if version is not None else ""
        raise KafkaStorageError(f"{doing} {uri}{at} failed: {one_line(error)}", uri=uri, version=version) from error


__all__ = ["FileEntry", "Table", "TableNotFoundError", "REOPEN_EVERY_COMMITS", "storage_errors"]
