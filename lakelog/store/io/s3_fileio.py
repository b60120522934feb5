"""The FileIO of S3 roots: a bucket of Amazon S3 or of any store that speaks its API (MinIO, Ceph, R2, moto...).

Bytes go through pyarrow's S3 filesystem; the requests it cannot make (the
conditional PUT of a commit, a bare GET, a bare HEAD) through botocore
(lakelog.store.io.s3_requests), built from the same settings.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import gc
import logging
import os
import threading
import urllib.parse
import weakref
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.errors import KafkaStorageError
from lakelog.store.io.fileio import S3, FileIO
from lakelog.store.io.s3_requests import S3Requests
from lakelog.store.io.s3_settings import S3_KEYS, parse_duration_s

logger = logging.getLogger(__name__)


class S3FileIO(FileIO):
    """A bucket of Amazon S3 or of any store that speaks its API (MinIO, Ceph, R2, moto...)."""

    scheme = S3

    def endpoint(self) -> str:
        return self.settings.get("endpoint_url") or "the default AWS endpoint"

    def delta_options(self) -> dict[str, str]:
        options = {}
        for key, value in self.settings.items():
            environment = S3_KEYS.get(key)
            options[environment or key] = value
        return options

    def _make_filesystem(self) -> pafs.FileSystem:
        settings = self.settings
        kwargs: dict[str, Any] = {}
        endpoint = settings.get("endpoint_url")
        if endpoint:
            parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
            kwargs["endpoint_override"] = parsed.netloc + parsed.path.rstrip("/")
            kwargs["scheme"] = parsed.scheme
        if settings.get("region"):
            kwargs["region"] = settings["region"]
        if settings.get("access_key_id") and settings.get("secret_access_key"):
            kwargs["access_key"] = settings["access_key_id"]
            kwargs["secret_key"] = settings["secret_access_key"]
            if settings.get("session_token"):
                kwargs["session_token"] = settings["session_token"]
        if settings.get("connect_timeout"):
            kwargs["connect_timeout"] = parse_duration_s("connect_timeout", settings["connect_timeout"])
        if settings.get("timeout"):
            kwargs["request_timeout"] = parse_duration_s("timeout", settings["timeout"])
        if settings.get("max_retries"):
            kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=int(settings["max_retries"]) + 1)
        # A small file is one PutObject when the stream closes, not a multipart upload of three requests.
        filesystem = pafs.S3FileSystem(allow_delayed_open=True, **kwargs)
        _release_at_exit(self)
        return filesystem

    def path(self, uri: str) -> str:
        return uri.split("://", 1)[1]

    def _parquet_source(self, uri: str, whole: bool) -> pa.NativeFile:
        if not whole:
            return super()._parquet_source(uri, whole)
        # A whole file in one GET (after the HEAD) instead of a footer read and then the column chunks.
        return pa.BufferReader(self.read(uri))

    def write(self, uri: str, data: bytes | pa.Buffer) -> None:
        """One PUT: S3 makes an object visible whole or not at all.

        On Linux the AWS SDK applies no read timeout to a PutObject whose body is sent (pyarrow documents
        `request_timeout` as ignored there), so a store that stops answering would hang the writer for
        good: the put runs on a worker thread and is given up after `timeout` per attempt (30 s unless
        set) plus a second per MiB. A put given up may still land later; callers write under fresh names
        or caches, so a late object is at worst an orphan that vacuum removes.
        """
        size = len(data)
        attempt_s = parse_duration_s("timeout", self.settings["timeout"]) if self.settings.get("timeout") else 30.0
        limit = attempt_s * (int(self.settings.get("max_retries") or 0) + 1) + 1 + size / (1 << 20)
        future = _put_pool().submit(super().write, uri, data)
        try:
            future.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            raise KafkaStorageError(f"writing {uri} failed: the store did not answer within {limit:.0f} s", uri=uri) from None

    def _requests(self) -> S3Requests:
        requests = self.__dict__.get("_s3_requests")
        if requests is None:
            requests = self.__dict__["_s3_requests"] = S3Requests(self.settings)
        return requests

    def _bucket_key(self, uri: str) -> tuple[str, str]:
        bucket, _, key = self.path(uri).partition("/")
        return bucket, key

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """One PUT with `If-None-Match: *` (lakelog.store.io.s3_requests)."""
        bucket, key = self._bucket_key(uri)
        return self._requests().put_if_absent(bucket, key, data, uri)

    def read(self, uri: str) -> bytes:
        """One GET (pyarrow's stream would HEAD first); FileNotFoundError if absent."""
        bucket, key = self._bucket_key(uri)
        return self._requests().get(bucket, key, uri)

    def file_exists(self, uri: str) -> bool:
        bucket, key = self._bucket_key(uri)
        return self._requests().head(bucket, key, uri)

    def discard(self, uri: str) -> None:
        """One DELETE, there or not: no folder marker is left for an emptied prefix (pyarrow's delete leaves one)."""
        bucket, key = self._bucket_key(uri)
        self._requests().delete(bucket, key, uri)

    def make_dirs(self, uri: str) -> None:
        # Object stores have no folders; pyarrow would write empty marker objects.
        return None

    def delete_tree(self, uri: str) -> None:
        with self._errors("deleting", uri):
            self.filesystem.delete_dir_contents(self.path(uri), missing_dir_ok=True)
        # pyarrow leaves a folder marker (`<prefix>/`) for the prefix it emptied, and refuses to delete a key ending
        # in `/`: one DELETE of the marker, so a deleted tree (a write's staging folder) leaves no object behind.
        self.discard(uri.rstrip("/") + "/")


# Puts in flight at once per process: a producer appends to up to 16 partitions side by side and the transaction
# coordinator writes up to 16 markers so; more wait for a thread (and add a round trip each).
PUT_THREADS = 32
_puts: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None


def _put_pool() -> concurrent.futures.ThreadPoolExecutor:
    """Threads for S3 puts; a forked child builds its own (it has the pool object but none of its threads)."""
    global _puts
    if _puts is None or _puts[0] != os.getpid():
        _puts = (os.getpid(), concurrent.futures.ThreadPoolExecutor(PUT_THREADS, thread_name_prefix="lakelog-put"))
    return _puts[1]


# The AWS SDK under pyarrow must be shut down after the last S3 filesystem is gone and no put is in flight; left to
# the interpreter's teardown, a process that used S3 may abort at exit ("terminate called without an active
# exception", apache/arrow#34314, #41087) after its work is done, and a CLI command would then exit 134.
_holders: weakref.WeakSet[S3FileIO] = weakref.WeakSet()
_exit_hook: list[bool] = []
_exit_lock = threading.Lock()


def _release_at_exit(io: S3FileIO) -> None:
    with _exit_lock:
        _holders.add(io)
        if not _exit_hook:
            # Registered after pyarrow's own hook (made when S3 was initialised), so it runs before it.
            atexit.register(_finalize_s3)
            _exit_hook.append(True)


def _finalize_s3() -> None:
    """At exit: let in-flight puts finish, drop every S3 filesystem this process made, then shut the SDK down."""
    if _puts is not None and _puts[0] == os.getpid():
        _puts[1].shutdown(wait=True)
    for io in list(_holders):
        io._filesystem = None
    gc.collect()
    try:
        pafs.ensure_s3_finalized()
    except Exception as error:  # at exit nothing can be done but say so
        logger.debug("finalising pyarrow's S3 support at exit failed: %s", error)


__all__ = ["S3FileIO"]
