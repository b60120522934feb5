"""Producer state derived from the partition's rows (S9.4, S3.5, S8.3) on real Delta tables, with a clock passed in.

A producer's entry at a snapshot is its last row there; nothing per producer goes
to the Delta log, so its `txn` actions stay bounded whatever the number of producers.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import FakeClock, table_fingerprint

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequence, UnknownProducerId
from lakelog.log import BatchHeader, ControlType, PartitionLog, open_partition, payload_table
from lakelog.log.partition import LOG_END_OFFSET_APP_ID, LOG_START_OFFSET_APP_ID
from lakelog.log.partition_file import PARTITION_ORDER, partition_files
from lakelog.log.producer_state import STATE_COLUMNS, fold
from lakelog.log.records import conform_payload, stamp
from lakelog.log.verification import _UNVERIFIED
from lakelog.store.upkeep.maintenance import compact

pytestmark = pytest.mark.roots("local", "s3")

T0 = 1_700_000_000_000
EXPIRATION = 60_000


def one(value: bytes = b"v"):
    return payload_table([value])


def refused(log: PartitionLog, error: type[Exception], header: BatchHeader) -> Exception:
    """Assert the batch is refused with `error` and writes nothing (S8.3)."""
    before, version = table_fingerprint(log.table.uri), log.version
    with pytest.raises(error) as raised:
        log.append(one(b"refused"), header)
    assert table_fingerprint(log.table.uri) == before and log.version == version
    return raised.value


def verdict_in_another_process(root: str, topic: str, now_ms: int, header: BatchHeader) -> str:
    """The error class name (or "appended") another process decides for `header` on the latest snapshot."""
    code = textwrap.dedent(f"""
        from lakelog.log import BatchHeader, open_partition, payload_table
        log = open_partition({root!r}, {topic!r}, 0, clock=lambda: {now_ms})
        try:
            log.append(payload_table([b"p"]), BatchHeader({header.producer_id}, {header.producer_epoch}, {header.base_sequence}))
            print("appended")
        except Exception as error:
            print(type(error).__name__)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("decider", ["same handle", "cold handle", "second process"])
def test_S9_4_expiry_edge_decided_alike_by_every_process(root, topic, decider):
    """S9.4: idle exactly producer.id.expiration.ms is alive, one ms more is unknown; the same on any handle (S3.5)."""
    name = topic({"producer.id.expiration.ms": EXPIRATION})
    clock = FakeClock(T0)
    log = open_partition(root, name, 0, clock=clock)
    for sequence in range(3):
        log.append(one(), BatchHeader(1, 0, sequence))
    clock.now_ms = T0 + EXPIRATION  # not greater: alive, and this batch refreshes its timestamp
    log.append(one(), BatchHeader(1, 0, 3))
    last = clock.now_ms
    clock.now_ms = last + EXPIRATION + 1
    if decider == "second process":
        before = table_fingerprint(log.table.uri)
        assert verdict_in_another_process(root, name, clock.now_ms, BatchHeader(1, 0, 4)) == "UnknownProducerId"
        assert table_fingerprint(log.table.uri) == before
        assert verdict_in_another_process(root, name, clock.now_ms, BatchHeader(1, 0, 0)) == "appended"
        return
    handle = log if decider == "same handle" else open_partition(root, name, 0, clock=clock)
    assert refused(handle, UnknownProducerId, BatchHeader(1, 0, 4)).producer_id == 1
    assert handle.append(one(), BatchHeader(1, 0, 0)).base_offset == 4


@pytest.mark.parametrize("decider", ["same handle", "cold handle"])
def test_S9_4_old_create_times_do_not_expire_a_producer_that_is_writing(root, topic, decider):
    """S9.4: idle is since the producer's last append, not its records' CreateTime (a backfill of event times).

    Kafka expires such a producer at once (KAFKA-6817); here its entry's time is the later
    of the row's timestamp and the file's append time (the log's clock), so it lives on.
    """
    name = topic({"producer.id.expiration.ms": EXPIRATION})
    clock = FakeClock(T0)
    log = open_partition(root, name, 0, clock=clock)
    a_year_ago = T0 - 365 * 86_400_000
    for sequence in range(3):
        log.append(payload_table([b"e"], timestamps_ms=[a_year_ago + sequence]), BatchHeader(1, 0, sequence))
        clock.now_ms += EXPIRATION // 2
    handle = log if decider == "same handle" else open_partition(root, name, 0, clock=clock)
    assert handle.append(payload_table([b"e"], timestamps_ms=[a_year_ago]), BatchHeader(1, 0, 3)).base_offset == 3
    clock.now_ms += EXPIRATION + 1  # now idle past the expiration since its last append
    refused(handle, UnknownProducerId, BatchHeader(1, 0, 4))


