"""`PinnedSnapshot`: one snapshot of a table carried whole, with no log to read (picklable, read-only)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from lakelog.errors import InvalidConfig
from lakelog.store.delta.data_file import DataFile
from lakelog.store.delta.snapshot import FileChange
from lakelog.store.delta.table import Table
from lakelog.store.io.location import Location

logger = logging.getLogger(__name__)

T = TypeVar("T")


class PinnedSnapshot(Table):
    """One snapshot of a table carried whole, with no log to read: picklable and read-only.

    A Spark driver pins a partition's snapshot and hands it to executors, which
    read exactly its files (files a later compaction removes stay readable for
    the table's `delete.retention.ms`). It never moves: `refresh` is a no-op,
    and `app_version` knows only the app ids it was pinned with.
    """

    def __init__(
        self,
        location: Location | str,
        *,
        version: int,
        table_id: str,
        files: tuple[DataFile, ...],
        app_versions: Mapping[str, int | None],
        schema: pa.Schema,
        configuration: Mapping[str, str],
    ) -> None:
        super().__init__(location, None)
        self._version = version
        self._table_id = table_id
        self._pinned_files = list(files)
        self._app_versions = dict(app_versions)
        self._schema = schema
        self._configuration = dict(configuration)
        self._derived: dict[object, Any] = {}

    @property
    def version(self) -> int:
        return self._version

    @property
    def table_id(self) -> str:
        return self._table_id

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self._configuration)

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def app_version(self, app_id: str) -> int | None:
        if app_id not in self._app_versions:
            raise KeyError(f"{app_id!r} was not pinned with the snapshot of {self.uri}")
        return self._app_versions[app_id]

    def derived(
        self, key: object, derive: Callable[[list[DataFile]], T], step: Callable[[T, FileChange], T | None] | None = None
    ) -> T:
        if key not in self._derived:
            self._derived[key] = derive(list(self._pinned_files))
        value: T = self._derived[key]
        return value

    def data_files(self) -> list[DataFile]:
        return sorted(self._pinned_files, key=lambda entry: entry.path)

    def history(self, limit: int) -> list[dict]:
        raise InvalidConfig(f"a pinned snapshot of {self.uri} has no history")

    def refresh(self) -> int:
        return self._version

    def append(self, data: pa.Table, **_: object) -> int:
        raise InvalidConfig(f"a pinned snapshot of {self.uri} is read-only")

    def commit_files(self, names: list[str], schema: pa.Schema, **_: object) -> int:
        raise InvalidConfig(f"a pinned snapshot of {self.uri} is read-only")

    def rewrite(self, removed: Sequence[DataFile] = (), added: Sequence[object] = (), **_: object) -> int:
        raise InvalidConfig(f"a pinned snapshot of {self.uri} is read-only")

    def __reduce__(self) -> tuple[Any, tuple[Location, dict[str, Any]]]:
        state = {
            "version": self._version,
            "table_id": self._table_id,
            "files": tuple(self._pinned_files),
            "app_versions": self._app_versions,
            "schema": self._schema,
            "configuration": self._configuration,
        }
        return (_pinned_snapshot, (self.location, state))


def pin(table: Table, app_ids: tuple[str, ...] = ()) -> PinnedSnapshot:
    """The table's current snapshot as a `PinnedSnapshot`: its files (by path), the `txn` versions of `app_ids`,
    schema and config."""
    return PinnedSnapshot(
        table.location,
        version=table.version,
        table_id=table.table_id,
        files=tuple(table.data_files()),
        app_versions={app_id: table.app_version(app_id) for app_id in app_ids},
        schema=table.schema,
        configuration=table.configuration,
    )


def _pinned_snapshot(location: Location, state: dict) -> PinnedSnapshot:
    return PinnedSnapshot(location, **state)


__all__ = ["PinnedSnapshot", "pin"]
