"""A value a layer above derives from a snapshot's files (`Snapshot.derived`): once per version, moved by its step."""

from __future__ import annotations

import json

from lakelog.log.partition_file import partition_files
from lakelog.store import DataFile, FileChange
from lakelog.store.delta.actions import add_action, metadata_action, remove_action
from lakelog.store.delta.snapshot import Snapshot, replay


def _add(name: str, first: int, last: int) -> dict:
    stats = json.dumps({"numRecords": last - first + 1, "minValues": {"offset": first}, "maxValues": {"offset": last}})
    return add_action(name, 10, 0, True, stats)


def _snapshot() -> Snapshot:
    return replay([(0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, metadata_action("t", "{}", {}, 0)])])


def test_a_derived_value_is_made_once_per_version_and_stepped_across_a_commit_as_it_is_applied() -> None:
    snapshot = _snapshot()
    made: list[int] = []
    steps: list[FileChange] = []

    def derive(files: list[DataFile]) -> list[str]:
        made.append(snapshot.version)
        return sorted(file.path for file in files)

    def step(value: list[str], change: FileChange) -> list[str] | None:
        steps.append(change)
        return None if change.removed else value + [file.path for file in change.added]

    assert snapshot.derived("paths", derive, step) == []
    assert snapshot.derived("paths", derive, step) == [] and made == [0]
    snapshot.apply([_add("b.parquet", 0, 0)], 1)
    assert snapshot.derived("paths", derive, step) == ["b.parquet"] and made == [0]
    assert [(change.version, [file.path for file in change.added], change.removed) for change in steps] == [
        (1, ["b.parquet"], False)
    ]
    snapshot.apply([remove_action("b.parquet", 0, True, 10), _add("a.parquet", 1, 1)], 2)
    assert snapshot.derived("paths", derive, step) == ["a.parquet"] and made == [0, 2]
    assert snapshot.copy().derived("paths", derive, step) == ["a.parquet"] and made == [0, 2, 2]


def test_the_logs_index_is_in_offset_order_carried_across_appends_and_made_again_after_any_other_commit() -> None:
    snapshot = _snapshot()
    assert partition_files(snapshot) == []
    snapshot.apply([_add("z.parquet", 0, 4)], 1)
    snapshot.apply([_add("a.parquet", 5, 9)], 2)
    carried = partition_files(snapshot)
    assert [(file.path, file.min_offset, file.max_offset) for file in carried] == [("z.parquet", 0, 4), ("a.parquet", 5, 9)]
    assert partition_files(snapshot) is carried
    snapshot.apply([remove_action("z.parquet", 0, True, 10)], 3)
    assert [file.path for file in partition_files(snapshot)] == ["a.parquet"]
