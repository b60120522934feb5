"""A pyarrow filesystem over an ObjectFileIO, for the readers that take one (pyarrow datasets, `lakelog sql`):
its paths are `bucket/key`, and every request it makes is one of the FileIO's own (lakelog.store.io.object_store)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lakelog.store.io.fileio import FileStatus


class ObjectFileSystemHandler(pafs.FileSystemHandler):
    def __init__(self, io: Any) -> None:
        self.io = io

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectFileSystemHandler) and other.io == self.io

    def __ne__(self, other: object) -> bool:
        return not self == other

    def _uri(self, path: str) -> str:
        return f"{self.io.scheme}://{path.strip('/')}"

    def _info(self, path: str, found: FileStatus | None) -> pafs.FileInfo:
        if found is None:
            return pafs.FileInfo(path, pafs.FileType.NotFound)
        if found.is_dir:
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.File, size=found.size)

    def get_type_name(self) -> str:
        return f"lakelog-{self.io.scheme}"

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(path, self.io.info(self._uri(path))) for path in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        if not selector.allow_not_found and self.io.info(self._uri(base)) is None:
            raise FileNotFoundError(selector.base_dir)
        return [
            self._info(entry.uri.split("://", 1)[1], entry)
            for entry in self.io.list(self._uri(base), recursive=selector.recursive)
        ]

    def create_dir(self, path: str, recursive: bool) -> None:
        return None

    def delete_dir(self, path: str) -> None:
        self.io.delete_tree(self._uri(path))

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.io.delete_tree(self._uri(path))

    def delete_root_dir_contents(self) -> None:
        raise PermissionError("lakelog does not empty a whole bucket")

    def delete_file(self, path: str) -> None:
        if not self.io.delete(self._uri(path)):
            raise FileNotFoundError(path)

    def move(self, src: str, dest: str) -> None:
        self.io.move(self._uri(src), self._uri(dest))

    def copy_file(self, src: str, dest: str) -> None:
        self.io.write(self._uri(dest), self.io.read(self._uri(src)))

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self.io.read(self._uri(path)))

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self.io.read(self._uri(path)))

    def open_output_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        return pa.PythonFile(_Upload(self.io, self._uri(path)), mode="w")

    def open_append_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        raise OSError(f"{self._uri(path)}: object stores do not append")


class _Upload:
    """Bytes gathered, then written in one PUT when closed (an object appears whole or not at all)."""

    def __init__(self, io: Any, uri: str) -> None:
        self.io, self.uri = io, uri
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.io.write(self.uri, b"".join(self.parts))


__all__ = ["ObjectFileSystemHandler"]