def test_S9_4_a_clock_behind_the_rows_still_sees_the_entry(root, topic):
    """S9.4: the verdict is a function of (rows, now): a handle that dropped an entry at a later clock reads it back."""
    name = topic({"producer.id.expiration.ms": EXPIRATION})
    clock = FakeClock(T0)
    log = open_partition(root, name, 0, clock=clock)
    log.append(one(), BatchHeader(1, 0, 0))
    clock.now_ms = T0 + 10 * EXPIRATION
    log.append(one(), BatchHeader(2, 0, 0))  # drops producer 1 from this handle's cache
    assert len(log._producer_index) == 1
    clock.now_ms = T0 + 1
    refused(log, OutOfOrderSequence, BatchHeader(1, 0, 5))
    assert log.append(one(), BatchHeader(1, 0, 1)).base_offset == 2


def test_S9_4_open_transaction_never_expires_then_expires_after_its_marker(root, topic):
    """S9.4: a producer with an open transaction is known however long idle; after its marker it expires as any."""
    name = topic({"producer.id.expiration.ms": EXPIRATION})
    clock = FakeClock(T0)
    log = open_partition(root, name, 0, clock=clock)
    log.append(one(), BatchHeader(7, 2, 0, is_transactional=True), transaction=_UNVERIFIED)
    clock.now_ms = T0 + 100 * EXPIRATION
    for handle in (log, open_partition(root, name, 0, clock=clock)):
        refused(handle, InvalidProducerEpoch, BatchHeader(7, 1, 0))  # still known: its epoch fences
        assert handle.producer_entry(7).transaction_open
    log.append(one(), BatchHeader(7, 2, 1, is_transactional=True), transaction=_UNVERIFIED)
    log.append_marker(7, 3, ControlType.COMMIT)
    assert log.producer_entry(7).transaction_open is False
    refused(log, InvalidProducerEpoch, BatchHeader(7, 1, 0))
    clock.now_ms += EXPIRATION + 1
    for handle in (open_partition(root, name, 0, clock=clock), log):
        refused(handle, UnknownProducerId, BatchHeader(7, 3, 1))
    assert log.append(one(), BatchHeader(7, 1, 0)).duplicate is False  # forgotten: an older epoch starts afresh


def _commit_producers(log: PartitionLog, producer_ids: range, now_ms: int) -> None:
    """One commit holding one row of each producer id, as that many producers' first batches would."""
    leo = log.log_end_offset()
    rows = pa.concat_tables(
        stamp(conform_payload(one()), leo + i, BatchHeader(pid, 0, 0), now_ms * 1000) for i, pid in enumerate(producer_ids)
    )
    log.table.append(rows, app_versions={LOG_END_OFFSET_APP_ID: leo + len(producer_ids)}, modification_time_ms=now_ms)


def test_S9_4_cache_holds_only_live_producers(root, topic):
    """S9.4: after 1,000 producers and one append past their expiry, the handle's cache holds 1 entry."""
    name = topic({"producer.id.expiration.ms": EXPIRATION})
    clock = FakeClock(T0)
    log = open_partition(root, name, 0, clock=clock)
    log.log_end_offset()
    log.producer_entry(0)  # the cache starts on the empty partition: it folds every row
    _commit_producers(log, range(1, 1001), T0)
    log.refresh()
    assert log.producer_entry(500).last_offset == 499
    assert len(log._producer_index) == 1000
    clock.now_ms = T0 + EXPIRATION + 1
    log.append(one(), BatchHeader(5000, 0, 0))
    assert len(log._producer_index) == 1
    # Every dropped producer is unknown without a read: it was expired when dropped and the clock has not gone back.
    reads = count_reads(log)
    refused(log, UnknownProducerId, BatchHeader(500, 0, 1))
    assert reads == []


