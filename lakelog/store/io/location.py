"""A root's URI bound to the FileIO of its scheme (pyiceberg's `load_file_io` is the model): one shared FileIO per
scheme and settings, so every table under a root reads and writes through the same one."""

from __future__ import annotations

import builtins
import os
import re
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidArgument, InvalidConfig
from lakelog.store.io.azure_store import AzureFileIO
from lakelog.store.io.cloud_settings import azure_settings, gcs_settings
from lakelog.store.io.fileio import AZURE, GCS, LOCAL, S3, SCHEMES, FileIO, FileStatus, LocalFileIO
from lakelog.store.io.gcs_store import GcsFileIO
from lakelog.store.io.s3_fileio import S3FileIO
from lakelog.store.io.s3_settings import s3_settings

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://(.*)$", re.DOTALL)
# Hadoop's ADLS Gen2 spelling: abfss://<container>@<account>.dfs.core.windows.net/<prefix> (or .blob.).
_ABFS_HOST = re.compile(r"^([^@/]+)@([a-z0-9]+)\.(?:dfs|blob)\.[^/]+$")
KNOWN = (
    "a local path, file:///path, s3://bucket/prefix, az://container/prefix (abfss://container@account...) or gs://bucket/prefix"
)

_file_ios: dict[tuple, FileIO] = {}
_file_ios_lock = threading.Lock()


def load_file_io(scheme: str, settings: Mapping[str, str] | None = None) -> FileIO:
    """The FileIO of `scheme` with these settings (one shared instance per distinct set)."""
    kind = {LOCAL: LocalFileIO, S3: S3FileIO, AZURE: AzureFileIO, GCS: GcsFileIO}[scheme]
    key = (scheme, tuple(sorted((settings or {}).items())))
    with _file_ios_lock:
        if key not in _file_ios:
            _file_ios[key] = kind(settings)
        return _file_ios[key]


@dataclass(frozen=True)
class Location:
    """A URI (a root, or a table or file under it) with the FileIO that serves it.

    `str(location)` is the URI: an absolute local path for local roots (delta-rs
    and pyarrow take those), `s3://bucket/prefix` for S3, `az://container/prefix` for Azure (an `abfss://` URI's
    account goes into the settings), `gs://bucket/prefix` for GCS. `location / "name"`
    is a child sharing the FileIO.
    """

    uri: str
    io: FileIO

    @classmethod
    def of(cls, value: Any, storage_options: Mapping[str, Any] | None = None, *, what: str = "lakelog.root") -> Location:
        """Parse a root or any URI: a Location is returned as it is; InvalidConfig for anything else unusable."""
        if isinstance(value, Location):
            return value
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str) or not value.strip():
            raise InvalidConfig(f"{what} must name a folder or a URI, not {value!r}", key=what)
        match = _SCHEME.match(value)
        if match is None:
            return cls(os.path.abspath(value), load_file_io(LOCAL))
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme not in SCHEMES:
            raise InvalidConfig(
                f"{what} {value} has the unknown scheme {scheme!r}; a root is {KNOWN}",
                key=what,
            )
        if SCHEMES[scheme] == LOCAL:
            parsed = urllib.parse.urlsplit(value)
            if parsed.netloc not in ("", "localhost"):
                raise InvalidConfig(
                    f"{what} {value} names host {parsed.netloc!r}; file:// URIs are local: file:///path", key=what
                )
            return cls(os.path.abspath(urllib.parse.unquote(parsed.path)), load_file_io(LOCAL))
        kind = SCHEMES[scheme]
        bucket, _, prefix = rest.partition("/")
        account = None
        if kind == AZURE and "@" in bucket:
            host = _ABFS_HOST.match(bucket)
            if host is None:
                raise InvalidConfig(
                    f"{what} {value}: write abfss://container@account.dfs.core.windows.net/prefix or az://container/prefix",
                    key=what,
                )
            bucket, account = host.group(1), host.group(2)
        if not bucket:
            raise InvalidConfig(f"{what} {value} names no bucket: write {kind}://bucket/prefix", key=what)
        uri = f"{kind}://{bucket}/{prefix.strip('/')}".rstrip("/")
        if kind == AZURE:
            return cls(uri, load_file_io(AZURE, azure_settings(storage_options, account)))
        if kind == GCS:
            return cls(uri, load_file_io(GCS, gcs_settings(storage_options)))
        return cls(uri, load_file_io(S3, s3_settings(storage_options)))

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:
        if self.io.scheme != LOCAL:
            raise TypeError(f"{self.uri} is not a local path")
        return self.uri

    def __truediv__(self, name: str) -> Location:
        return self.child(name)

    def child(self, *names: str) -> Location:
        """The location `names` under this one; each may hold several `/`-separated segments (`"a/b"`), but an
        empty, `.` or `..` segment is InvalidArgument: no name reaches outside the folder it is joined to."""
        uri = self.uri.rstrip("/")
        for name in names:
            segments = str(name).strip("/").split("/")
            if any(segment in ("", ".", "..") for segment in segments):
                raise InvalidArgument(f"{name!r} is not a name under {self.uri}: it has an empty, '.' or '..' segment")
            uri = f"{uri}/{'/'.join(segments)}"
        return Location(uri, self.io)

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def scheme(self) -> str:
        return self.io.scheme

    @property
    def is_local(self) -> bool:
        return self.io.scheme == LOCAL

    @property
    def bucket(self) -> str | None:
        return self.uri.split("://", 1)[1].split("/", 1)[0] if self.io.scheme != LOCAL else None

    # Shorthands for this location's own bytes.
    def exists(self) -> bool:
        return self.io.exists(self.uri)

    def is_dir(self) -> bool:
        return self.io.is_dir(self.uri)

    def list(self, *, recursive: bool = False) -> builtins.list[FileStatus]:
        return self.io.list(self.uri, recursive=recursive)

    def children(self) -> Iterator[Location]:
        """Sub-folders, by name order."""
        for entry in self.list():
            if entry.is_dir:
                yield Location(entry.uri, self.io)


__all__ = ["Location", "load_file_io"]
