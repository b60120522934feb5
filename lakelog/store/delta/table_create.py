"""Creating a table: version 0, put-if-absent, and proven not to be the refill of a deleted 0.json (S9.5)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

import pyarrow as pa

from lakelog.errors import KafkaStorageError
from lakelog.store.delta.actions import MalformedCommit, commit_info, encode_commit, metadata_action, protocol_action
from lakelog.store.delta.commit import _now_ms
from lakelog.store.delta.log import LAST_CHECKPOINT, DeltaLog, commit_name
from lakelog.store.delta.schema import UnsupportedSchema, schema_string
from lakelog.store.delta.snapshot import SnapshotError
from lakelog.store.delta.table_errors import storage_errors
from lakelog.store.io.fileio import one_line
from lakelog.store.io.location import Location

logger = logging.getLogger(__name__)


def put_version_zero(location: Location, schema: pa.Schema, configuration: Mapping[str, str]) -> tuple[list[dict], bool]:
    """Put version 0 of a new table (put-if-absent): its actions, and whether this call's put made it.

    False also when the put failed but a table is there (another creator's, or this one's lost answer): the
    caller opens it.
    """
    now_ms = _now_ms()
    try:
        text = schema_string(schema)
    except UnsupportedSchema as error:
        raise KafkaStorageError(f"creating {location.uri} failed: {error}", uri=location.uri) from error
    table_id = str(uuid.uuid4())
    actions = [
        commit_info(now_ms, "CREATE TABLE", uuid.uuid4().hex, {"mode": "ErrorIfExists"}, None, table_id),
        protocol_action(),
        metadata_action(table_id, text, configuration, now_ms),
    ]
    delta_log = DeltaLog(location)
    try:
        with storage_errors(location.uri, "creating"):
            location.io.make_dirs(location.uri)
            return actions, delta_log.put_commit(0, encode_commit(actions))
    except KafkaStorageError:
        with storage_errors(location.uri, "looking up"):
            if not delta_log.exists():
                raise
        return actions, False


def created_in_the_log(log: DeltaLog, table_id: str) -> bool:
    """After a successful put of 0.json: is it the log's version 0, or a refill of one log cleanup deleted (S9.5)?

    Cleanup deletes only behind checkpoints, so a table whose 0.json is gone
    has a `_last_checkpoint`; if there is one, the latest snapshot decides: a
    creator paused between its look for the table and its put finds another
    table id there. The stray 0.json is removed (logged) and the creator
    opens the table.
    """
    io, uri = log.io, log.location.uri
    try:
        if not io.file_exists(log.file_uri(LAST_CHECKPOINT)):
            return True
        if log.load().table_id == table_id:
            return True
    except (KafkaStorageError, SnapshotError, MalformedCommit, OSError) as error:
        raise KafkaStorageError(
            f"creating {uri}: version 0 was written but the log cannot be read: {one_line(error)}", uri=uri
        ) from error
    stray = log.file_uri(commit_name(0))
    logger.warning("%s: the create put version 0 into a hole of an existing table's log; removing it", uri)
    try:
        if table_id in io.read(stray).decode("utf-8", "replace"):
            io.delete(stray)
    except (FileNotFoundError, KafkaStorageError) as error:
        logger.warning("%s: could not remove the stray commit file %s: %s", uri, stray, one_line(error))
    return False


__all__ = ["created_in_the_log", "put_version_zero"]
