"""The idempotent producer's state in a partition, on real Delta tables: one test per rule of SEMANTICS.md S3
(sequences, retries, epochs, recovery, expiry)."""

from __future__ import annotations

import threading

import pytest
from helpers import FakeClock, table_fingerprint
from partition_log_helpers import (
    T0,
    all_rows,
    batch,
    delta_log_entries,
    drop_commits_up_to_last_checkpoint,
    numbered,
    on_object_store,
    open_partition_fresh,
    refuses,
)

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequence, ProducerFenced, UnknownProducerId
from lakelog.log import BatchHeader, ControlType, PartitionLog, allocate_producer_id, open_partition
from lakelog.log.partition import LOG_END_OFFSET_APP_ID
from lakelog.log.producer_state import ProducerEntry
from lakelog.log.records import MAX_SEQUENCE, conform_payload, stamp

pytestmark = pytest.mark.roots("local", "s3", "azure", "gcs", release=("azure", "gcs"))


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
    clock = FakeClock(T0)
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
    clock = FakeClock(T0)
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
