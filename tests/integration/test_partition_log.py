"""The partition log on real Delta tables: one test per rule of SEMANTICS.md S1-S3 (and S8.3 for refusals)."""

from __future__ import annotations

import json
import threading

import pytest
from deltalake import DeltaTable
from helpers import table_fingerprint

from lakelog.errors import (
    InvalidProducerEpoch,
    OffsetMismatch,
    OffsetOutOfRange,
    OutOfOrderSequence,
    PolicyViolation,
    ProducerFenced,
    UnknownProducerId,
)
from lakelog.log import BatchHeader, ControlType, PartitionLog, allocate_producer_id, open_partition, payload_table
from lakelog.log.partition import LOG_END_OFFSET_APP_ID
from lakelog.log.producer_state import ProducerEntry
from lakelog.log.records import MAX_SEQUENCE, PARTITION_SCHEMA, conform_payload, stamp
from lakelog.store import Location

pytestmark = pytest.mark.roots("local", "s3")

T0 = 1_700_000_000_000


class FakeClock:
    """An injected clock in ms, moved by hand."""

    def __init__(self, now_ms: int = T0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def batch(*values: bytes):
    return payload_table(list(values))


def numbered(prefix: str, count: int):
    return payload_table([f"{prefix}{i}".encode() for i in range(count)])


def all_rows(log: PartitionLog):
    return log.fetch(log.log_start_offset(), max_records=1_000_000, max_bytes=1 << 40).rows


def delta_log_entries(log: PartitionLog) -> list[str]:
    return sorted(entry.name for entry in log.table.io.list(log.table.child_uri("_delta_log")))


def data_files(log: PartitionLog) -> set[str]:
    return {entry.name for entry in log.table.location.list() if entry.name.endswith(".parquet")}


def commit_actions(log: PartitionLog, version: int) -> list[dict]:
    text = log.table.io.read(log.table.child_uri(f"_delta_log/{version:020d}.json")).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def drop_commits_up_to_last_checkpoint(log: PartitionLog) -> int:
    """Delete the commits the last checkpoint covers, as log cleanup does; returns the checkpoint's version."""
    io = log.table.io
    last_checkpoint = json.loads(io.read(log.table.child_uri("_delta_log/_last_checkpoint")))["version"]
    for version in range(last_checkpoint + 1):
        assert io.delete(log.table.child_uri(f"_delta_log/{version:020d}.json"))
    return last_checkpoint


def delta_table(log: PartitionLog, version: int | None = None) -> DeltaTable:
    """The partition's table opened by delta-rs directly (an independent reader), on any kind of root."""
    return DeltaTable(log.table.uri, version=version, storage_options=log.table.io.delta_options())


def on_object_store(root: str) -> bool:
    """S3 variants make fewer commits where their number is not the point (one costs ~10x a local one)."""
    return not Location.of(root).is_local


def refuses(log: PartitionLog, error: type[Exception], payload, header: BatchHeader = BatchHeader()):
    """Append must raise `error` and leave the table byte-for-byte and version-for-version as it was (S8.3)."""
    before, version = table_fingerprint(log.table.uri), log.version
    with pytest.raises(error) as raised:
        log.append(payload, header)
    assert type(raised.value) is error
    assert table_fingerprint(log.table.uri) == before
    assert log.version == version
    assert open_partition_fresh(log).version == version
    return raised.value


def open_partition_fresh(log: PartitionLog) -> PartitionLog:
    """A brand-new PartitionLog on the same table, as another process would open it."""
    root = log.table.uri.rsplit("/", 3)[0]  # <root>/topics/<topic>/<partition>
    return open_partition(root, log.topic, log.partition)


# -- S1 partition log ------------------------------------------------------------


def test_S1_1_offsets_dense_from_zero_never_reused(root, topic):
    """S1.1: offsets are dense from 0 across many appends, control rows and a reopen; none is reused."""
    name = topic()
    log = open_partition(root, name, 0)
    sizes = [1, 3, 2, 5] if on_object_store(root) else [1, 3, 2, 5, 1, 4, 2, 1, 3, 2]
    expected_base = 0
    for i, size in enumerate(sizes):
        result = log.append(numbered(f"a{i}-", size))
        assert (result.base_offset, result.last_offset) == (expected_base, expected_base + size - 1)
        assert result.duplicate is False
        expected_base += size
    marker = log.append_marker(99, 1, ControlType.COMMIT)
    assert (marker.base_offset, marker.last_offset) == (expected_base, expected_base)
    expected_base += 1

    reopened = open_partition(root, name, 0)
    assert reopened.log_end_offset() == expected_base
    for i, size in enumerate([2, 3]):
        result = reopened.append(numbered(f"b{i}-", size))
        assert result.base_offset == expected_base
        expected_base += size
    # The first handle is stale now; its next append is decided again on the latest snapshot.
    result = log.append(batch(b"late"))
    assert result.base_offset == expected_base
    expected_base += 1

    rows = all_rows(open_partition(root, name, 0))
    assert rows.column("offset").to_pylist() == list(range(expected_base))
    assert rows.column("control").to_pylist().count("COMMIT") == 1
    assert rows.column("control").to_pylist()[sum(sizes)] == "COMMIT"
    # An independent reader of the Delta table agrees: every offset exactly once.
    independent = delta_table(log).to_pyarrow_table().column("offset").to_pylist()
    assert sorted(independent) == list(range(expected_base))


def test_S1_2_batch_is_one_commit_all_rows_or_none(root, topic):
    """S1.2: a batch is one commit (version +1, one file with all rows); a refused batch adds no version, no file."""
    log = open_partition(root, topic(), 0)
    log.append(numbered("first-", 3))
    version = log.version
    files_before = data_files(log)

    result = log.append(numbered("batch-", 5))
    assert result.version == version + 1 == log.version
    new_files = data_files(log) - files_before
    assert len(new_files) == 1
    adds = [action["add"] for action in commit_actions(log, version + 1) if "add" in action]
    assert [add["path"] for add in adds] == list(new_files)
    assert json.loads(adds[0]["stats"])["numRecords"] == 5
    # Visibility: none of the batch at version v, all of it at v+1.
    assert delta_table(log, version).to_pyarrow_table().num_rows == 3
    at_commit = delta_table(log, version + 1).to_pyarrow_table().sort_by("offset")
    assert at_commit.column("offset").to_pylist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert at_commit.column("value").to_pylist()[3:] == [f"batch-{i}".encode() for i in range(5)]

    log_before = delta_log_entries(log)
    refuses(log, OffsetMismatch, numbered("refused-", 4), BatchHeader(expected_offset=0))
    assert delta_log_entries(log) == log_before
    assert data_files(log) == files_before | new_files
    assert all_rows(log).num_rows == 8


def test_S1_3_leo_is_last_offset_plus_one_and_hw_equals_leo(root, topic):
    """S1.3: LEO = last offset + 1, HW = LEO; the same in a new PartitionLog, after checkpoints, and from the checkpoint alone."""
    name = topic({"checkpoint.interval.commits": 5})
    log = open_partition(root, name, 0)
    assert log.log_end_offset() == log.high_watermark() == 0
    result = None
    for i in range(12):
        result = log.append(numbered(f"v{i}-", 2))
        assert log.log_end_offset() == result.last_offset + 1 == 2 * (i + 1)
        assert log.high_watermark() == log.log_end_offset()
    assert result is not None and result.version == 12
    checkpoints = [entry for entry in delta_log_entries(log) if entry.endswith(".checkpoint.parquet")]
    assert len(checkpoints) >= 2

    reopened = open_partition(root, name, 0)
    assert reopened.log_end_offset() == reopened.high_watermark() == 24
    assert reopened.fetch(23).rows.column("offset").to_pylist() == [23]

    # Drop the commits the last checkpoint covers (what log cleanup does): LEO comes from the checkpoint.
    drop_commits_up_to_last_checkpoint(log)
    from_checkpoint = open_partition(root, name, 0)
    assert from_checkpoint.log_end_offset() == from_checkpoint.high_watermark() == 24
    appended = from_checkpoint.append(batch(b"after"))
    assert (appended.base_offset, from_checkpoint.log_end_offset()) == (24, 25)


def test_S1_4_fetch_in_offset_order_from_start_offset(root, topic):
    """S1.4: fetch returns rows in offset order from any start offset, across batch boundaries."""
    log = open_partition(root, topic(), 0)
    values = []
    for i in range(6):
        payload = numbered(f"f{i}-", 3)
        values += payload.column("value").to_pylist()
        log.append(payload)
    for start in (0, 1, 3, 7, 17):
        rows = log.fetch(start, max_records=100).rows
        assert rows.column("offset").to_pylist() == list(range(start, 18))
        assert rows.column("value").to_pylist() == values[start:]
        assert rows.schema.names == PARTITION_SCHEMA.names


def test_S1_4_fetch_record_budget(root, topic):
    """S1.4: max_records bounds the rows returned, exactly, also across files."""
    log = open_partition(root, topic(), 0)
    for i in range(4):
        log.append(numbered(f"r{i}-", 3))
    assert log.fetch(0, max_records=1).rows.column("offset").to_pylist() == [0]
    assert log.fetch(1, max_records=4).rows.column("offset").to_pylist() == [1, 2, 3, 4]
    assert log.fetch(2, max_records=7).rows.column("offset").to_pylist() == list(range(2, 9))
    assert log.fetch(10, max_records=7).rows.column("offset").to_pylist() == [10, 11]


def test_S1_4_fetch_byte_budget_returns_at_least_one_record(root, topic):
    """S1.4: a byte budget smaller than one record still returns the first record (progress), from the start offset."""
    log = open_partition(root, topic(), 0)
    for i in range(3):
        log.append(batch(bytes([i]) * 10_000))
    for start in (0, 1, 2):
        rows = log.fetch(start, max_bytes=1).rows
        assert rows.column("offset").to_pylist() == [start]
        assert rows.column("value").to_pylist() == [bytes([start]) * 10_000]


def test_S1_4_fetch_byte_budget_bounds_result_past_the_first_batch(root, topic):
    """S1.4: past the first batch, a fetch stops before the batch that would exceed max_bytes."""
    log = open_partition(root, topic(), 0)
    for i in range(4):
        log.append(batch(bytes([i]) * 10_000))
    # One record is ~10 KB; a 15 KB budget has room for one, a 25 KB budget for two.
    assert log.fetch(0, max_bytes=15_000).rows.column("offset").to_pylist() == [0]
    assert log.fetch(0, max_bytes=25_000).rows.column("offset").to_pylist() == [0, 1]


def test_S1_4_fetch_out_of_range(root, topic):
    """S1.4: a start beyond LEO or before the log start offset is OffsetOutOfRange; start = LEO is empty."""
    log = open_partition(root, topic(), 0)
    assert log.fetch(0).rows.num_rows == 0
    log.append(numbered("o", 3))
    before = table_fingerprint(log.table.uri)
    empty = log.fetch(3).rows
    assert empty.num_rows == 0 and empty.schema.names == PARTITION_SCHEMA.names
    for start in (4, 1000, -1):
        with pytest.raises(OffsetOutOfRange) as raised:
            log.fetch(start)
        assert (raised.value.log_start_offset, raised.value.log_end_offset) == (0, 3)
    for budget in ({"max_records": 0}, {"max_bytes": 0}):
        with pytest.raises(OffsetOutOfRange):
            log.fetch(0, **budget)
    assert table_fingerprint(log.table.uri) == before


def test_S1_4_fetch_beyond_stale_leo_reloads(root, topic):
    """S1.4: an offset beyond the handle's LEO is only out of range if it is beyond the latest LEO."""
    name = topic()
    reader = open_partition(root, name, 0)
    writer = open_partition(root, name, 0)
    writer.append(numbered("w", 4))
    assert reader.fetch(2).rows.column("offset").to_pylist() == [2, 3]
    with pytest.raises(OffsetOutOfRange):
        reader.fetch(5)


# -- S2 conditional publish --------------------------------------------------------


def test_S2_1_offset_mismatch_carries_log_end_offset_nothing_written(root, topic):
    """S2.1: a wrong expected offset refuses the whole batch with OffsetMismatch(log_end_offset); nothing is written."""
    log = open_partition(root, topic(), 0)
    assert log.append(numbered("a", 3), BatchHeader(expected_offset=0)).base_offset == 0
    for wrong in (0, 2, 4, 100):
        error = refuses(log, OffsetMismatch, numbered("x", 2), BatchHeader(expected_offset=wrong))
        assert error.log_end_offset == 3
        assert error.expected_offset == wrong
    result = log.append(numbered("b", 2), BatchHeader(expected_offset=3))
    assert (result.base_offset, result.last_offset) == (3, 4)
    assert all_rows(log).column("value").to_pylist() == [b"a0", b"a1", b"a2", b"b0", b"b1"]


def test_S2_1_expected_offset_decided_on_latest_snapshot(root, topic):
    """S2.1: a stale handle is not refused on its stale LEO: it reloads and appends at the true LEO."""
    name = topic()
    stale = open_partition(root, name, 0)
    other = open_partition(root, name, 0)
    other.append(numbered("o", 3))
    assert stale.log_end_offset() == 0
    result = stale.append(batch(b"s"), BatchHeader(expected_offset=3))
    assert (result.base_offset, stale.log_end_offset()) == (3, 4)


def test_S2_2_resend_same_batch_same_expected_offset_appended_once(root, topic):
    """S2.2: the same batch with the same expected offset sent 5 times is appended exactly once."""
    log = open_partition(root, topic(), 0)
    log.append(numbered("pre", 2))
    payload = numbered("once", 3)
    outcomes = []
    for _ in range(5):
        try:
            outcomes.append(log.append(payload, BatchHeader(expected_offset=2)).base_offset)
        except OffsetMismatch as error:
            outcomes.append(("mismatch", error.log_end_offset))
    assert outcomes == [2] + [("mismatch", 5)] * 4
    assert all_rows(log).column("value").to_pylist() == [b"pre0", b"pre1", b"once0", b"once1", b"once2"]


def test_S2_2_idempotent_resend_with_expected_offset_returns_original_offsets(root, topic):
    """S2.2 with S3.2: an idempotent batch resent with its expected offset is a duplicate with the original offsets."""
    log = open_partition(root, topic(), 0)
    header = BatchHeader(producer_id=3, producer_epoch=0, base_sequence=0, expected_offset=0)
    results = [log.append(numbered("i", 2), header) for _ in range(5)]
    assert [(r.base_offset, r.last_offset, r.duplicate) for r in results] == [(0, 1, False)] + [(0, 1, True)] * 4
    assert log.log_end_offset() == 2


def test_S2_2_racing_writers_at_same_expected_offset_exactly_one_wins(root, topic):
    """S2.2: writers racing at one expected offset: exactly one appends, the others get OffsetMismatch."""
    name = topic()
    open_partition(root, name, 0).append(numbered("base", 2))
    writers = [open_partition(root, name, 0) for _ in range(4)]
    barrier = threading.Barrier(len(writers))
    outcomes: list = [None] * len(writers)

    def race(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = writers[index].append(numbered(f"w{index}-", 2), BatchHeader(expected_offset=2))
        except OffsetMismatch as error:
            outcomes[index] = error

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [i for i, outcome in enumerate(outcomes) if not isinstance(outcome, OffsetMismatch)]
    assert len(winners) == 1
    assert outcomes[winners[0]].base_offset == 2
    assert [outcome.log_end_offset for outcome in outcomes if isinstance(outcome, OffsetMismatch)] == [4, 4, 4]
    rows = all_rows(open_partition(root, name, 0))
    assert rows.column("value").to_pylist() == [b"base0", b"base1", f"w{winners[0]}-0".encode(), f"w{winners[0]}-1".encode()]


def test_S2_2_race_loser_is_refused_on_the_latest_snapshot(root, topic):
    """S2.2: a writer that lost the commit race at an expected offset is refused; the table holds the winner only."""
    name = topic()
    winner, loser = open_partition(root, name, 0), open_partition(root, name, 0)
    winner.append(batch(b"win"), BatchHeader(expected_offset=0))
    with pytest.raises(OffsetMismatch) as raised:
        loser.append(batch(b"lose"), BatchHeader(expected_offset=0))
    assert raised.value.log_end_offset == 1
    assert loser.version == winner.version == 1
    assert all_rows(open_partition(root, name, 0)).column("value").to_pylist() == [b"win"]


def test_S8_3_race_loser_leaves_no_file(root, topic):
    """S8.3: a request refused after losing a commit race leaves the table byte-for-byte as the winner left it."""
    name = topic()
    winner, loser = open_partition(root, name, 0), open_partition(root, name, 0)
    winner.append(batch(b"win"), BatchHeader(expected_offset=0))
    after_winner = table_fingerprint(winner.table.uri)
    with pytest.raises(OffsetMismatch):
        loser.append(batch(b"lose"), BatchHeader(expected_offset=0))
    assert table_fingerprint(winner.table.uri) == after_winner


def test_S2_3_check_expected_offsets_refuses_batch_without_one(root, topic):
    """S2.3: with check.expected.offsets=true a batch without an expected offset is a PolicyViolation; nothing written."""
    log = open_partition(root, topic({"check.expected.offsets": True}), 0)
    assert log.config.check_expected_offsets is True
    error = refuses(log, PolicyViolation, batch(b"no-offset"))
    assert error.log_end_offset == 0
    refuses(log, PolicyViolation, batch(b"idempotent"), BatchHeader(producer_id=1, producer_epoch=0, base_sequence=0))
    assert log.append(batch(b"ok"), BatchHeader(expected_offset=0)).base_offset == 0
    assert refuses(log, PolicyViolation, batch(b"again")).log_end_offset == 1
    assert all_rows(log).column("value").to_pylist() == [b"ok"]


def test_S2_3_default_topic_accepts_batch_without_expected_offset(root, topic):
    log = open_partition(root, topic(), 0)
    assert log.config.check_expected_offsets is False
    assert log.append(batch(b"free")).base_offset == 0


# -- S3 idempotent producer --------------------------------------------------------


def test_S3_1_batch_header_stamped_and_sequences_per_partition(root, topic):
    """S3.1: rows carry (PID, epoch, sequence); sequences are per partition and start at 0 in each."""
    name = topic(partitions=2)
    first, second = open_partition(root, name, 0), open_partition(root, name, 1)
    first.append(numbered("a", 3), BatchHeader(producer_id=4, producer_epoch=2, base_sequence=0))
    first.append(numbered("b", 2), BatchHeader(producer_id=4, producer_epoch=2, base_sequence=3))
    assert second.append(batch(b"c"), BatchHeader(producer_id=4, producer_epoch=2, base_sequence=0)).base_offset == 0
    rows = all_rows(first)
    assert rows.column("sequence").to_pylist() == [0, 1, 2, 3, 4]
    assert set(rows.column("producer_id").to_pylist()) == {4}
    assert set(rows.column("producer_epoch").to_pylist()) == {2}
    assert first.producer_entry(4) is not None and first.producer_entry(4).last_sequence == 4
    assert second.producer_entry(4).last_sequence == 0


def _producer_near_wrap(log: PartitionLog, producer_id: int, last: int) -> None:
    """Commit the row a long-lived producer left at sequence `last` (its entry is its last row, S3.5)."""
    leo = log.log_end_offset()
    rows = stamp(conform_payload(batch(b"setup")), leo, BatchHeader(producer_id, 0, last), log._clock() * 1000)
    log.table.append(rows, app_versions={LOG_END_OFFSET_APP_ID: leo + 1})


def test_S3_1_sequence_wraps_at_max_in_the_log(root, topic):
    """S3.1: a batch crossing 2^31-1 is stamped with wrapped sequences; the next batch starts after the wrap."""
    log = open_partition(root, topic(), 0)
    _producer_near_wrap(log, 9, MAX_SEQUENCE - 2)
    result = log.append(numbered("w", 3), BatchHeader(producer_id=9, producer_epoch=0, base_sequence=MAX_SEQUENCE - 1))
    assert (result.base_offset, result.last_offset) == (1, 3)
    assert all_rows(log).column("sequence").to_pylist()[1:] == [MAX_SEQUENCE - 1, MAX_SEQUENCE, 0]
    assert open_partition_fresh(log).producer_entry(9).last_sequence == 0
    refuses(log, OutOfOrderSequence, batch(b"gap"), BatchHeader(producer_id=9, producer_epoch=0, base_sequence=5))
    assert log.append(batch(b"next"), BatchHeader(producer_id=9, producer_epoch=0, base_sequence=1)).base_offset == 4


def test_S3_2_retry_of_batch_that_wrapped_returns_original_offsets(root, topic):
    """S3.1/S3.2: a retry of a batch whose sequences wrapped at 2^31-1 is a duplicate with the original offsets."""
    log = open_partition(root, topic(), 0)
    _producer_near_wrap(log, 9, MAX_SEQUENCE - 2)
    header = BatchHeader(producer_id=9, producer_epoch=0, base_sequence=MAX_SEQUENCE - 1)
    original = log.append(numbered("w", 3), header)
    log.append(batch(b"next"), BatchHeader(producer_id=9, producer_epoch=0, base_sequence=1))
    retry = log.append(numbered("w", 3), header)
    assert (retry.base_offset, retry.last_offset, retry.duplicate) == (original.base_offset, original.last_offset, True)


def test_S3_2_retry_of_appended_batch_returns_original_offsets(root, topic):
    """S3.1/S3.2: a retry of the last batch appends nothing and returns its original offsets, duplicate=True."""
    log = open_partition(root, topic(), 0)
    log.append(numbered("other", 2))
    header = BatchHeader(producer_id=1, producer_epoch=0, base_sequence=0)
    original = log.append(numbered("p", 3), header)
    assert (original.base_offset, original.last_offset, original.duplicate) == (2, 4, False)
    before, version = table_fingerprint(log.table.uri), log.version
    for retrier in (log, open_partition_fresh(log)):
        retry = retrier.append(numbered("p", 3), header)
        assert (retry.base_offset, retry.last_offset, retry.duplicate) == (2, 4, True)
        assert retry.version == version
    assert table_fingerprint(log.table.uri) == before
    assert log.log_end_offset() == 5


def test_S3_2_retry_of_older_batch_not_the_last_returns_original_offsets(root, topic):
    """S3.2: a retry of a batch that is no longer the producer's last one is still found, with its offsets."""
    log = open_partition(root, topic(), 0)
    originals = {}
    sequence = 0
    for i, size in enumerate([2, 3, 1, 4]):
        header = BatchHeader(producer_id=7, producer_epoch=1, base_sequence=sequence)
        originals[sequence] = (size, log.append(numbered(f"b{i}-", size), header))
        log.append(batch(b"interleaved"))  # another writer's row between the producer's batches
        sequence += size
    before = table_fingerprint(log.table.uri)
    for base, (size, original) in originals.items():
        retry = log.append(numbered("whatever", size), BatchHeader(producer_id=7, producer_epoch=1, base_sequence=base))
        assert (retry.base_offset, retry.last_offset, retry.duplicate) == (original.base_offset, original.last_offset, True)
    assert table_fingerprint(log.table.uri) == before
    # The producer carries on from where it was.
    assert log.append(batch(b"next"), BatchHeader(producer_id=7, producer_epoch=1, base_sequence=10)).duplicate is False


def test_S3_2_retry_through_stale_handle_is_duplicate(root, topic):
    """S3.2: a retry arriving at a handle that has not seen the original reloads and finds it."""
    name = topic()
    stale = open_partition(root, name, 0)
    current = open_partition(root, name, 0)
    header = BatchHeader(producer_id=2, producer_epoch=0, base_sequence=0)
    original = current.append(numbered("s", 2), header)
    retry = stale.append(numbered("s", 2), header)
    assert (retry.base_offset, retry.last_offset, retry.duplicate) == (original.base_offset, original.last_offset, True)
    assert all_rows(open_partition(root, name, 0)).num_rows == 2


def test_S3_3_sequence_gap_is_out_of_order_nothing_written(root, topic):
    """S3.3: a batch that skips sequences is OutOfOrderSequence naming the expected one; nothing is written."""
    log = open_partition(root, topic(), 0)
    log.append(numbered("a", 3), BatchHeader(producer_id=5, producer_epoch=0, base_sequence=0))
    for base in (4, 10, MAX_SEQUENCE):
        error = refuses(log, OutOfOrderSequence, batch(b"gap"), BatchHeader(producer_id=5, producer_epoch=0, base_sequence=base))
        assert (error.producer_id, error.expected_sequence) == (5, 3)
    # Overlapping the last batch without matching it is no duplicate either.
    refuses(log, OutOfOrderSequence, numbered("x", 2), BatchHeader(producer_id=5, producer_epoch=0, base_sequence=2))
    assert log.append(batch(b"next"), BatchHeader(producer_id=5, producer_epoch=0, base_sequence=3)).base_offset == 3


def test_S3_3_unknown_producer_must_start_at_zero(root, topic):
    """S3.3: a producer id the partition has never seen must start at sequence 0 (UnknownProducerId)."""
    log = open_partition(root, topic(), 0)
    error = refuses(log, UnknownProducerId, batch(b"x"), BatchHeader(producer_id=8, producer_epoch=0, base_sequence=3))
    assert error.producer_id == 8
    assert log.append(batch(b"x"), BatchHeader(producer_id=8, producer_epoch=0, base_sequence=0)).base_offset == 0


def test_S3_4_older_epoch_refused_newer_epoch_starts_at_zero(root, topic):
    """S3.4: an older epoch is InvalidProducerEpoch (ProducerFenced if transactional); a newer one must start at 0."""
    log = open_partition(root, topic(), 0)
    log.append(numbered("e1-", 2), BatchHeader(producer_id=6, producer_epoch=1, base_sequence=0))
    error = refuses(log, InvalidProducerEpoch, batch(b"old"), BatchHeader(producer_id=6, producer_epoch=0, base_sequence=0))
    assert error.producer_epoch == 1
    refuses(
        log, ProducerFenced, batch(b"old"), BatchHeader(producer_id=6, producer_epoch=0, base_sequence=2, is_transactional=True)
    )
    error = refuses(log, OutOfOrderSequence, batch(b"new"), BatchHeader(producer_id=6, producer_epoch=2, base_sequence=2))
    assert error.expected_sequence == 0
    assert log.append(batch(b"new"), BatchHeader(producer_id=6, producer_epoch=2, base_sequence=0)).base_offset == 2
    # Once the partition has seen epoch 2, epoch 1 is stale too, even at its next sequence.
    refuses(log, InvalidProducerEpoch, batch(b"stale"), BatchHeader(producer_id=6, producer_epoch=1, base_sequence=2))
    fresh = open_partition_fresh(log)
    assert fresh.producer_entry(6) == ProducerEntry(6, 2, 0, fresh.producer_entry(6).last_timestamp_ms, last_offset=2)
    with pytest.raises(InvalidProducerEpoch):
        fresh.append(batch(b"stale"), BatchHeader(producer_id=6, producer_epoch=1, base_sequence=2))


def test_S3_4_epoch_recorded_by_app_versions_fences_the_same_handle(root, topic):
    """S3.4: once a commit records a newer epoch for a PID (as a marker does), every handle refuses the older one."""
    log = open_partition(root, topic(), 0)
    log.append(batch(b"a"), BatchHeader(producer_id=7, producer_epoch=2, base_sequence=0))
    log.append_marker(7, 3, ControlType.ABORT)
    with pytest.raises(InvalidProducerEpoch):  # a new handle sees the fence
        open_partition_fresh(log).append(batch(b"b"), BatchHeader(producer_id=7, producer_epoch=2, base_sequence=1))
    with pytest.raises(InvalidProducerEpoch):  # the handle that wrote it must too
        log.append(batch(b"b"), BatchHeader(producer_id=7, producer_epoch=2, base_sequence=1))


def test_S3_5_producer_state_recovered_from_table_after_checkpoints(root, topic):
    """S3.5: a brand-new PartitionLog recovers every producer's state from the table alone, after >= 2 checkpoints."""
    name = topic({"checkpoint.interval.commits": 5})
    clock = FakeClock()
    log = open_partition(root, name, 0, clock=clock)
    next_sequence = {10: 0, 11: 0, 12: 0}
    epochs = {10: 0, 11: 3, 12: 1}
    for round_ in range(4):
        for producer_id in (10, 11, 12):
            clock.now_ms += 1000
            header = BatchHeader(producer_id, epochs[producer_id], next_sequence[producer_id])
            log.append(numbered(f"{producer_id}-{round_}-", 2), header)
            next_sequence[producer_id] += 2
    assert log.version == 12
    assert len([entry for entry in delta_log_entries(log) if entry.endswith(".checkpoint.parquet")]) >= 2
    expected = {pid: log.producer_entry(pid) for pid in (10, 11, 12)}
    assert expected[11] == ProducerEntry(11, 3, 7, T0 + 11_000, last_offset=21)

    # Only the checkpoint and the commits after it remain, as after log cleanup.
    assert drop_commits_up_to_last_checkpoint(log) >= 9
    recovered = open_partition(root, name, 0, clock=clock)
    assert {pid: recovered.producer_entry(pid) for pid in (10, 11, 12)} == expected
    assert recovered.producer_entry(13) is None

    # The recovered state decides exactly as the original would.
    retry = recovered.append(numbered("10-0-", 2), BatchHeader(10, 0, 0))
    assert (retry.base_offset, retry.duplicate) == (0, True)
    with pytest.raises(OutOfOrderSequence):
        recovered.append(batch(b"gap"), BatchHeader(11, 3, 9))
    with pytest.raises(InvalidProducerEpoch):
        recovered.append(batch(b"old"), BatchHeader(12, 0, 0))
    assert recovered.append(batch(b"next"), BatchHeader(11, 3, 8)).base_offset == 24


def test_S3_5_idle_producer_state_expires(root, topic):
    """S3.5: state of a PID idle longer than producer.id.expiration.ms is dropped (injected clock), also when recovered."""
    name = topic({"producer.id.expiration.ms": 60_000})
    clock = FakeClock()
    log = open_partition(root, name, 0, clock=clock)
    log.append(numbered("a", 3), BatchHeader(producer_id=1, producer_epoch=2, base_sequence=0))
    assert log.producer_entry(1).last_timestamp_ms == T0

    clock.now_ms = T0 + 60_000  # exactly the expiration: still alive
    refuses(log, OutOfOrderSequence, batch(b"gap"), BatchHeader(producer_id=1, producer_epoch=2, base_sequence=9))
    refuses(log, InvalidProducerEpoch, batch(b"old"), BatchHeader(producer_id=1, producer_epoch=1, base_sequence=0))
    log.append(batch(b"b"), BatchHeader(producer_id=1, producer_epoch=2, base_sequence=3))  # refreshes the timestamp
    assert log.producer_entry(1).last_timestamp_ms == T0 + 60_000

    clock.now_ms = T0 + 120_001  # idle 60_001 ms: expired
    for handle in (log, open_partition(root, name, 0, clock=clock)):
        error = refuses(handle, UnknownProducerId, batch(b"c"), BatchHeader(producer_id=1, producer_epoch=2, base_sequence=4))
        assert error.producer_id == 1
    # Forgotten means a restart at sequence 0 is accepted, even at an older epoch.
    restarted = log.append(batch(b"again"), BatchHeader(producer_id=1, producer_epoch=1, base_sequence=0))
    assert (restarted.base_offset, restarted.duplicate) == (4, False)
    assert log.producer_entry(1) == ProducerEntry(1, 1, 0, T0 + 120_001, last_offset=4)


def test_producer_id_allocation_is_unique(root):
    """Every allocate_producer_id call under a root gets a new id, also when racing."""
    first, second = allocate_producer_id(root), allocate_producer_id(root, "client")
    assert first != second
    ids: list[int] = []
    lock = threading.Lock()
    racers, each = (3, 2) if on_object_store(root) else (4, 3)

    def allocate() -> None:
        for _ in range(each):
            producer_id = allocate_producer_id(root)
            with lock:
                ids.append(producer_id)

    threads = [threading.Thread(target=allocate) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == racers * each
    assert len(set(ids) | {first, second}) == racers * each + 2
    assert all(producer_id >= 0 for producer_id in ids)


# -- S8.3 every refused request leaves the table as it was -------------------------


REFUSALS = {
    "OffsetMismatch": (OffsetMismatch, BatchHeader(expected_offset=7)),
    "OutOfOrderSequence": (OutOfOrderSequence, BatchHeader(producer_id=1, producer_epoch=1, base_sequence=9)),
    "InvalidProducerEpoch": (InvalidProducerEpoch, BatchHeader(producer_id=1, producer_epoch=0, base_sequence=2)),
    "ProducerFenced": (ProducerFenced, BatchHeader(producer_id=1, producer_epoch=0, base_sequence=2, is_transactional=True)),
    "UnknownProducerId": (UnknownProducerId, BatchHeader(producer_id=2, producer_epoch=0, base_sequence=1)),
}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_S8_3_refused_append_leaves_table_unchanged(root, topic, kind):
    """S8.3: each refusal of the log layer leaves every file of the table byte-for-byte as it was."""
    error, header = REFUSALS[kind]
    log = open_partition(root, topic(), 0)
    log.append(numbered("a", 2), BatchHeader(producer_id=1, producer_epoch=1, base_sequence=0))
    refuses(log, error, numbered("refused", 3), header)
    assert all_rows(log).column("value").to_pylist() == [b"a0", b"a1"]


def test_S8_3_policy_violation_leaves_table_unchanged(root, topic):
    log = open_partition(root, topic({"check.expected.offsets": True}), 0)
    log.append(batch(b"a"), BatchHeader(expected_offset=0))
    refuses(log, PolicyViolation, batch(b"refused"))
    refuses(log, PolicyViolation, payload_table([]), BatchHeader(expected_offset=1))


def test_S1_4_a_handle_reads_its_own_small_last_file_as_the_store_gives_it(root, topic):
    """The rows of the small file a handle just appended (a marker, a coordinator's record) are served from
    memory: the same schema and values, projection and filter as reading the file gives. A large file is read."""
    import pyarrow.compute as pc

    from lakelog.store.table import WRITTEN_ROWS_KEPT

    log = open_partition(root, topic(), 0)
    producer_id = allocate_producer_id(root)
    payload = payload_table([b"a", None, b"c"], keys=[b"k", None, b"k"], headers=[[("h", b"1")], None, [("h", None)]])
    log.append(payload, BatchHeader(producer_id, 0, 0))
    log.append_marker(producer_id, 1, ControlType.COMMIT)
    disk = open_partition_fresh(log)
    filters = [(None, None), (["offset", "control"], None), (None, pc.field("offset") >= 1), (["value"], pc.field("offset") < 2)]
    for entry in log.table.files():
        for columns, predicate in filters:
            mine, read = log.table.read_file(entry, columns, predicate), disk.table.read_file(entry, columns, predicate)
            assert mine.schema == read.schema and mine.to_pylist() == read.to_pylist(), (entry.path, columns)
    last = log.table.files()[-1]
    assert log.table._written is not None and log.table._written[0] == last.path
    log.append(payload_table([b"x"] * (WRITTEN_ROWS_KEPT + 1)))
    assert log.table._written is None
    assert [row["value"] for row in log.fetch(0, max_records=10_000).rows.to_pylist()][4:] == [b"x"] * (WRITTEN_ROWS_KEPT + 1)
