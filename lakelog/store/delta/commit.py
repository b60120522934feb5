"""The strict commit of a `Table`: exactly version v+1 of the snapshot decided on, or `CommitConflict`.

`StrictCommit._commit` puts `_delta_log/<v+1>.json` put-if-absent with the
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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

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


class StrictCommit:
    """The commit protocol of `Table` (a mixin: it uses the table's log, snapshot and file IO)."""

    uri: str
    io: FileIO
    _log: DeltaLog
    _snapshot: Snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def configuration(self) -> dict[str, str]:
        return self._snapshot.configuration

    def refresh(self) -> int:
        raise NotImplementedError

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
        """Put `actions` as exactly version `decided_on + 1`; resolve an unknown outcome by reading the log (S12.3).

        `owned` are files this call wrote: deleted again when the commit is known
        to have lost (S8.3), kept when its outcome is unknown (it may still land).
        `mode` names the commit's operation ("append", "overwrite",
        "set_configuration"); `schema` is the data's (the table's is not changed).
        """
        if DELETED_KEY in self.configuration and mode != "mark_deleted":
            raise UnknownTopicOrPartition(f"{self.uri} was deleted (version {self.version}): nothing more commits to it")
        commit_id = uuid.uuid4().hex
        now_ms = _now_ms()
        operation, parameters = _OPERATIONS.get(mode, ("WRITE", {"mode": "Append"}))
        header = [commit_info(now_ms, operation, commit_id, parameters, metadata, self._snapshot.table_id)]
        header += [txn_action(app_id, app_version, now_ms) for app_id, app_version in (app_versions or {}).items()]
        everything = header + actions
        version = decided_on + 1
        added = [action["add"]["path"] for action in actions if "add" in action]
        if _stop_before_commit_put is not None:
            _stop_here_if_asked(self.uri)
        try:
            created = self._log.put_commit(version, encode_commit(everything))
            failure: BaseException | None = None
        except KafkaStorageError as error:
            created, failure = False, error
        if not created:
            if not self._landed(decided_on, commit_id, failure or "the version was taken", added):
                if owned:
                    logger.debug(
                        "%s: version %d went to another writer; deleting this writer's %d file(s)", self.uri, version, len(owned)
                    )
                for path in owned:
                    _remove_quietly(self.io, self.uri, path)
                self._refresh_quietly()
                raise CommitConflict(
                    f"version {version} of {self.uri} was taken by another writer",
                    decided_on=decided_on,
                    current_version=self.version,
                ) from failure
            if failure is not None:
                logger.warning(
                    "%s: commit of version %d reported %s, but the log holds it: committed", self.uri, version, one_line(failure)
                )
        self._check_not_in_the_past(version, commit_id, added, owned)
        if self.version == decided_on:
            self._snapshot.apply(everything, version)
        elif self.version < version:
            self.refresh()
        self._checkpoint_if_due(version)
        return version

    def _check_not_in_the_past(self, version: int, commit_id: str, added: list[str], owned: list[str]) -> None:
        """After a successful put of `version`.json: prove it is the log's version, not a hole's refill (S9.5).

        `maintenance.cleanup_log` (and a table's deletion) deletes commit files in
        ascending version order, so if N.json had been deleted before this writer's
        put, (N-1).json was deleted before it. One read of (N-1).json, of this
        table, is the proof in the common case, whatever the writer's
        pause between its decision and its put. If (N-1).json is gone, the latest
        snapshot decides (`_in_latest_snapshot`); a commit found in the past is a
        lost race, `CommitConflict`, with its stray commit file and this writer's
        files removed (logged); one that cannot be told is `KafkaStorageError`.
        """
        if version == 0:
            return
        unknown = f"version {version} of {self.uri} was written but its place in the log is unknown"
        try:
            previous = self._log.read_commit_bytes(version - 1)
            if previous is not None and not self._of_another_table(previous):
                return
            replaced = previous is not None or self._table_gone_or_replaced()
        except KafkaStorageError as failure:
            raise KafkaStorageError(f"{unknown}: {failure}", uri=self.uri, decided_on=version - 1) from failure
        if replaced:
            # The table this writer decided on was deleted (and perhaps created again): its commit is debris.
            self._withdraw(version, commit_id, owned, "the table it was decided on was deleted")
            raise UnknownTopicOrPartition(f"{self.uri} was deleted after this writer read it: version {version} withdrawn")
        if self._in_latest_snapshot(
            version, added, f"version {version} of {self.uri} was written but its place in the log is unknown"
        ):
            return
        logger.warning(
            "%s: the put of version %d refilled a commit file log cleanup had deleted (the writer decided on a snapshot "
            "older than the kept log): a lost race; removing it and this writer's %d file(s)",
            self.uri,
            version,
            len(owned),
        )
        self._withdraw(version, commit_id, owned, None)
        raise CommitConflict(
            f"version {version} of {self.uri} was taken by another writer long ago",
            decided_on=version - 1,
            current_version=self.version,
        )

    def _of_another_table(self, data: bytes) -> bool:
        """Whether commit bytes name a table other than this handle's (a commit of a table deleted and made again)."""
        marker = f'"{TABLE_ID_KEY}":"'.encode()
        return marker in data and f'"{TABLE_ID_KEY}":"{self._snapshot.table_id}"'.encode() not in data

    def _table_gone_or_replaced(self) -> bool:
        """After a put whose predecessor is absent: is there no table here now, or one with another id?"""
        first = self._log.read_commit_bytes(0)
        if first is not None:
            return f'"id":"{self._snapshot.table_id}"'.encode() not in first
        try:
            return self._log.load().table_id != self._snapshot.table_id
        except TableNotFoundError:
            return True
        except (SnapshotError, MalformedCommit, OSError) as error:
            raise KafkaStorageError(f"reading {self.uri} failed: {one_line(error)}", uri=self.uri) from error

    def _withdraw(self, version: int, commit_id: str, owned: list[str], why: str | None) -> None:
        """Remove this writer's commit file of `version` (only if it holds its commit id) and the files it wrote."""
        if why is not None:
            logger.warning("%s: version %d was put after %s; removing it and %d file(s)", self.uri, version, why, len(owned))
        stray = self._log.file_uri(commit_name(version))
        try:
            if commit_id in self.io.read(stray).decode("utf-8", "replace"):
                self.io.delete(stray)
        except (FileNotFoundError, KafkaStorageError) as error:
            logger.warning("%s: could not remove the stray commit file %s: %s", self.uri, stray, one_line(error))
        for path in owned:
            _remove_quietly(self.io, self.uri, path)

    def _in_latest_snapshot(self, version: int, added: list[str], unknown: str) -> bool:
        """Whether a commit of `version` that added the files `added` is in the log, read on the latest snapshot.

        True if one of its files is active there or removed since (a tombstone);
        False if none is: the commit is not the log's `version` (the log's was
        another writer's). A commit that added no file cannot be told this way:
        `KafkaStorageError` (unknown outcome, S12.3), as when the log cannot be
        read. The one case read wrongly as False: the commit was the log's, and
        its files were removed and their tombstones expired (the table's
        `delete.retention.ms`) while this call was paused. The snapshot moves to
        the latest.
        """
        try:
            self._snapshot = self._log.load()
        except (KafkaStorageError, TableNotFoundError, SnapshotError, MalformedCommit, OSError) as error:
            raise KafkaStorageError(f"{unknown}: {one_line(error)}", uri=self.uri, decided_on=version - 1) from error
        if self.version < version:
            raise KafkaStorageError(
                f"{unknown}: the latest snapshot is version {self.version}", uri=self.uri, decided_on=version - 1
            )
        if not added:
            raise KafkaStorageError(f"{unknown}: the commit added no file to look for", uri=self.uri, decided_on=version - 1)
        return any(name in self._snapshot.adds or name in self._snapshot.tombstones for name in added)

    def _checkpoint_if_due(self, version: int) -> None:
        """Write a checkpoint of the snapshot in hand if `version` is on the checkpoint interval.

        Called only after `_check_not_in_the_past`, so a checkpoint is never built
        from a commit that refilled a hole. Tombstones older than the table's
        `delta.deletedFileRetentionDuration` are left out (and dropped from the
        snapshot). A failure is logged, not raised: the commit stands and the next
        interval checkpoints again.
        """
        interval = checkpoint_interval(self.configuration)
        if not (is_checkpoint_version(version, interval) or is_checkpoint_version(self.version, interval)):
            return
        cutoff_ms = _now_ms() - deleted_file_retention_ms(self.configuration)
        try:
            self._snapshot.expire_tombstones(cutoff_ms)
            self._log.write_checkpoint(self._snapshot, cutoff_ms)
        except (KafkaStorageError, SnapshotError, OSError, pa.ArrowException) as error:
            logger.warning("%s: checkpoint at version %d failed: %s", self.uri, self.version, one_line(error))

    def _landed(self, decided_on: int, commit_id: str, error: BaseException | str, added: list[str]) -> bool:
        """After a put that did not report success: True if version decided_on+1 holds this commit, False if another's.

        Raises KafkaStorageError if the log cannot tell (version decided_on+1 is not
        there, or cannot be read): the commit may still land, so it is neither failed
        nor to be retried blindly (S12.3). If log cleanup deleted that version's
        file, the latest snapshot decides (`_in_latest_snapshot`, S9.5).
        """
        version = decided_on + 1
        reason = error if isinstance(error, str) else one_line(error)
        unknown = f"committing version {version} of {self.uri} failed ({reason}) and its outcome is unknown"
        try:
            data = self._log.read_commit_bytes(version)
            if data is not None:
                return commit_id in data.decode("utf-8", "replace")
            self.refresh()
        except KafkaStorageError as failure:
            raise KafkaStorageError(f"{unknown}: {failure}", uri=self.uri, decided_on=decided_on) from failure
        if self.version < version:
            raise KafkaStorageError(f"{unknown}: the version is not in the log yet", uri=self.uri, decided_on=decided_on)
        # Deleted by log cleanup: after this commit landed, or before a put into the past was tried (S9.5).
        return self._in_latest_snapshot(version, added, f"{unknown}: its log file is gone")

    def _refresh_quietly(self) -> None:
        """After a lost race: move to the latest snapshot if the log can be read now (the caller decides again)."""
        try:
            self.refresh()
        except KafkaStorageError as error:
            logger.debug("%s: could not reload after a lost race: %s", self.uri, error)


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


__all__ = ["DELETED_KEY", "StrictCommit", "checkpoint_interval", "deleted_file_retention_ms", "is_checkpoint_version"]
