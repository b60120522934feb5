"""The FileIO of object stores reached through their own client library (Azure Blob Storage, Google Cloud Storage).

An object store has buckets (Azure: containers) of objects named by keys, and five requests lakelog needs:
a GET (whole or a range), a HEAD, a PUT (plain, or the conditional create a commit is), a LIST under a prefix
and a DELETE. Each store says how it makes them (`ObjectClient`: lakelog.store.io.azure_store,
lakelog.store.io.gcs_store), mapping every fault to the same typed errors (FileNotFoundError for an absent
object; AccessDenied, ConditionalWriteConflict or KafkaStorageError, lakelog.store.io.faults); this module makes
the FileIO of them: folders are key prefixes, a listing's folders are made from the keys, a move is a copy then a
delete, and pyarrow reads and writes through the same requests (lakelog.store.io.object_fs), so no byte of such a
root goes another way.
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakelog.store.io.fileio import FileIO, FileStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ObjectInfo:
    """One object: its key, size and modification time (seconds, or None)."""

    key: str
    size: int
    mtime: float | None


class ObjectClient:
    """The requests of one object store, made with its client library; every fault a typed error (see above)."""

    def get(self, bucket: str, key: str, uri: str, start: int | None = None, length: int | None = None) -> bytes:
        """The object's bytes (from `start`, `length` of them); FileNotFoundError if absent."""
        raise NotImplementedError

    def head(self, bucket: str, key: str, uri: str) -> ObjectInfo | None:
        """The object, or None if absent."""
        raise NotImplementedError

    def put(self, bucket: str, key: str, data: bytes, uri: str, *, if_absent: bool) -> bool:
        """Write the object whole; `if_absent`: the store's conditional create, False if the key is taken.

        A lost answer the client library retried may come back False although this call's object landed:
        callers read the object to tell (S12.3), as on S3.
        """
        raise NotImplementedError

    def list(
        self, bucket: str, prefix: str, uri: str, *, recursive: bool
    ) -> tuple[builtins.list[ObjectInfo], builtins.list[str]]:
        """The objects under `prefix` (all, or with `recursive` False those directly under it) and, not recursive,
        the prefixes of the folders directly under it (each ending in `/`)."""
        raise NotImplementedError

    def delete(self, bucket: str, key: str, uri: str) -> bool:
        """Delete the object: False if it was not there."""
        raise NotImplementedError

    def endpoint(self) -> str:
        """Where the requests go, for messages."""
        raise NotImplementedError


