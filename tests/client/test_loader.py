"""The bulk loader (lakelog/client/loader.py) in-process: interrupted and resumed loads (S2.4).

A crash is simulated by making the k-th append raise after the earlier appends were
really committed to Delta; the next run must carry on exactly where the table says.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import table_fingerprint

from lakelog import Producer
from lakelog.client.loader import load
from lakelog.errors import OffsetMismatch
from lakelog.log import PartitionLog, open_partition

ROWS = [{"id": i, "name": f"n{i}"} for i in range(50)]


class Crash(Exception):
    """Stands for the process dying between two appends."""


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    return path


def crash_on_append(monkeypatch, number: int) -> None:
    """The `number`-th PartitionLog.append (1-based) raises Crash instead of appending."""
    calls = {"n": 0}
    original = PartitionLog.append

    def append(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == number:
            raise Crash(f"append #{number}")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PartitionLog, "append", append)


def loaded_rows(root: str, topic: str) -> list:
    log = open_partition(root, topic, 0)
    rows = log.fetch(0, max_records=10_000).rows.to_pylist() if log.log_end_offset() else []
    assert [row["offset"] for row in rows] == list(range(len(rows)))
    return [json.loads(row["value"]) if row["value"].startswith(b"{") else row["value"] for row in rows]


def test_S2_4_a_load_cut_short_resumes_from_the_table_and_appends_each_row_once(lake, make_topic, source, monkeypatch):
    topic = make_topic(config={"check.expected.offsets": True})
    with monkeypatch.context() as patch:
        crash_on_append(patch, 4)
        with pytest.raises(Crash):
            load(lake, topic, source, batch_records=7, progress=False)
    assert loaded_rows(lake, topic) == ROWS[:21]  # three whole batches, nothing of the fourth

    result = load(lake, topic, source, batch_records=5, progress=False)  # a new batch size is fine
    assert (result.start_offset, result.end_offset, result.total_rows) == (0, 50, 50)
    assert (result.resumed_from_row, result.appended_by_this_run) == (21, 29)
    assert loaded_rows(lake, topic) == ROWS


def test_S2_4_a_foreign_write_stops_a_resumed_load_without_writing(lake, make_topic, source, monkeypatch):
    """Only a foreign writer stops a load; it is refused with OffsetMismatch and the table is unchanged (S8.3)."""
    topic = make_topic()
    with monkeypatch.context() as patch:
        crash_on_append(patch, 3)
        with pytest.raises(Crash):
            load(lake, topic, source, batch_records=10, progress=False)
    producer = Producer({"lakelog.root": lake})
    producer.produce(topic, b"foreign")
    producer.flush()
    before = table_fingerprint(f"{lake}/topics/{topic}")
    with pytest.raises(OffsetMismatch) as raised:
        load(lake, topic, source, batch_records=10, progress=False)
    assert (raised.value.expected_offset, raised.value.log_end_offset) == (20, 21)
    assert table_fingerprint(f"{lake}/topics/{topic}") == before
    assert loaded_rows(lake, topic) == [*ROWS[:20], b"foreign"]


def test_S2_4_a_load_after_other_data_starts_at_the_log_end_offset_and_keeps_it(lake, make_topic, source, monkeypatch):
    topic = make_topic()
    producer = Producer({"lakelog.root": lake})
    producer.produce(topic, b"earlier")
    producer.flush()
    with monkeypatch.context() as patch:
        crash_on_append(patch, 2)
        with pytest.raises(Crash):
            load(lake, topic, source, batch_records=20, progress=False)
    result = load(lake, topic, source, batch_records=20, progress=False)
    assert (result.start_offset, result.end_offset, result.resumed_from_row) == (1, 51, 20)
    assert loaded_rows(lake, topic) == [b"earlier", *ROWS]


def test_S2_4_a_restart_after_the_source_is_touched_still_appends_each_row_once(lake, make_topic, source, monkeypatch):
    topic = make_topic()
    with monkeypatch.context() as patch:
        crash_on_append(patch, 3)
        with pytest.raises(Crash):
            load(lake, topic, source, batch_records=10, progress=False)
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))  # same bytes, newer mtime
    load(lake, topic, source, batch_records=10, progress=False)
    assert loaded_rows(lake, topic) == ROWS
