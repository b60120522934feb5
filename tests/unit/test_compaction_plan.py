"""The key-compaction planner on rows built in memory (S9.3, S3.5, S5.1): which rows a compacted topic keeps."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakelog.log.compaction import plan_keep
from lakelog.log.records import PARTITION_SCHEMA
from lakelog.log.transactions import AbortedTransaction

DAY_MS = 86_400_000
T0 = 1_700_000_000_000


def rows(*specs: dict) -> pa.Table:
    """Partition rows at offsets 0.. from dicts (key, value, pid, epoch, seq, txn, control, ts)."""
    columns = {name: [] for name in PARTITION_SCHEMA.names}
    for offset, spec in enumerate(specs):
        columns["offset"].append(offset)
        columns["timestamp"].append(spec.get("ts", T0) * 1000)
        columns["key"].append(spec.get("key"))
        columns["value"].append(spec.get("value", b"v"))
        columns["headers"].append(None)
        columns["producer_id"].append(spec.get("pid", -1))
        columns["producer_epoch"].append(spec.get("epoch", -1))
        columns["sequence"].append(spec.get("seq", -1))
        columns["is_transactional"].append(spec.get("txn", False))
        columns["control"].append(spec.get("control"))
    columns["timestamp"] = pa.array(columns["timestamp"], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return pa.table(
        {
            name: pa.array(values, type=field.type) if name != "timestamp" else values
            for (name, values), field in zip(columns.items(), PARTITION_SCHEMA, strict=False)
        },
        schema=PARTITION_SCHEMA,
    )


def kept(table: pa.Table, *, files=None, aborted=(), last_data=None, last_marker=None, now_ms=T0, retention_ms=DAY_MS):
    file_index = np.array(files if files is not None else range(table.num_rows), dtype=np.int64)
    mask = plan_keep(
        table, file_index, list(aborted), last_data or {}, last_marker or {}, now_ms=now_ms, delete_retention_ms=retention_ms
    )
    return [int(offset) for offset in np.flatnonzero(mask)]


def test_s9_3_keeps_the_last_record_per_key_and_every_unkeyed_row():
    table = rows({"key": b"a"}, {"key": b"b"}, {"key": b"a"}, {"key": None}, {"key": b"b"}, {"key": b"c"})
    assert kept(table) == [2, 3, 4, 5]


def test_s9_3_a_tombstone_stays_until_delete_retention_ms_then_goes_with_its_key():
    table = rows({"key": b"a"}, {"key": b"a", "value": None, "ts": T0}, {"key": b"b"})
    assert kept(table, now_ms=T0 + DAY_MS) == [1, 2]
    assert kept(table, now_ms=T0 + DAY_MS + 1) == [2]


def test_s9_3_aborted_rows_go_and_never_hide_the_committed_value_before_them():
    # pid 7: committed value of a at 0 (marker 1), then an aborted a at 2 (marker 3).
    table = rows(
        {"key": b"a", "pid": 7, "epoch": 0, "seq": 0, "txn": True},
        {"pid": 7, "epoch": 1, "txn": True, "control": "COMMIT", "value": None},
        {"key": b"a", "pid": 7, "epoch": 1, "seq": 0, "txn": True},
        {"pid": 7, "epoch": 2, "txn": True, "control": "ABORT", "value": None},
        {"key": b"z"},
    )
    aborted = [AbortedTransaction(7, 2, 3)]
    # The last batch and marker of pid 7 live further on in the log: no producer-state pin here.
    assert kept(table, aborted=aborted, last_data={7: 99}, last_marker={7: 98}) == [0, 1, 4]


def test_s3_5_a_producers_last_batch_stays_whole_and_its_last_marker_stays():
    # pid 5 writes a, b, a in one batch (one file) at 0-2; the a at 0 is superseded inside the batch.
    table = rows(
        {"key": b"a", "pid": 5, "epoch": 0, "seq": 0},
        {"key": b"b", "pid": 5, "epoch": 0, "seq": 1},
        {"key": b"a", "pid": 5, "epoch": 0, "seq": 2},
        {"key": b"b"},
    )
    assert kept(table, files=[0, 0, 0, 1], last_data={5: 2}) == [0, 1, 2, 3]
    # The same rows in separate files are separate batches: only the last one is pinned.
    assert kept(table, files=[0, 1, 2, 3], last_data={5: 2}) == [2, 3]


def test_s5_1_a_marker_stays_while_a_row_of_its_transaction_stays():
    table = rows(
        {"key": b"a", "pid": 3, "epoch": 0, "seq": 0, "txn": True},
        {"key": b"b", "pid": 3, "epoch": 0, "seq": 1, "txn": True},
        {"pid": 3, "epoch": 1, "txn": True, "control": "COMMIT", "value": None},
        {"key": b"a"},
        {"key": b"b"},
        {"key": b"c", "pid": 3, "epoch": 1, "seq": 0, "txn": True},
        {"pid": 3, "epoch": 2, "txn": True, "control": "COMMIT", "value": None},
    )
    # The first transaction's rows are superseded: its marker goes too; the second's stays.
    assert kept(table, last_data={3: 99}, last_marker={3: 98}) == [3, 4, 5, 6]
    # Had b not been written again, the first marker would stay with b.
    assert kept(table.slice(0, 4), last_data={3: 99}, last_marker={3: 98}) == [1, 2, 3]
