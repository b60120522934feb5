"""Opening a root: parse its URI, and refuse a store on which delta-rs cannot commit safely (S12.1, S12.2).

Every commit of lakelog is a put-if-absent of the next `_delta_log` file: the
compare-and-set of the one rule (ARCHITECTURE.md). A local folder has it (an
atomic rename that fails if the target exists), and delta-rs does it on S3
and compatible stores with a conditional PUT (`If-None-Match: *`). A store
that ignores that header would let two writers both "win" the same version,
so the first time a process opens an S3 root, `check_root` proves the store
refuses the loser of a real commit race, in a scratch table under
`<root>/_lakelog/probes/` that it deletes again. The answer is kept per store
and bucket for the life of the process.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError

from lakelog.errors import InvalidConfig, KafkaException, KafkaStorageError, SaslAuthenticationFailed
from lakelog.store.fileio import LOCAL, Location, one_line

log = logging.getLogger(__name__)

PROBES_DIR = "_lakelog/probes"
_verified: dict[tuple, float] = {}
_verified_lock = threading.Lock()


def check_root(root: Any, storage_options: Mapping[str, Any] | None = None) -> Location:
    """The root as a Location, checked: a local root must not be a file; an S3 root must be safe to commit on.

    Raises InvalidConfig (unknown scheme, missing bucket, a file as root, a store
    without conditional put), SaslAuthenticationFailed (credentials refused) or
    KafkaStorageError (the store cannot be reached).
    """
    location = Location.of(root, storage_options)
    if location.is_local:
        found = location.io.info(location.uri)
        if found is not None and not found.is_dir:
            raise InvalidConfig(f"lakelog.root {location.uri} is a file, not a folder", key="lakelog.root")
        return location
    key = (location.io, location.bucket)
    if key not in _verified:
        with _verified_lock:
            if key not in _verified:
                started = time.monotonic()
                verify_conditional_put(location)
                _verified[key] = time.monotonic() - started
                log.info(
                    "store of %s refuses the loser of a commit race (checked in %.0f ms)", location.uri, _verified[key] * 1000
                )
    return location


def verify_conditional_put(location: Location) -> None:
    """Race two commits of one version in a scratch table under the root: the store must refuse the second."""
    settings = location.io.settings
    if settings.get("s3_allow_unsafe_rename", "false").lower() == "true":
        raise InvalidConfig(
            f"lakelog.root {location.uri}: s3_allow_unsafe_rename commits by copy and delete, which two writers "
            f"can both win; lakelog needs the store's conditional put",
            key="lakelog.storage.s3_allow_unsafe_rename",
        )
    probe = location.child(PROBES_DIR, uuid.uuid4().hex)
    options = location.io.delta_options()
    row = pa.table({"probe": pa.array([1], pa.int64())})
    strict = CommitProperties(max_commit_retries=0)
    try:
        try:
            DeltaTable.create(probe.uri, row.schema, mode="error", storage_options=options, commit_properties=strict)
            first, second = (DeltaTable(probe.uri, storage_options=options) for _ in range(2))
            first.create_write_transaction([], mode="append", schema=row.schema, commit_properties=strict)
            try:
                second.create_write_transaction([], mode="append", schema=row.schema, commit_properties=strict)
            except CommitFailedError:
                return
        except (DeltaError, OSError) as error:
            raise root_error(location, error) from None
        raise InvalidConfig(
            f"lakelog.root {location.uri}: the store let two writers commit the same Delta version "
            f"(it ignores conditional puts, If-None-Match); lakelog cannot commit safely there",
            key="lakelog.root",
        )
    finally:
        try:
            location.io.delete_tree(probe.uri)
        except KafkaException as error:
            log.warning("could not delete the store probe %s: %s", probe.uri, error)


def root_error(location: Location, error: BaseException) -> KafkaException:
    """What a failure to reach a root means for the user: a missing bucket, refused credentials, or an outage."""
    text = one_line(error)
    where = location.io.settings.get("endpoint_url") or "the default AWS endpoint"
    if "NoSuchBucket" in text or "NO_SUCH_BUCKET" in text:
        return InvalidConfig(f"lakelog.root {location.uri}: bucket {location.bucket} does not exist at {where}", key="lakelog.root")
    if any(word in text for word in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403 Forbidden", "ExpiredToken")):
        return SaslAuthenticationFailed(f"lakelog.root {location.uri}: {where} refused the credentials ({_reason(text)})")
    return KafkaStorageError(f"lakelog.root {location.uri}: cannot reach {where}: {_reason(text)}", uri=location.uri)


def _reason(text: str) -> str:
    """The innermost useful part of a nested engine message."""
    for word in ("Connection refused", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "timed out", "dns error"):
        if word in text:
            return word
    return text[-300:]


__all__ = ["check_root", "root_error", "verify_conditional_put"]