class ObjectFileIO(FileIO):
    """Bytes under `<scheme>://bucket/key` URIs of one object store, through its `ObjectClient`."""

    def _make_client(self) -> ObjectClient:
        raise NotImplementedError

    def client(self) -> ObjectClient:
        """The store's client for this process (a forked child makes its own)."""
        found = self.__dict__.get("_object_client")
        if found is None or found[0] != os.getpid():
            with self.__dict__.setdefault("_client_lock", threading.Lock()):
                found = self.__dict__.get("_object_client")
                if found is None or found[0] != os.getpid():
                    found = self.__dict__["_object_client"] = (os.getpid(), self._make_client())
        return found[1]

    def endpoint(self) -> str:
        return self.client().endpoint()

    def path(self, uri: str) -> str:
        return uri.split("://", 1)[1]

    def _uri(self, bucket: str, key: str) -> str:
        return f"{self.scheme}://{bucket}/{key}".rstrip("/")

    def _bucket_key(self, uri: str) -> tuple[str, str]:
        bucket, _, key = self.path(uri).partition("/")
        return bucket, key.strip("/")

    def _make_filesystem(self) -> pafs.FileSystem:
        from lakelog.store.io.object_fs import ObjectFileSystemHandler

        return pafs.PyFileSystem(ObjectFileSystemHandler(self))

    # -- bytes -------------------------------------------------------------------

    def read(self, uri: str) -> bytes:
        """One GET; FileNotFoundError if absent."""
        bucket, key = self._bucket_key(uri)
        return self.client().get(bucket, key, uri)

    def read_range(self, uri: str, start: int, length: int) -> bytes:
        bucket, key = self._bucket_key(uri)
        return self.client().get(bucket, key, uri, start, length)

    def open_input(self, uri: str) -> pa.NativeFile:
        return pa.BufferReader(self.read(uri))

    def write(self, uri: str, data: bytes | pa.Buffer) -> None:
        """One PUT: the store makes the object visible whole or not at all."""
        bucket, key = self._bucket_key(uri)
        self.client().put(bucket, key, bytes(data), uri, if_absent=False)

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """The store's conditional create (Azure: If-None-Match: *; GCS: ifGenerationMatch=0)."""
        bucket, key = self._bucket_key(uri)
        return self.client().put(bucket, key, bytes(data), uri, if_absent=True)

    def file_exists(self, uri: str) -> bool:
        bucket, key = self._bucket_key(uri)
        return bool(key) and self.client().head(bucket, key, uri) is not None

    def info(self, uri: str) -> FileStatus | None:
        bucket, key = self._bucket_key(uri)
        name = key.rsplit("/", 1)[-1] if key else bucket
        if key:
            found = self.client().head(bucket, key, uri)
            if found is not None:
                return FileStatus(uri.rstrip("/"), name, False, found.size, found.mtime)
        objects, prefixes = self.client().list(bucket, f"{key}/" if key else "", uri, recursive=False)
        if not key or objects or prefixes:
            return FileStatus(uri.rstrip("/"), name, True, 0, None)
        return None

    def list(self, uri: str, *, recursive: bool = False) -> builtins.list[FileStatus]:
        """Entries under the folder `uri` (none if it is absent), sorted by URI; folders are made from the keys."""
        bucket, key = self._bucket_key(uri)
        prefix = f"{key}/" if key else ""
        objects, prefixes = self.client().list(bucket, prefix, uri, recursive=recursive)
        entries: dict[str, FileStatus] = {}
        for found in objects:
            if found.key.endswith("/"):
                continue  # a folder marker another tool left
            entries[found.key] = FileStatus(
                self._uri(bucket, found.key), found.key.rsplit("/", 1)[-1], False, found.size, found.mtime
            )
            if recursive:
                parts = found.key[len(prefix) :].split("/")[:-1]
                for depth in range(1, len(parts) + 1):
                    folder = prefix + "/".join(parts[:depth])
                    entries.setdefault(folder, FileStatus(self._uri(bucket, folder), parts[depth - 1], True, 0, None))
        for folder in prefixes:
            folder = folder.rstrip("/")
            entries.setdefault(folder, FileStatus(self._uri(bucket, folder), folder.rsplit("/", 1)[-1], True, 0, None))
        return sorted(entries.values(), key=lambda entry: entry.uri)

    def delete(self, uri: str) -> bool:
        bucket, key = self._bucket_key(uri)
        return self.client().delete(bucket, key, uri)

    def delete_tree(self, uri: str) -> None:
        """Delete every object under the folder `uri`: one LIST, then one DELETE each."""
        bucket, key = self._bucket_key(uri)
        objects, _ = self.client().list(bucket, f"{key}/" if key else "", uri, recursive=True)
        for found in objects:
            self.client().delete(bucket, found.key, self._uri(bucket, found.key))
        if objects:
            logger.info("deleted %d objects under %s", len(objects), uri)

    def make_dirs(self, uri: str) -> None:
        return None  # object stores have no folders

    def move(self, source: str, target: str) -> None:
        """A copy, then a delete (object stores rename nothing)."""
        self.write(target, self.read(source))
        self.delete(source)

    # -- Parquet -------------------------------------------------------------------

    def _parquet_source(self, uri: str, whole: bool) -> Any:
        # One GET of the whole file: the footer and then the column chunks would be a request each.
        return pa.BufferReader(self.read(uri))

    def parquet_metadata(self, uri: str) -> pq.FileMetaData:
        with self._errors("reading", uri):
            return pq.read_metadata(pa.BufferReader(self.read(uri)))


__all__ = ["ObjectClient", "ObjectFileIO", "ObjectInfo"]
