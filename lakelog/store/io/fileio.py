"""File IO by URI scheme: every byte under a root is read, written, listed and deleted here (S12.1).

A root is a URI: a local path, `file:///...`, or `s3://bucket/prefix` on any
S3-compatible store. `Location.of(root, storage_options)` parses it once and
binds the `FileIO` of its scheme (pyiceberg's `load_file_io` is the model);
everything below it (partition tables, internal logs, sidecar caches, views,
status tables, staging folders) is a child `Location` sharing that FileIO, so
the same connection settings reach delta-rs (`FileIO.delta_options`) and
pyarrow (`FileIO.filesystem`).

S3 settings come from the `AWS_*` environment variables that delta-rs and
pyarrow read (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`), overridden by
explicit options (`lakelog.storage.<key>` in client configs, `--storage-option`
on the CLI, `storage.<key>` in Spark); keys are listed in `S3_KEYS`.
"""

from __future__ import annotations

import builtins
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakelog.errors import KafkaStorageError
from lakelog.store.io import local_put, local_sync
from lakelog.store.io.s3_settings import S3_KEYS, SECRET_KEYS, parse_duration_s, s3_settings, storage_key

logger = logging.getLogger(__name__)

LOCAL = "file"
S3 = "s3"
AZURE = "az"
GCS = "gs"
# URI schemes a root may have, and what each one is read as (Azure: Delta's `az://` and Hadoop's `abfs(s)://`).
SCHEMES = {"file": LOCAL, "s3": S3, "s3a": S3, "az": AZURE, "abfs": AZURE, "abfss": AZURE, "gs": GCS}


# The decoded bytes of one row group of a data file: what a fetch of an offset range decodes at least.
ROW_GROUP_BYTES = 1 << 20


@dataclass(frozen=True)
class FileStatus:
    """One entry of a listing: its URI, base name, kind, size and modification time (seconds, or None)."""

    uri: str
    name: str
    is_dir: bool
    size: int
    mtime: float | None