def test_S9_4_txn_actions_stay_bounded_whatever_the_producer_count(root, topic):
    """S9.4: commits and checkpoints carry the LEO `txn` only, not one per producer (before: two per producer)."""
    name = topic({"checkpoint.interval.commits": 5})
    log = open_partition(root, name, 0)
    versions = []
    for pid in range(12):
        versions.append(log.append(one(), BatchHeader(pid, 0, 0, is_transactional=pid % 3 == 0), transaction=_UNVERIFIED).version)
        if pid % 3 == 0:
            versions.append(log.append_marker(pid, 1, ControlType.ABORT).version)
    for version in versions:
        text = log.table.io.read(log.table.child_uri(f"_delta_log/{version:020d}.json")).decode()
        txns = [json.loads(line)["txn"]["appId"] for line in text.splitlines() if '"txn"' in line]
        assert txns == [LOG_END_OFFSET_APP_ID]
    pointer = json.loads(log.table.io.read(log.table.child_uri("_delta_log/_last_checkpoint")))
    assert pointer["version"] >= 10
    checkpoint = pq.read_table(
        io.BytesIO(log.table.io.read(log.table.child_uri(f"_delta_log/{pointer['version']:020d}.checkpoint.parquet")))
    )
    app_ids = [txn["appId"] for txn in checkpoint.column("txn").to_pylist() if txn and txn["appId"]]
    assert app_ids == [LOG_END_OFFSET_APP_ID]


def count_reads(log: PartitionLog) -> list[str]:
    """Record the data files the handle reads from now on (a counter around Table.read_file, no mock)."""
    reads: list[str] = []
    read_file = log.table.read_file

    def counted(entry, *args, **kwargs):
        reads.append(entry.path)
        return read_file(entry, *args, **kwargs)

    log.table.read_file = counted
    return reads


def test_S9_4_new_producer_id_decided_without_reading_data(root, topic):
    """S9.4: an id above every active file's max producer id has no entry: decided from the statistics, no read."""
    name = topic()
    log = open_partition(root, name, 0)
    for pid in (3, 4, 5):
        log.append(one(), BatchHeader(pid, 0, 0))
    cold = open_partition(root, name, 0)
    reads = count_reads(cold)
    assert cold.append(one(), BatchHeader(6, 0, 0)).base_offset == 3
    refused(cold, UnknownProducerId, BatchHeader(9, 0, 1))
    assert reads == []
    # An existing id, cold: the newest file covering it is one batch, whose add action carries its entry: no read.
    other = open_partition(root, name, 0)
    reads = count_reads(other)
    refused(other, OutOfOrderSequence, BatchHeader(4, 1, 5))  # a new epoch must start at 0: no batch search
    assert reads == []
    # Merged files carry no entry: the newest file covering the id is read, and no other.
    assert compact(log.table, PARTITION_ORDER, fan_in=2) is not None
    merged = open_partition(root, name, 0)
    reads = count_reads(merged)
    refused(merged, OutOfOrderSequence, BatchHeader(4, 1, 5))
    assert len(reads) == 1 and all(
        entry.min_producer_id <= 4 <= entry.max_producer_id for entry in partition_files(merged.table) if entry.path in reads
    )


