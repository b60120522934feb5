"""The strict commit of a `Table`, as a value: exactly version v+1 of the snapshot decided on.

A `Commit` is built from the table's snapshot in hand and attempted once; it
answers `Committed`, `Conflict` (another writer's commit holds v+1) or `Unknown`
(the answer was lost and the log cannot tell yet), as delta-kernel's
`Transaction` does. It puts `_delta_log/<v+1>.json` put-if-absent with the
commit's actions, never rebased. A put that lost (the version was taken) or
whose outcome is unknown is resolved by reading `<v+1>.json` for the commit id
(S12.3); a lost commit deletes the files it wrote (S8.3). After every put, a
read of `<v>.json` proves the commit is the log's v+1 and not a refill of a
version log cleanup deleted (S9.5), nor a commit into a table deleted (and
perhaps created again) since the decision: `<v>.json` must be there and of the
same table (the commit info names its table's id). Nothing between the decision
and the put reads the log, so this check is the only guard, whatever the pause.
A writer whose put lands in a deleted table withdraws it: UnknownTopicOrPartition.
Then the snapshot takes the commit from the actions in hand (no read), and a
checkpoint is written when the version is on the table's interval.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import pyarrow as pa

from lakelog.errors import CommitConflict, KafkaStorageError, UnknownTopicOrPartition
from lakelog.store.delta.actions import TABLE_ID_KEY, MalformedCommit, commit_info, encode_commit, txn_action
from lakelog.store.delta.interval import interval_seconds
from lakelog.store.delta.log import TableNotFoundError, commit_name
from lakelog.store.delta.snapshot import SnapshotError
from lakelog.store.io.fileio import one_line

if TYPE_CHECKING:
    from lakelog.store.delta.log import DeltaLog
    from lakelog.store.delta.snapshot import Snapshot
    from lakelog.store.io.fileio import FileIO

logger = logging.getLogger(__name__)

DEFAULT_CHECKPOINT_INTERVAL = 100
# Table property set by a table's last commit before it is deleted (lakelog.store.upkeep.deletion): no writer commits after it.
DELETED_KEY = "lakelog.deleted"
DEFAULT_DELETED_FILE_RETENTION_MS = 7 * 86_400_000
# Test hook (the S9.5 paused-writer test): a process whose environment names a substring of a table's URI
# here stops itself with SIGSTOP after its decision, just before the put of its first commit to that table.
# Read once, when this module is imported (a commit reads no environment).
STOP_BEFORE_COMMIT_PUT = "LAKELOG_TEST_STOP_BEFORE_COMMIT_PUT"
_stop_before_commit_put: str | None = os.environ.get(STOP_BEFORE_COMMIT_PUT) or None


@dataclass(frozen=True)
class Committed:
    """The log's version `version` is this commit's."""

    version: int

    def result(self) -> int:
        return self.version


@dataclass(frozen=True)
class Conflict:
    """Another writer's commit is the log's version `decided_on + 1`: a lost race, with this commit's files
    deleted (S8.3) and the handle moved to the latest snapshot it could read; decide again on it."""

    uri: str
    decided_on: int
    current_version: int
    # The version had been taken long before: the put refilled a commit file that log cleanup had deleted (S9.5).
    long_ago: bool = False

    def result(self) -> NoReturn:
        when = " long ago" if self.long_ago else ""
        raise CommitConflict(
            f"version {self.decided_on + 1} of {self.uri} was taken by another writer{when}",
            decided_on=self.decided_on,
            current_version=self.current_version,
        )


@dataclass(frozen=True)
class Unknown:
    """The put's answer was lost, or its place in the log cannot be read now: the commit may still land, so it
    is neither failed nor to be retried blindly (S12.3). `error` says what could not be told."""

    error: KafkaStorageError

    def result(self) -> NoReturn:
        raise self.error


CommitOutcome = Committed | Conflict | Unknown


class CommitTarget(Protocol):
    """What a commit needs of its table (a `Table`): its log, file IO and snapshot, which the commit moves."""

    uri: str
    io: FileIO
    _log: DeltaLog
    _snapshot: Snapshot

    @property
    def version(self) -> int: ...

    @property
    def table_id(self) -> str: ...

    @property
    def configuration(self) -> dict[str, str]: ...

    def refresh(self) -> int: ...


class Commit:
    """One commit, as a value: `actions` decided on the table's snapshot in hand (version `decided_on`), put
    once, as exactly version `decided_on + 1`, never rebased. `attempt()` answers `Committed`, `Conflict` or
    `Unknown`; a table deleted under it raises UnknownTopicOrPartition (nothing more commits there).

    `owned` are files this commit's writer put: deleted again when the commit is known to have lost (S8.3),
    kept when its outcome is unknown (it may still land). `mode` names the commit's operation ("append",
    "overwrite", "set_configuration", ...); `schema` is the data's (the table's is not changed). The commit
    moves the table's snapshot: to this commit (from the actions in hand: no read) when it lands, to the latest
    after a lost race.
    """

    def __init__(
        self,
        table: CommitTarget,
        actions: list[dict[str, Any]],
        *,
        schema: pa.Schema,
        mode: str,
        decided_on: int,
        app_versions: Mapping[str, int] | None = None,
        metadata: Mapping[str, str] | None = None,
        owned: Sequence[str] = (),
    ) -> None:
        self.table = table
        self.uri = table.uri
        self.decided_on = decided_on
        self.version = decided_on + 1
        self.mode = mode
        self.schema = schema
        self.owned = list(owned)
        self.commit_id = uuid.uuid4().hex
        now_ms = _now_ms()
        operation, parameters = _OPERATIONS.get(mode, ("WRITE", {"mode": "Append"}))
        header = [commit_info(now_ms, operation, self.commit_id, parameters, metadata, table.table_id)]
        header += [txn_action(app_id, app_version, now_ms) for app_id, app_version in (app_versions or {}).items()]
        self.actions = header + actions
        self.added = [action["add"]["path"] for action in actions if "add" in action]
        self._attempted = False

    def attempt(self) -> CommitOutcome:
        """Put the commit, once; resolve a put that did not report success by reading the log (S12.3), and prove
        one that did is the log's version, not a hole's refill (S9.5)."""
        if self._attempted:
            raise RuntimeError(f"a commit of version {self.version} of {self.uri} is attempted once")
        self._attempted = True
        table = self.table
        if DELETED_KEY in table.configuration and self.mode != "mark_deleted":
            raise UnknownTopicOrPartition(f"{self.uri} was deleted (version {table.version}): nothing more commits to it")
        if _stop_before_commit_put is not None:
            _stop_here_if_asked(self.uri)
        try:
            created = table._log.put_commit(self.version, encode_commit(self.actions))
            failure: KafkaStorageError | None = None
        except KafkaStorageError as error:
            created, failure = False, error
        if not created:
            landed = self._landed(failure or "the version was taken")
            if isinstance(landed, Unknown):
                return landed
            if not landed:
                if self.owned:
                    logger.debug(
                        "%s: version %d went to another writer; deleting this writer's %d file(s)",
                        self.uri,
                        self.version,
                        len(self.owned),
                    )
                for path in self.owned:
                    _remove_quietly(table.io, self.uri, path)
                self._refresh_quietly()
                return Conflict(self.uri, self.decided_on, table.version)
            if failure is not None:
                logger.warning(
                    "%s: commit of version %d reported %s, but the log holds it: committed",
                    self.uri,
                    self.version,
                    one_line(failure),
                )
        refused = self._check_not_in_the_past()
        if refused is not None:
            return refused
        if table.version == self.decided_on:
            table._snapshot.apply(self.actions, self.version)
        elif table.version < self.version:
            table.refresh()
        self._checkpoint_if_due()
        return Committed(self.version)

    def _unknown(self, message: str, cause: BaseException | None = None) -> Unknown:
        error = KafkaStorageError(message, uri=self.uri, decided_on=self.decided_on)
        error.__cause__ = cause
        return Unknown(error)

    def _check_not_in_the_past(self) -> Conflict | Unknown | None:
        """After a successful put of `version`.json: prove it is the log's version, not a hole's refill (S9.5).

        `maintenance.cleanup_log` (and a table's deletion) deletes commit files in
        ascending version order, so if N.json had been deleted before this writer's
        put, (N-1).json was deleted before it. One read of (N-1).json, of this
        table, is the proof in the common case, whatever the writer's
        pause between its decision and its put. If (N-1).json is gone, the latest
        snapshot decides (`_in_latest_snapshot`); a commit found in the past is a
        lost race, `Conflict`, with its stray commit file and this writer's
        files removed (logged); one that cannot be told is `Unknown`. None: proven.
        """
        version, table = self.version, self.table
        if version == 0:
            return None
        unknown = f"version {version} of {self.uri} was written but its place in the log is unknown"
        try:
            previous = table._log.read_commit_bytes(version - 1)
            if previous is not None and not _of_another_table(previous, table.table_id):
                return None
            replaced = previous is not None or table_gone_or_replaced(table._log, table.table_id, self.uri)
        except KafkaStorageError as failure:
            return self._unknown(f"{unknown}: {failure}", failure)
        if replaced:
            # The table this writer decided on was deleted (and perhaps created again): its commit is debris.
            self._withdraw("the table it was decided on was deleted")
            raise UnknownTopicOrPartition(f"{self.uri} was deleted after this writer read it: version {version} withdrawn")
        found = self._in_latest_snapshot(unknown)
        if found is not False:
            return found if isinstance(found, Unknown) else None
        logger.warning(
            "%s: the put of version %d refilled a commit file log cleanup had deleted (the writer decided on a snapshot "
            "older than the kept log): a lost race; removing it and this writer's %d file(s)",
            self.uri,
            version,
            len(self.owned),
        )
        self._withdraw(None)
        return Conflict(self.uri, self.decided_on, table.version, long_ago=True)

    def _withdraw(self, why: str | None) -> None:
        """Remove this writer's commit file of its version (only if it holds its commit id) and the files it wrote."""
        io = self.table.io
        if why is not None:
            logger.warning(
                "%s: version %d was put after %s; removing it and %d file(s)", self.uri, self.version, why, len(self.owned)
            )
        stray = self.table._log.file_uri(commit_name(self.version))
        try:
            if self.commit_id in io.read(stray).decode("utf-8", "replace"):
                io.delete(stray)
        except (FileNotFoundError, KafkaStorageError) as error:
            logger.warning("%s: could not remove the stray commit file %s: %s", self.uri, stray, one_line(error))
        for path in self.owned:
            _remove_quietly(io, self.uri, path)

    def _in_latest_snapshot(self, unknown: str) -> bool | Unknown:
        """Whether this commit (the files it added) is in the log, read on the latest snapshot.

        True if one of its files is active there or removed since (a tombstone);
        False if none is: the commit is not the log's version (the log's was
        another writer's). A commit that added no file cannot be told this way:
        `Unknown` (S12.3), as when the log cannot be read. The one case read
        wrongly as False: the commit was the log's, and its files were removed and
        their tombstones expired (the table's `delete.retention.ms`) while this
        call was paused. The table's snapshot moves to the latest.
        """
        table = self.table
        try:
            table._snapshot = table._log.load()
        except (KafkaStorageError, TableNotFoundError, SnapshotError, MalformedCommit, OSError) as error:
            return self._unknown(f"{unknown}: {one_line(error)}", error)
        if table.version < self.version:
            return self._unknown(f"{unknown}: the latest snapshot is version {table.version}")
        if not self.added:
            return self._unknown(f"{unknown}: the commit added no file to look for")
        snapshot = table._snapshot
        return any(name in snapshot.adds or name in snapshot.tombstones for name in self.added)

    def _landed(self, error: BaseException | str) -> bool | Unknown:
        """After a put that did not report success: True if the log's version holds this commit, False if another's.

        `Unknown` if the log cannot tell (the version is not there, or cannot be
        read): the commit may still land (S12.3). If log cleanup deleted that
        version's file, the latest snapshot decides (`_in_latest_snapshot`, S9.5).
        """
        version, table = self.version, self.table
        reason = error if isinstance(error, str) else one_line(error)
        unknown = f"committing version {version} of {self.uri} failed ({reason}) and its outcome is unknown"
        cause = error if isinstance(error, BaseException) else None
        try:
            data = table._log.read_commit_bytes(version)
            if data is not None:
                return self.commit_id in data.decode("utf-8", "replace")
            table.refresh()
        except KafkaStorageError as failure:
            return self._unknown(f"{unknown}: {failure}", failure)
        if table.version < version:
            return self._unknown(f"{unknown}: the version is not in the log yet", cause)
        # Deleted by log cleanup: after this commit landed, or before a put into the past was tried (S9.5).
        return self._in_latest_snapshot(f"{unknown}: its log file is gone")

    def _checkpoint_if_due(self) -> None:
        """Write a checkpoint of the snapshot in hand if the version is on the checkpoint interval.

        Called only after `_check_not_in_the_past`, so a checkpoint is never built
        from a commit that refilled a hole. Tombstones older than the table's
        `delta.deletedFileRetentionDuration` are left out (and dropped from the
        snapshot). A failure is logged, not raised: the commit stands and the next
        interval checkpoints again.
        """
        table = self.table
        interval = checkpoint_interval(table.configuration)
        if not (is_checkpoint_version(self.version, interval) or is_checkpoint_version(table.version, interval)):
            return
        cutoff_ms = _now_ms() - deleted_file_retention_ms(table.configuration)
        try:
            table._snapshot.expire_tombstones(cutoff_ms)
            table._log.write_checkpoint(table._snapshot, cutoff_ms)
        except (KafkaStorageError, SnapshotError, OSError, pa.ArrowException) as error:
            logger.warning("%s: checkpoint at version %d failed: %s", self.uri, table.version, one_line(error))

    def _refresh_quietly(self) -> None:
        """After a lost race: move to the latest snapshot if the log can be read now (the caller decides again)."""
        try:
            self.table.refresh()
        except KafkaStorageError as error:
            logger.debug("%s: could not reload after a lost race: %s", self.uri, error)


def table_gone_or_replaced(log: DeltaLog, table_id: str, uri: str) -> bool:
    """After a put whose predecessor is absent: is there no table here now, or one with another id?"""
    first = log.read_commit_bytes(0)
    if first is not None:
        return f'"id":"{table_id}"'.encode() not in first
    try:
        return log.load().table_id != table_id
    except TableNotFoundError:
        return True
    except (SnapshotError, MalformedCommit, OSError) as error:
        raise KafkaStorageError(f"reading {uri} failed: {one_line(error)}", uri=uri) from error


def _of_another_table(data: bytes, table_id: str) -> bool:
    """Whether commit bytes name a table other than `table_id` (a commit of a table deleted and made again)."""
    marker = f'"{TABLE_ID_KEY}":"'.encode()
    return marker in data and f'"{TABLE_ID_KEY}":"{table_id}"'.encode() not in data


_OPERATIONS = {
    "append": ("WRITE", {"mode": "Append"}),
    "overwrite": ("WRITE", {"mode": "Overwrite"}),
    "set_configuration": ("SET TBLPROPERTIES", {}),
    "upgrade_protocol": ("UPGRADE PROTOCOL", {}),
    "mark_deleted": ("DELETE", {}),
}


def checkpoint_interval(configuration: Mapping[str, str | None]) -> int:
    """The table's `delta.checkpointInterval` (DEFAULT_CHECKPOINT_INTERVAL if unset or not a number)."""
    value = configuration.get("delta.checkpointInterval")
    try:
        return max(1, int(value)) if value is not None else DEFAULT_CHECKPOINT_INTERVAL
    except ValueError:
        return DEFAULT_CHECKPOINT_INTERVAL


def is_checkpoint_version(version: int, interval: int) -> bool:
    """Whether a checkpoint is written at this version (99, 199, ...: delta-rs 1.6's schedule, kept)."""
    return version > 0 and (version + 1) % interval == 0


def deleted_file_retention_ms(configuration: Mapping[str, str]) -> int:
    """The table's `delta.deletedFileRetentionDuration` in ms: how long tombstones are kept."""
    default = DEFAULT_DELETED_FILE_RETENTION_MS / 1000
    return int(interval_seconds(configuration.get("delta.deletedFileRetentionDuration"), default) * 1000)


def _stop_here_if_asked(uri: str) -> None:
    """The paused-writer test's stop point (STOP_BEFORE_COMMIT_PUT): SIGSTOP once, between the decision and the put."""
    global _stop_before_commit_put
    wanted = _stop_before_commit_put
    if wanted and wanted in uri:
        _stop_before_commit_put = None
        os.environ.pop(STOP_BEFORE_COMMIT_PUT, None)  # nor in a process this one starts
        os.kill(os.getpid(), signal.SIGSTOP)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _remove_quietly(io: FileIO, uri: str, path: str) -> None:
    try:
        io.delete(path)
    except KafkaStorageError as error:
        # Only a cache of nothing: vacuum removes files in no commit later.
        logger.warning("%s: could not delete %s after a lost commit: %s", uri, path, error)


__all__ = [
    "DELETED_KEY",
    "Commit",
    "CommitOutcome",
    "CommitTarget",
    "Committed",
    "Conflict",
    "Unknown",
    "checkpoint_interval",
    "deleted_file_retention_ms",
    "is_checkpoint_version",
    "table_gone_or_replaced",
]