class FileIO:
    """Bytes under URIs of one scheme. Picklable: a copy rebuilds its filesystem where it is unpickled."""

    scheme: str = LOCAL

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.settings: dict[str, str] = dict(settings or {})
        self._filesystem: pafs.FileSystem | None = None
        self._lock = threading.Lock()

    # -- identity --------------------------------------------------------------

    def _key(self) -> tuple:
        return (self.scheme, tuple(sorted(self.settings.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FileIO) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        FileIO.__init__(self, state["settings"])

    def __repr__(self) -> str:
        shown = {key: ("***" if key in SECRET_KEYS else value) for key, value in self.settings.items()}
        return f"{type(self).__name__}({shown})"

    # -- what the engines need -------------------------------------------------

    def endpoint(self) -> str:
        """Where this FileIO's requests go, for messages."""
        return "this machine"

    def delta_options(self) -> dict[str, str] | None:
        """Storage options for delta-rs (None: its defaults)."""
        return None

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem that reads and writes this scheme's paths (built once, lazily)."""
        if self._filesystem is None:
            with self._lock:
                if self._filesystem is None:
                    self._filesystem = self._make_filesystem()
        return self._filesystem

    def _make_filesystem(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()

    def path(self, uri: str) -> str:
        """The filesystem path of `uri`."""
        return uri

    # -- bytes -------------------------------------------------------------------

    def read(self, uri: str) -> bytes:
        """The whole object; FileNotFoundError if absent."""
        with self._errors("reading", uri):
            with self.filesystem.open_input_stream(self.path(uri)) as stream:
                return stream.read()

    def open_input(self, uri: str) -> pa.NativeFile:
        """A random-access file (for Parquet footers); FileNotFoundError if absent."""
        with self._errors("opening", uri):
            return self.filesystem.open_input_file(self.path(uri))

    def write(self, uri: str, data: bytes | pa.Buffer) -> None:
        """Write the object whole; readers see the old one or the new one, never a part."""
        with self._errors("writing", uri):
            with self.filesystem.open_output_stream(self.path(uri)) as stream:
                stream.write(data)

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """Create the file `uri` whole with `data` unless it exists: True if this call created it.

        The store's mutual exclusion, on which a Delta commit rests: of two calls
        for one URI at most one returns True, and a reader sees the complete file
        or none. A failure whose outcome is unknown raises KafkaStorageError.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot create {uri} put-if-absent")

    def file_exists(self, uri: str) -> bool:
        """Whether the file `uri` exists (one HEAD on an object store)."""
        found = self.info(uri)
        return found is not None and not found.is_dir

    def info(self, uri: str) -> FileStatus | None:
        """The entry at `uri`, or None if there is none."""
        with self._errors("looking up", uri):
            found = self.filesystem.get_file_info(self.path(uri))
        if found.type == pafs.FileType.NotFound:
            return None
        return self._status(uri, found)

    def exists(self, uri: str) -> bool:
        return self.info(uri) is not None

    def is_dir(self, uri: str) -> bool:
        found = self.info(uri)
        return found is not None and found.is_dir

    def list(self, uri: str, *, recursive: bool = False) -> builtins.list[FileStatus]:
        """Entries under the folder `uri` (none if it is absent), sorted by URI."""
        selector = pafs.FileSelector(self.path(uri), recursive=recursive, allow_not_found=True)
        with self._errors("listing", uri):
            found = self.filesystem.get_file_info(selector)
        base = uri.rstrip("/")
        prefix = self.path(uri).rstrip("/")
        entries = [self._status(base + entry.path[len(prefix) :], entry) for entry in found]
        return sorted(entries, key=lambda entry: entry.uri)

    def glob(self, pattern: str) -> builtins.list[str]:
        """The files whose URIs match `pattern`, sorted: `*`, `?` and `[...]` within a name, `**` across folders.

        A pattern without wildcards names one file: it is returned if it is a file.
        """
        if not _GLOB_CHARS.search(pattern):
            found = self.info(pattern)
            return [pattern] if found is not None and not found.is_dir else []
        parts = pattern.split("/")
        fixed = next(index for index, part in enumerate(parts) if _GLOB_CHARS.search(part))
        base = "/".join(parts[:fixed]) or "/"
        matcher = re.compile(_glob_regex(pattern))
        recursive = fixed < len(parts) - 1 or "**" in pattern
        return [entry.uri for entry in self.list(base, recursive=recursive) if not entry.is_dir and matcher.fullmatch(entry.uri)]

    def delete(self, uri: str) -> bool:
        """Delete one file; False if it was not there."""
        try:
            with self._errors("deleting", uri):
                self.filesystem.delete_file(self.path(uri))
            return True
        except FileNotFoundError:
            return False

    def discard(self, uri: str) -> None:
        """Delete one file if it is there, without telling whether it was (a scratch file of this process)."""
        self.delete(uri)

    def delete_tree(self, uri: str) -> None:
        """Delete a folder and everything under it; nothing if it is absent."""
        with self._errors("deleting", uri):
            if self.filesystem.get_file_info(self.path(uri)).type != pafs.FileType.NotFound:
                self.filesystem.delete_dir(self.path(uri))

    def make_dirs(self, uri: str) -> None:
        """Create a folder and its parents (object stores have no folders: nothing to do)."""
        with self._errors("creating", uri):
            self.filesystem.create_dir(self.path(uri), recursive=True)

    def move(self, source: str, target: str) -> None:
        """Rename one file (on object stores: copy, then delete)."""
        with self._errors("moving", source):
            self.filesystem.move(self.path(source), self.path(target))

    # -- Parquet -------------------------------------------------------------------

    def write_parquet(self, table: pa.Table, uri: str, *, compression: str = "snappy", fresh: bool = False) -> int:
        """Write `table` as one Parquet file in one put (readers see the old file or the new one); returns its size.

        `fresh=True`: `uri` is a new name no reader knows yet (a data file before its
        commit), so a local root may write it in place, without a temporary name.
        """
        data = self._parquet_bytes(table, compression)
        self.write(uri, data)
        return data.size

    @staticmethod
    def _parquet_bytes(table: pa.Table, compression: str) -> pa.Buffer:
        """`table` encoded as one Parquet file, every page with its CRC32 so a reader can tell damage from data.

        Row groups hold up to ROW_GROUP_BYTES of decoded rows each, so a reader of an offset range (a fetch)
        decodes a row group, not the whole file.
        """
        size = table.get_total_buffer_size()
        if size > ROW_GROUP_BYTES:
            size = table.nbytes  # a slice's buffers are larger than its rows: only then worth the count
        group_rows = max(1, table.num_rows * ROW_GROUP_BYTES // size) if size > ROW_GROUP_BYTES else None
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression=compression, write_page_checksum=True, row_group_size=group_rows)
        return sink.getvalue()

    def read_parquet(
        self,
        uri: str,
        columns: builtins.list[str] | None = None,
        filters: Any = None,
        *,
        footer: Callable[[pq.FileMetaData], None] | None = None,
        row_groups: Sequence[int] | None = None,
        metadata: pq.FileMetaData | None = None,
    ) -> pa.Table:
        """A Parquet file's rows (with `filters`, only those that pass); FileNotFoundError if absent.

        Every page's checksum is verified as it is read: a damaged page is CorruptPage (an ArrowException),
        never its bytes. `footer(metadata)` is called before any row is read (to check the file is the one
        expected); `row_groups` reads only those row groups; `metadata` is the file's footer if read already.
        """
        with self._errors("reading", uri):
            with self._parquet_source(uri, columns is None and filters is None and row_groups is None) as source:
                with _page_errors(uri), pq.ParquetFile(source, metadata=metadata, page_checksum_verification=True) as parquet:
                    if footer is not None:
                        footer(parquet.metadata)
                    if row_groups is not None:
                        rows = parquet.read_row_groups(row_groups, columns=columns)
                        return rows if filters is None else rows.filter(filters)
                    if filters is None:
                        return parquet.read(columns=columns)
                    return pq.read_table(source, columns=columns, filters=filters, page_checksum_verification=True)

    def _parquet_source(self, uri: str, whole: bool) -> pa.NativeFile:
        """The file to decode `uri` from; `whole`: every byte of it will be read."""
        return self.filesystem.open_input_file(self.path(uri))

    def parquet_metadata(self, uri: str) -> pq.FileMetaData:
        with self._errors("reading", uri):
            with self.filesystem.open_input_file(self.path(uri)) as source:
                return pq.read_metadata(source)

    # -- helpers -------------------------------------------------------------------

    def _status(self, uri: str, found: pafs.FileInfo) -> FileStatus:
        mtime = found.mtime.timestamp() if found.mtime is not None else None
        is_dir = found.type == pafs.FileType.Directory
        return FileStatus(uri.rstrip("/"), found.base_name, is_dir, found.size or 0, mtime)

    def _errors(self, doing: str, uri: str) -> _StorageErrors:
        return _StorageErrors(doing, uri)


class _StorageErrors:
    """Turns a storage failure into KafkaStorageError naming what was done to which URI; absent stays FileNotFoundError."""

    def __init__(self, doing: str, uri: str) -> None:
        self.doing = doing
        self.uri = uri

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        """Never swallows: an OSError leaves as KafkaStorageError, anything else (absent files too) as it is."""
        if error is None or isinstance(error, (FileNotFoundError, KafkaStorageError)):
            return None
        # Only failures to reach the bytes; a decoding error (ArrowInvalid) is the caller's to name.
        if isinstance(error, OSError):
            raise KafkaStorageError(f"{self.doing} {self.uri} failed: {one_line(error)}", uri=self.uri) from error
        return None


class CorruptPage(pa.ArrowInvalid):
    """A Parquet page whose bytes fail their checksum: damage, not a store that is down (a decoding error)."""


@contextmanager
def _page_errors(uri: str) -> Iterator[None]:
    # pyarrow reports a failed page checksum as an IOError, which would read as a store that is down; a damaged
    # name in the footer fails as it is decoded to text.
    try:
        yield
    except UnicodeDecodeError as error:
        raise CorruptPage(f"{uri}: a name in its footer is not UTF-8 ({error.reason})") from error
    except OSError as error:
        if "checksum" not in str(error).lower() and "page integrity" not in str(error).lower():
            raise
        raise CorruptPage(f"{uri}: {one_line(error)}") from error


class LocalFileIO(FileIO):
    """A folder on this machine's disk. Writes go to a temporary name first, then are renamed.

    Every write, put and folder made here is durable when the call returns (lakelog.store.io.local_sync): the
    file's bytes are synced before its name is made, and the folder that holds the name after.
    """

    scheme = LOCAL

    def write(self, uri: str, data: bytes | pa.Buffer) -> None:
        folder = os.path.dirname(uri) or "."
        temporary = f"{uri}.tmp-{uuid.uuid4().hex}"
        try:
            with self._errors("writing", uri):
                _write_synced(temporary, "wb", data)
                os.replace(temporary, uri)
                local_sync.sync_folder(folder)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """The file appears whole under `uri`, or not at all if `uri` exists (lakelog.store.io.local_put)."""
        with self._errors("writing", uri):
            return local_put.put_if_absent(uri, data)

    def file_exists(self, uri: str) -> bool:
        return os.path.isfile(uri)

    def make_dirs(self, uri: str) -> None:
        """Create a folder and its parents, each one's name durable when this returns."""
        with self._errors("creating", uri):
            local_sync.make_dirs(uri)

    def delete(self, uri: str) -> bool:
        try:
            with self._errors("deleting", uri):
                os.remove(uri)
            return True
        except FileNotFoundError:
            return False

    def delete_tree(self, uri: str) -> None:
        """As `FileIO.delete_tree`, and the folder's removal durable: a deleted topic does not come back."""
        with self._errors("deleting", uri):
            try:
                shutil.rmtree(uri)
            except FileNotFoundError:
                return
            local_sync.sync_folder(os.path.dirname(uri.rstrip("/")) or ".")

    def write_parquet(self, table: pa.Table, uri: str, *, compression: str = "snappy", fresh: bool = False) -> int:
        """As `FileIO.write_parquet`; a `fresh` file is written in place (no temporary name and rename).

        A fresh name is one no commit references yet, so no reader can see the file
        half-written; a writer that dies mid-write leaves an orphan vacuum removes.
        A fresh name that exists already is refused (FileExistsError).
        """
        if not fresh:
            return super().write_parquet(table, uri, compression=compression)
        data = self._parquet_bytes(table, compression)
        folder = os.path.dirname(uri) or "."
        with self._errors("writing", uri):
            _write_synced(uri, "xb", data)
            # Before the commit that names the file is made: a commit never outlives its data file's name.
            local_sync.sync_folder(folder)
        return data.size


def _write_synced(path: str, mode: str, data: bytes | pa.Buffer) -> None:
    """Write `data` to `path` opened with `mode` (its folders made durably if missing), its bytes synced on return."""
    try:
        out = open(path, mode)  # noqa: SIM115 - closed below
    except FileNotFoundError:
        local_sync.make_dirs(os.path.dirname(path) or ".")
        out = open(path, mode)  # noqa: SIM115
    with out:
        out.write(data)
        out.flush()
        local_sync.sync_data(out.fileno())


_GLOB_CHARS = re.compile(r"[*?\[]")


def _glob_regex(pattern: str) -> str:
    """A glob as a regular expression over whole URIs: `*` and `?` stop at `/`, `**/` spans folders."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in pattern[index + 2 :]:
            end = pattern.index("]", index + 2)
            body = pattern[index + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def one_line(error: BaseException) -> str:
    """An engine's error message on one line, without ANSI colours or the arrows delta-rs nests causes with."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    parts = [part.strip(" ↳-") for part in text.splitlines() if part.strip(" ↳-")]
    return " / ".join(parts) if parts else type(error).__name__


__all__ = [
    "FileIO",
    "FileStatus",
    "LocalFileIO",
    "SECRET_KEYS",
    "S3_KEYS",
    "one_line",
    "parse_duration_s",
    "s3_settings",
    "storage_key",
]
