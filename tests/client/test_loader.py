"""The bulk loader (lakelog/jobs/load.py) in-process: interrupted and resumed loads (S2.4).

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
from lakelog.errors import OffsetMismatch
from lakelog.jobs.load import LOAD_HEADER, default_load_id, load
from lakelog.log import BatchHeader, PartitionLog, open_partition
from lakelog.log.records import HEADER_TYPE
from lakelog.log.retention import HIGH_WATERMARK, delete_records

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


def test_S9_4_a_loads_record_lives_in_its_rows_and_goes_with_them(lake, make_topic, source):
    """The dedupe record is the header of the load's last row, not a Delta txn id kept forever: a rerun appends
    nothing while the rows are there; once delete-records removed them, the partition holds nothing of the load,
    so the same load loads again (S9.4, S2.4, S8.3)."""
    topic = make_topic()
    first = load(lake, topic, source, batch_records=20, progress=False)
    log = open_partition(lake, topic, 0)
    load_id = default_load_id(source)
    assert log.table.app_version(f"lakelog.load.{load_id}.start") is None
    assert log.table.app_version(f"lakelog.load.{load_id}.rows") is None
    headers = log.fetch(0, max_records=100).rows.column("headers").to_pylist()
    records = {offset: json.loads(h[0]["value"]) for offset, h in enumerate(headers) if h}
    assert records == {
        19: {"load": load_id, "start": 0, "rows": 20},
        39: {"load": load_id, "start": 0, "rows": 40},
        49: {"load": load_id, "start": 0, "rows": 50},
    }
    assert all(h[0]["key"] == LOAD_HEADER for h in headers if h)
    before = table_fingerprint(f"{lake}/topics/{topic}")
    again = load(lake, topic, source, batch_records=20, progress=False)
    assert (again.start_offset, again.appended_by_this_run, again.resumed_from_row) == (first.start_offset, 0, 50)
    assert table_fingerprint(f"{lake}/topics/{topic}") == before

    assert delete_records(log, HIGH_WATERMARK) == 50
    reloaded = load(lake, topic, source, batch_records=20, progress=False)
    assert (reloaded.start_offset, reloaded.end_offset, reloaded.appended_by_this_run) == (50, 100, 50)
    rows = open_partition(lake, topic, 0).fetch(50, max_records=100).rows
    assert [json.loads(value) for value in rows.column("value").to_pylist()] == ROWS


def test_S9_4_a_load_begun_by_an_older_loader_resumes_from_its_txn_ids(lake, make_topic, source):
    """Tables written before the record moved into the rows kept it as txn ids: a load they began resumes from
    them, and from then on dedupes on its rows (S2.4)."""
    topic = make_topic()
    load_id = default_load_id(source)
    log = open_partition(lake, topic, 0)
    older = pa.table({"value": [json.dumps(row).encode() for row in ROWS[:21]]})
    log.append(
        older,
        BatchHeader(expected_offset=0),
        app_versions={f"lakelog.load.{load_id}.start": 0, f"lakelog.load.{load_id}.rows": 21},
    )
    result = load(lake, topic, source, batch_records=10, progress=False)
    assert (result.start_offset, result.resumed_from_row, result.appended_by_this_run) == (0, 21, 29)
    assert load(lake, topic, source, batch_records=10, progress=False).appended_by_this_run == 0
    assert loaded_rows(lake, topic) == ROWS


def test_S9_4_a_copied_load_header_is_not_a_record(lake, make_topic, source):
    """A load header that a producer copied onto another record (re-producing consumed records) is not where the
    record it names would be, so it neither stops nor resumes a load (S2.4)."""
    topic = make_topic()
    load_id = default_load_id(source)
    copied = json.dumps({"load": load_id, "start": 0, "rows": 50}).encode()
    log = open_partition(lake, topic, 0)
    headers = pa.array([[{"key": LOAD_HEADER, "value": copied}]], HEADER_TYPE)
    log.append(pa.table({"value": [b"copied"], "headers": headers}))
    result = load(lake, topic, source, batch_records=20, progress=False)
    assert (result.start_offset, result.appended_by_this_run) == (1, 50)
