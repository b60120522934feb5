"""Opening a root: parse its URI, and refuse a store on which delta-rs cannot commit safely (S12.1, S12.2).

Every commit of lakelog is a put-if-absent of the next `_delta_log` file: the
compare-and-set of the one rule (ARCHITECTURE.md). A local folder has it (an
atomic rename that fails if the target exists), and delta-rs does it on S3
and compatible stores with a conditional PUT (`If-None-Match: *`). A store
that ignores that header would let two writers both "win" the same version,
so the first time a process opens an S3 root, `check_root` puts a scratch
object under `<root>/_lakelog/probes/` twice with that header, requires the
second put to be refused, and deletes the object again. The same requests tell
a missing bucket, refused credentials and an unreachable endpoint apart.

The answer is kept for the life of the process, keyed by everything it rests on:
a store that was checked (or, without keys, AWS S3 trusted) by its settings
(endpoint, keys, options: the FileIO) and bucket, since conditional puts are the
store's behaviour; a root whose keys may not write there, and so was opened
unchecked, by its settings and URI, since write permission is granted per
prefix. A refusal is never kept: the next open checks again.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from lakelog.errors import InvalidConfig, KafkaException, KafkaStorageError, SaslAuthenticationFailed
from lakelog.store.io.faults import AccessDenied, ConditionalWriteConflict
from lakelog.store.io.fileio import S3, one_line
from lakelog.store.io.location import Location

logger = logging.getLogger(__name__)

PROBES_DIR = "_lakelog/probes"
# What verify_conditional_put found: the store was checked, AWS S3 trusted without keys, or the root left unchecked.
CHECKED, TRUSTED, UNCHECKED = "checked", "trusted", "unchecked"
# (FileIO, bucket) of stores checked or trusted -> seconds the check took; (FileIO, URI) of roots opened unchecked.
_verified: dict[tuple, float] = {}
_unchecked: set[tuple] = set()
_verified_lock = threading.Lock()


def check_root(root: Any, storage_options: Mapping[str, Any] | None = None) -> Location:
    """The root as a Location, checked: a local root must not be a file; an object store root must be safe to commit on.

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
    store, root_key = (location.io, location.bucket), (location.io, location.uri)
    if store not in _verified and root_key not in _unchecked:
        with _verified_lock:
            if store not in _verified and root_key not in _unchecked:
                started = time.monotonic()
                verdict = verify_conditional_put(location)
                if verdict == UNCHECKED:
                    _unchecked.add(root_key)
                else:
                    _verified[store] = time.monotonic() - started
                    if verdict == CHECKED:
                        logger.info(
                            "the store of %s honours conditional puts (checked in %.0f ms)", location.uri, _verified[store] * 1000
                        )
    return location


def verify_conditional_put(location: Location) -> str:
    """Put one object twice under the root with the store's conditional create: the store must refuse the second.

    S3: `If-None-Match: *` (412); Azure: Put Blob with `If-None-Match: *` (409/412); GCS: `ifGenerationMatch=0`
    (412). An emulator that ignores the condition on the path commits take (fake-gcs-server before mid-2026) is
    refused here.

    Returns CHECKED, TRUSTED (no keys, AWS S3 itself) or UNCHECKED (the keys may
    not write under the root); raises for a store that must not be used.

    This is the request every commit is made with, sent by the same client
    (the root's FileIO, `lakelog.store.io.s3_requests`). Without static keys
    (an instance role) nothing is probed: then the endpoint must be AWS S3
    itself, which has honoured conditional writes since August 2024.
    """
    settings = location.io.settings
    if location.scheme == S3:
        verdict = _s3_trust(location, settings)
        if verdict is not None:
            return verdict
    return _probe(location)


def _s3_trust(location: Location, settings: dict[str, str]) -> str | None:
    """TRUSTED for AWS S3 itself without static keys, nothing to say (probe it) otherwise; raises for unsafe settings."""
    if settings.get("s3_allow_unsafe_rename", "false").lower() == "true":
        raise InvalidConfig(
            f"lakelog.root {location.uri}: s3_allow_unsafe_rename commits by copy and delete, which two writers "
            f"can both win; lakelog needs the store's conditional put",
            key="lakelog.storage.s3_allow_unsafe_rename",
        )
    if not (settings.get("access_key_id") and settings.get("secret_access_key")):
        if settings.get("endpoint_url"):
            raise InvalidConfig(
                f"lakelog.root {location.uri}: without access keys lakelog cannot check that "
                f"{settings['endpoint_url']} honours conditional puts; set access_key_id and secret_access_key",
                key="lakelog.storage.access_key_id",
            )
        logger.info("no static keys for %s: trusting AWS S3's conditional writes", location.uri)
        return TRUSTED
    return None


def _probe(location: Location) -> str:
    probe = f"{location.uri.rstrip('/')}/{PROBES_DIR}/{uuid.uuid4().hex}"
    io = location.io
    try:
        # True, or False if a retry after a lost answer found this very object: it is there either way.
        io.put_if_absent(probe, b"lakelog probe")
    except AccessDenied:
        # Valid keys that may not write here: a reader (a Spark job, lakelog sql) needs no commit.
        logger.warning(
            "%s: the credentials may not write under the root, so its conditional puts were not checked; "
            "any commit there will fail",
            location.uri,
        )
        return UNCHECKED
    except KafkaStorageError as error:
        raise root_error(location, error) from None
    try:
        try:
            overwritten = io.put_if_absent(probe, b"lakelog probe again")
        except ConditionalWriteConflict:
            overwritten = False  # 409: refused as racing a write of the same key, which is a refusal too
        except KafkaStorageError as error:
            raise root_error(location, error) from None
    finally:
        try:
            io.discard(probe)
        except KafkaStorageError as error:
            logger.warning("could not delete the store probe %s: %s", probe, one_line(error))
    if not overwritten:
        return CHECKED
    raise InvalidConfig(
        f"lakelog.root {location.uri}: the store at {location.io.endpoint()} overwrote an object that a conditional "
        f"create, a conditional put (If-None-Match / ifGenerationMatch), should have refused; two writers could both commit one Delta "
        f"version there",
        key="lakelog.root",
    )


def root_error(location: Location, error: BaseException) -> KafkaException:
    """What a failure to reach a root means for the user: a missing bucket, refused credentials, or an outage."""
    text = one_line(error)
    where = location.io.endpoint()
    if "NoSuchBucket" in text or "NO_SUCH_BUCKET" in text:
        return InvalidConfig(
            f"lakelog.root {location.uri}: bucket {location.bucket} does not exist at {where}", key="lakelog.root"
        )
    if any(
        word in text
        for word in (
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "403 Forbidden",
            "ExpiredToken",
            "InvalidToken",
            "AuthenticationFailed",
            "401 Unauthorized",
        )
    ):
        return SaslAuthenticationFailed(f"lakelog.root {location.uri}: {where} refused the credentials ({_reason(text)})")
    return KafkaStorageError(f"lakelog.root {location.uri}: cannot reach {where}: {_reason(text)}", uri=location.uri)


def _reason(text: str) -> str:
    """The innermost useful part of a nested engine message."""
    for word in (
        "Connection refused",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "AuthenticationFailed",
        "401 Unauthorized",
        "ExpiredToken",
        "timed out",
        "dns error",
    ):
        if word in text:
            return word
    return text[-300:]


__all__ = ["check_root", "root_error", "verify_conditional_put"]