def test_S3_5_a_handle_following_another_producer_reads_none_of_its_batches(root, topic):
    """S3.5, S9.4: a handle whose snapshot moves past other producers' appends folds their entries from the add
    actions of their files (one batch each), reading no data; the entries equal those read from the rows."""
    name = topic()
    mine = open_partition(root, name, 0)
    mine.append(one(), BatchHeader(1, 0, 0))
    others = open_partition(root, name, 0)
    others.append(one(), BatchHeader(2, 0, 0))
    others.append(one(), BatchHeader(3, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    others.append(one(), BatchHeader(2, 0, 1))
    others.append_marker(3, 1, ControlType.ABORT)
    others.append(one(), BatchHeader())  # no producer id: its statistics say so
    reads = count_reads(mine)
    assert mine.append(one(), BatchHeader(1, 0, 1)).base_offset == 6
    assert reads == []
    # The same entries as the rows give, each file read by another handle and folded in offset order (producer_state.fold).
    disk = open_partition(root, name, 0).table
    from_rows = {}
    for entry in partition_files(disk):
        from_rows.update(fold(disk.read_file(entry, STATE_COLUMNS), entry.modification_time_ms))
    tagged = {pid: mine.producer_entry(pid) for pid in (1, 2, 3)}
    assert tagged == {pid: from_rows[pid] for pid in (1, 2, 3)}
    assert tagged[3] is not None and not tagged[3].transaction_open and tagged[3].producer_epoch == 1
    assert tagged[2] is not None and tagged[2].last_sequence == 1


def test_S9_4_producer_whose_rows_are_gone_is_unknown(root, topic):
    """S9.4: once the log start offset passes a producer's last row, it is unknown (Kafka before KIP-360)."""
    name = topic()
    log = open_partition(root, name, 0)
    log.append(one(), BatchHeader(1, 0, 0))
    log.append(one(), BatchHeader(2, 0, 0))
    refused(log, OutOfOrderSequence, BatchHeader(1, 0, 3))
    log.append(one(b"start moves"), app_versions={LOG_START_OFFSET_APP_ID: 1})
    for handle in (log, open_partition(root, name, 0)):
        assert handle.producer_entry(1) is None and handle.producer_entry(2).last_offset == 1
        refused(handle, UnknownProducerId, BatchHeader(1, 0, 1))
    assert log.append(one(), BatchHeader(2, 0, 1)).base_offset == 3


def test_S9_4_entries_survive_key_compaction_that_keeps_each_producers_last_batch(root, topic):
    """S9.4, S9.3: a compacted file holds fewer rows than its offset range; a handle behind it catches up across it."""
    name = topic()
    log = open_partition(root, name, 0)
    behind = open_partition(root, name, 0)
    assert behind.producer_entry(1) is None  # its cache is at offset 0
    log.append(one(), BatchHeader(1, 0, 0))
    log.append(one(), BatchHeader(1, 0, 1))
    log.append(one(), BatchHeader(2, 0, 0))
    log.refresh()
    kept = log.fetch(0, max_records=10).rows.filter(pc.field("offset") > 0)  # producer 1's first batch goes
    log.table.rewrite(removed=partition_files(log.table), added=[(kept, {"offset": (0, 2)})], data_change=False)
    for handle in (behind, open_partition(root, name, 0)):
        handle.refresh()
        assert handle.producer_entry(1).last_offset == 1 and handle.producer_entry(2).last_offset == 2
    assert behind.append(one(), BatchHeader(1, 0, 2)).base_offset == 3
    refused(open_partition(root, name, 0), OutOfOrderSequence, BatchHeader(2, 0, 5))


def test_S9_4_a_merged_file_keeps_its_newest_sources_time_so_idle_producers_still_expire(root, topic):
    """S9.4: compaction's merged file takes the newest modificationTime of the files it replaces, not the wall clock.

    Producer 1's last append is at T0 and producer 2's at T0 + EXPIRATION / 2; once both files are merged, a cold
    handle at one ms past EXPIRATION after producer 2's append finds producer 1 unknown (had the merge taken the
    time of its own commit, producer 1 would look as young as the compaction).
    """

    name = topic({"producer.id.expiration.ms": EXPIRATION})
    clock = FakeClock(T0)
    log = open_partition(root, name, 0, clock=clock)
    log.append(one(), BatchHeader(1, 0, 0))
    clock.now_ms = T0 + EXPIRATION // 2
    log.append(one(), BatchHeader(2, 0, 0))
    assert compact(log.table, PARTITION_ORDER, fan_in=2) is not None
    merged = partition_files(log.table)
    assert len(merged) == 1 and merged[0].modification_time_ms == T0 + EXPIRATION // 2
    clock.now_ms = T0 + EXPIRATION // 2 + EXPIRATION + 1
    cold = open_partition(root, name, 0, clock=clock)
    refused(cold, UnknownProducerId, BatchHeader(1, 0, 1))
    refused(cold, UnknownProducerId, BatchHeader(2, 0, 1))
