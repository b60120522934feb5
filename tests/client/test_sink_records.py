"""The batch writer's and unit loader's dedupe records are rows of `__sink_batches` (lakelog/jobs/sink_records.py).

A record lives as long as the rows it protects (S9.4): no `txn` id is written,
a swept record lets its unit load again once delete-records removed its rows,
an older table's `txn` ids still skip a batch, and a skipped batch writes
nothing at all, not even an epoch bump, even while a later batch is open (S8.3).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import table_fingerprint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog.errors import ConcurrentTransactions, KafkaStorageError
from lakelog.jobs import sink_records
from lakelog.jobs.batch_writer import NO_PRODUCER_ID, TransactionalBatchWriter
from lakelog.jobs.sink_records import (
    OLD_APP_PREFIX,
    SINK_BATCHES_LOG,
    open_batches_log,
    read_records,
    sweep_sink_records,
)
from lakelog.jobs.unit_load import load_unit, unit_transactional_id
from lakelog.log import BatchHeader, open_partition, payload_table
from lakelog.log.retention import delete_records
from lakelog.store import Location


def rows(*values: bytes):
    return [payload_table(list(values))]


def commit_log_text(root: str) -> str:
    """Every commit file of every `__sink_batches` partition, as text."""
    folder = Location.of(root) / SINK_BATCHES_LOG
    return "".join(
        folder.io.read(entry.uri).decode()
        for entry in folder.list(recursive=True)
        if not entry.is_dir and "/_delta_log/" in entry.uri and entry.uri.endswith(".json")
    )


def swept(root: str, now_ms: int = 0) -> list[str]:
    """One pass of the sweep step; the transactional ids whose records it tombstoned."""
    return [tid for entry in sweep_sink_records(root, now_ms) for tid in entry.transactional_ids]


def leave_open(writer: TransactionalBatchWriter, batch, batch_id: int) -> None:
    """Write `batch_id` and lose the end of its transaction, as a writer that died before its commit."""

    def unreachable(*_args, **_kwargs):
        raise KafkaStorageError("the coordinator cannot be reached")

    writer._coordinator.end_transaction = unreachable
    with pytest.raises(KafkaStorageError):
        writer.write(batch, batch_id)


def test_S9_4_no_txn_id_is_written_and_the_record_is_a_row(root, make_topic):
    topic = make_topic(partitions=2)
    writer = TransactionalBatchWriter(root, "job")
    writer.write({(topic, 0): rows(b"a"), (topic, 1): rows(b"b")}, 0, note={"day": 1})
    writer.write({(topic, 1): rows(b"c")}, 1)
    assert OLD_APP_PREFIX not in commit_log_text(root)
    state = read_records(open_batches_log(root, "job"), "job")
    assert state.open_batch is None
    committed = state.committed
    assert (committed.batch_id, dict(committed.offsets)) == (1, {(topic, 1): (2, 2)})  # offset 1 is batch 0's COMMIT marker
    # Batch 1 protects batch 0's rows too: a sweep keeps the record while any of them is above its log start.
    assert dict(committed.protects) == {(topic, 0): 0, (topic, 1): 2}
    assert open_batches_log(root, "job").config.compacts


@pytest.mark.parametrize("later", ["none", "aborted", "open"])
def test_S8_3_a_skipped_batch_writes_nothing_even_while_a_later_batch_is_open(root, make_topic, later):
    """Batch 0 committed; batch 1 committed, aborted or left open. A retry of batch 0 is told read-only: every table
    stays byte-identical, no epoch is bumped, and the result says where batch 0 landed."""
    topic = make_topic(partitions=1)
    TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"zero")}, 0, note={"n": 0})
    if later == "aborted":
        with pytest.raises(RuntimeError):
            TransactionalBatchWriter(root, "job").write({(topic, 0): _raising()}, 1)
    elif later == "open":
        leave_open(TransactionalBatchWriter(root, "job"), {(topic, 0): rows(b"one")}, 1)
    before = table_fingerprint(root)
    result = TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"zero again")}, 0)
    assert table_fingerprint(root) == before
    assert result.skipped and result.producer_id == NO_PRODUCER_ID
    assert (result.last_committed_batch, dict(result.offsets), dict(result.note)) == (0, {(topic, 0): (0, 0)}, {"n": 0})


def _raising():
    yield payload_table([b"one"])
    raise RuntimeError("the job failed")


def test_an_open_batch_is_finished_by_the_next_writer_and_the_committed_one_stands(root, make_topic):
    topic = make_topic(partitions=1)
    TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"zero")}, 0)
    leave_open(TransactionalBatchWriter(root, "job"), {(topic, 0): rows(b"one")}, 1)
    with pytest.raises(ConcurrentTransactions):
        TransactionalBatchWriter(root, "job").committed_batch()
    # The retry of batch 1 fences the open attempt (S4.2), finds batch 0 committed and writes batch 1 once.
    result = TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"one")}, 1)
    assert not result.skipped and result.last_committed_batch == 0
    assert TransactionalBatchWriter(root, "job").last_committed_batch() == 1


def test_S9_4_a_record_swept_after_delete_records_of_its_rows_lets_the_unit_load_again(root, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    source = tmp_path / "day.jsonl"
    source.write_bytes(b'{"id": "a"}\n{"id": "b"}\n')
    assert load_unit(root, topic, str(source), "day-1").loaded
    assert load_unit(root, topic, str(source), "day-2").loaded
    # Nothing is spent while the rows are there; once the cleaner recorded its pass, a pass writes nothing (S8.2).
    assert swept(root) == []
    before = table_fingerprint(root)
    assert sweep_sink_records(root, 0) == []
    assert table_fingerprint(root) == before
    # delete-records removes day-1's rows (offsets 0-1) but not day-2's.
    delete_records(open_partition(root, topic, 0), 2)
    assert not load_unit(root, topic, str(source), "day-1").loaded  # the record lives until the sweep
    assert swept(root) == [unit_transactional_id("day-1")]
    assert swept(root) == []  # idempotent (S8.2)
    again = load_unit(root, topic, str(source), "day-1")
    assert again.loaded and again.rows == 2
    assert not load_unit(root, topic, str(source), "day-2").loaded
    assert not load_unit(root, topic, str(source), "day-1").loaded
    # Compaction by key keeps each id's newest record: past delete.retention.ms the tombstone and day-1's first go.
    log = open_batches_log(root, unit_transactional_id("day-1"))
    assert swept(root, now_ms=2**50) == []
    log.refresh()
    values = [v for _, _, v in sink_records._newest_first(log, unit_transactional_id("day-1").encode())]
    assert len(values) == 1 and json.loads(values[0])["before"] is None
    assert not load_unit(root, topic, str(source), "day-1").loaded
    assert not load_unit(root, topic, str(source), "day-2").loaded


def test_S9_4_a_record_protects_the_rows_of_earlier_batches_too(root, make_topic):
    """Batch 0 wrote to partition 0, batch 1 to partition 1: deleting batch 1's rows leaves batch 0's, so the record
    stays and a retry of batch 0 is still skipped."""
    topic = make_topic(partitions=2)
    writer = TransactionalBatchWriter(root, "job")
    writer.write({(topic, 0): rows(b"zero")}, 0)
    writer.write({(topic, 1): rows(b"one")}, 1)
    delete_records(open_partition(root, topic, 1), 1)
    assert swept(root) == []
    assert TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"zero")}, 0).skipped
    delete_records(open_partition(root, topic, 0), 1)
    assert swept(root) == ["job"]
    assert TransactionalBatchWriter(root, "job").last_committed_batch() is None


def test_a_tombstone_loses_to_a_record_written_after_its_decision(root, make_topic, monkeypatch):
    """The sweep's tombstones are a conditional append at the LEO they were decided on (KIP-27): a writer that records
    a newer batch in between wins, and the sweep decides again on the latest snapshot."""
    topic = make_topic(partitions=1)
    TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"zero")}, 0)
    delete_records(open_partition(root, topic, 0), 1)
    decide = sink_records._all_below_log_start
    raced = {"done": False}

    def record_a_newer_batch_first(*args):
        spent = decide(*args)
        if not raced["done"]:
            raced["done"] = True
            TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"one")}, 1)
        return spent

    monkeypatch.setattr(sink_records, "_all_below_log_start", record_a_newer_batch_first)
    assert swept(root) == []
    assert TransactionalBatchWriter(root, "job").last_committed_batch() == 1


def test_an_older_tables_txn_ids_still_skip_a_batch(root, make_topic):
    """A table written before records were read from rows: the record row (no `before`) and three `txn` ids naming it.
    The ids are read, never written again."""
    topic = make_topic(partitions=1)
    log = open_batches_log(root, "old-job")
    value = json.dumps({"batch": 5, "records": {f"{topic}:0": 1}, "offsets": {f"{topic}:0": [0, 0]}, "note": {}}).encode()
    offset = log.log_end_offset()
    prefix = f"{OLD_APP_PREFIX}old-job."
    versions = {prefix + "batch": 5, prefix + "offset": offset, prefix + "before": 5}
    log.append(payload_table([value], keys=[b"old-job"]), BatchHeader(), app_versions=versions)
    writer = TransactionalBatchWriter(root, "old-job")
    before = table_fingerprint(root)
    skipped = writer.write({(topic, 0): rows(b"again")}, 4)
    assert skipped.skipped and skipped.last_committed_batch == 5 and dict(skipped.offsets) == {(topic, 0): (0, 0)}
    assert table_fingerprint(root) == before
    written = writer.write({(topic, 0): rows(b"six")}, 6)
    assert not written.skipped and written.last_committed_batch == 5
    assert OLD_APP_PREFIX + "old-job.batch" in commit_log_text(root)  # read, never written again
    assert commit_log_text(root).count(OLD_APP_PREFIX) == 3
    assert TransactionalBatchWriter(root, "old-job").last_committed_batch() == 6


OUTCOMES = st.lists(st.sampled_from(["commit", "abort"]), min_size=1, max_size=5)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(outcomes=OUTCOMES)
def test_the_last_committed_batch_is_the_newest_committed_record(tmp_path_factory, outcomes):
    """Invariant: after any run of committed and aborted batches, the last committed batch read from the rows is the
    highest batch whose transaction committed, or None."""
    from lakelog.log import create_topic

    root = str(tmp_path_factory.mktemp("lake"))
    create_topic(root, "t", 1)
    expected = None
    for batch_id, outcome in enumerate(outcomes):
        writer = TransactionalBatchWriter(root, "job")
        if outcome == "commit":
            writer.write({("t", 0): rows(b"x")}, batch_id)
            expected = batch_id
        else:
            with pytest.raises(RuntimeError):
                writer.write({("t", 0): _raising()}, batch_id)
        assert TransactionalBatchWriter(root, "job").last_committed_batch() == expected


def test_the_cli_sweep_runs_the_sink_records_step_unless_skipped(root, make_topic):
    topic = make_topic(partitions=1)
    TransactionalBatchWriter(root, "job").write({(topic, 0): rows(b"zero")}, 0)
    delete_records(open_partition(root, topic, 0), 1)
    others = ["--skip", "transactions", "--skip", "groups", "--skip", "log-cleaner", "--skip", "internal-compaction"]

    def sweep(*extra: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-m", "lakelog.cli", "coordinator", "sweep", "--root", root, *others, *extra],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert "sink_records" not in sweep("--skip", "sink-records")
    assert TransactionalBatchWriter(root, "job").last_committed_batch() == 0
    assert [tid for entry in sweep()["sink_records"] for tid in entry["transactional_ids"]] == ["job"]
    assert TransactionalBatchWriter(root, "job").last_committed_batch() is None
