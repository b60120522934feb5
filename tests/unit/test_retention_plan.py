"""Which files retention removes (S9.1, S9.2): the pure decision, on file entries and a passed-in clock."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidConfig
from lakelog.log.partition_file import PartitionFile
from lakelog.log.retention import files_past_retention
from lakelog.log.topic_config import TopicConfig


def files(*sizes: int) -> list[PartitionFile]:
    """Consecutive files of 10 offsets each, with the given sizes; file i's newest record is at i * 1000 ms."""
    return [
        PartitionFile(path=f"f{i}", min_offset=i * 10, max_offset=i * 10 + 9, num_records=10, size_bytes=size)
        for i, size in enumerate(sizes)
    ]


def newest(entry: PartitionFile) -> int:
    return int(entry.path[1:]) * 1000


def plan(entries, *, now_ms=0, retention_ms=-1, retention_bytes=-1, last_stable_offset=None, asked=None):
    def timestamp(entry):
        if asked is not None:
            asked.append(entry.path)
        return newest(entry)

    lso = entries[-1].max_offset + 1 if last_stable_offset is None else last_stable_offset
    return files_past_retention(
        entries,
        timestamp,
        now_ms=now_ms,
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
        last_stable_offset=lso,
    )


@pytest.mark.parametrize(
    ("now_ms", "expected"),
    [(5000, 0), (5001, 1), (7001, 3), (10_000, 4), (100_000, 4)],
)
def test_s9_1_by_time_removes_files_whose_every_record_is_past_retention_ms(now_ms, expected):
    # A file goes when now - its newest timestamp > retention.ms, as Kafka's segments do.
    assert plan(files(1, 1, 1, 1), now_ms=now_ms, retention_ms=5000) == expected


def test_s9_1_by_time_stops_at_the_first_file_still_within_retention():
    asked: list[str] = []
    entries = files(1, 1, 1, 1)
    # File 1 is new (its newest record is recent), file 2 old: retention removes a prefix only.
    entries[1] = PartitionFile(path="f9", min_offset=10, max_offset=19, num_records=10, size_bytes=1)
    assert plan(entries, now_ms=6000, retention_ms=5000, asked=asked) == 1
    assert asked == ["f0", "f9"]  # no file after the first kept one is read


@pytest.mark.parametrize(
    ("retention_bytes", "expected"),
    [(-1, 0), (1000, 0), (999, 0), (900, 1), (899, 1), (700, 2), (400, 3), (399, 3), (0, 4)],
)
def test_s9_1_by_size_removes_oldest_files_while_the_rest_stay_at_or_above_retention_bytes(retention_bytes, expected):
    # 100 + 200 + 300 + 400 = 1000 bytes; Kafka drops a segment only if the log stays >= retention.bytes without it.
    assert plan(files(100, 200, 300, 400), retention_bytes=retention_bytes) == expected


def test_s9_1_time_and_size_together_remove_the_longer_prefix():
    entries = files(100, 200, 300, 400)
    assert plan(entries, now_ms=5500, retention_ms=5000, retention_bytes=700) == 2  # by size
    assert plan(entries, now_ms=7500, retention_ms=5000, retention_bytes=700) == 3  # by time


@pytest.mark.parametrize("last_stable_offset", [0, 5, 9, 10, 25, 40])
def test_s9_2_never_a_file_holding_rows_at_or_above_the_lso(last_stable_offset):
    entries = files(100, 100, 100, 100)
    removed = plan(entries, now_ms=10**9, retention_ms=0, retention_bytes=0, last_stable_offset=last_stable_offset)
    assert all(entry.max_offset < last_stable_offset for entry in entries[:removed])
    assert removed == sum(entry.max_offset < last_stable_offset for entry in entries)


def test_retention_configs_as_kafka_names_them():
    defaults = TopicConfig.load()
    assert (defaults.retention_ms, defaults.retention_bytes) == (604_800_000, -1)
    assert defaults.cleanup_policy == {"delete"} and defaults.deletes and not defaults.compacts
    assert defaults.values["file.delete.delay.ms"] == 60_000
    both = TopicConfig.load({"cleanup.policy": "delete, compact"})
    assert both.values["cleanup.policy"] == "delete,compact" and both.deletes and both.compacts  # Kafka's order: as given
    neither = TopicConfig.load({"cleanup.policy": ""})  # Kafka 4 takes the empty list
    assert neither.values["cleanup.policy"] == "" and not neither.deletes and not neither.compacts
    assert not TopicConfig.load({"cleanup.policy": "compact"}).deletes
    # Removed files stay readable for the larger of the two graces.
    grace = TopicConfig.load({"file.delete.delay.ms": 7_200_000, "delete.retention.ms": 0})
    assert grace.table_configuration()["delta.deletedFileRetentionDuration"] == "interval 7200 seconds"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", -2),
        ("retention.ms", "week"),
        ("retention.bytes", -5),
        ("cleanup.policy", "remove"),
        ("cleanup.policy", "delete,remove"),
        ("file.delete.delay.ms", -1),
    ],
)
def test_retention_configs_refused_on_load(key, value):
    with pytest.raises(InvalidConfig, match=key.replace(".", r"\.")):
        TopicConfig.load({key: value})
