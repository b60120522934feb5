"""Snapshots of coordinator state (lakelog/coordinator/runtime/state_log.py): a cold coordinator, as every new
process, sweep and CLI command starts, loads the newest snapshot and replays only the records after it,
so its cost does not grow with the length of `__transaction_state` or `__consumer_offsets` (S8.2).

Real traffic on real tables: transactional producers that commit and abort, a group member that commits
plain offsets and offsets in transactions (S7.1). The snapshot interval is made small for the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog import Consumer, Producer, TopicPartition
from lakelog.coordinator import group as group_handlers
from lakelog.coordinator import transaction as txn
from lakelog.coordinator.compaction.internal_compaction import compact_internal_logs
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG, GroupCoordinator
from lakelog.coordinator.runtime import state_log
from lakelog.coordinator.runtime.state_log import CoordinatorLog
from lakelog.coordinator.transaction import TransactionMetadata
from lakelog.coordinator.transaction.coordinator import TRANSACTION_STATE_LOG, TransactionCoordinator
from lakelog.log.partition_file import partition_files
from lakelog.log.topics import open_internal_partition
from lakelog.store.delta.sidecar import SIDECAR_DIR

BROKER = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
GROUP = "snapshots"
EVERY = 7


@pytest.fixture(autouse=True)
def small_snapshot_interval(monkeypatch):
    monkeypatch.setattr(state_log, "SNAPSHOT_EVERY_RECORDS", EVERY)


def traffic(lake: str, topic: str, transactions: int) -> None:
    """Transactions of two producers (every third aborted), each with the group's offsets in it, and plain commits.

    Both internal logs are created first with one partition (fixed for the root), so all records meet in it.
    """
    assert TransactionCoordinator(lake, broker_config=BROKER).num_partitions == 1
    assert GroupCoordinator(lake, broker_config=BROKER).num_partitions == 1
    consumer = Consumer(
        {
            "lakelog.root": lake,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 10,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    while not consumer.assignment():
        consumer.consume(10, 0.02)
    producers = [Producer({"lakelog.root": lake, "transactional.id": f"etl-{n}"}) for n in range(2)]
    for producer in producers:
        producer.init_transactions()
    for n in range(transactions):
        producer = producers[n % 2]
        producer.begin_transaction()
        producer.produce(topic, f"v{n}", partition=0)
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, n + 1)], consumer.consumer_group_metadata())
        producer.abort_transaction() if n % 3 == 2 else producer.commit_transaction()
        if n % 4 == 0:
            consumer.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False)
    consumer.close()


def replayed_from_zero(lake: str, internal: str):
    """The state of partition 0 of an internal log replayed from offset 0, with snapshots off."""
    log = open_internal_partition(lake, internal, 0, 1)
    if internal == TRANSACTION_STATE_LOG:
        coordinator_log = CoordinatorLog(
            log, {}, TransactionMetadata.from_row, txn.replay, lambda record: record.transactional_id
        )
    else:
        coordinator_log = CoordinatorLog(
            log,
            group_handlers.GroupState(),
            group_handlers.from_row,
            group_handlers.replay,
            group_handlers.record_key,
            apply_marker=group_handlers.replay_marker,
        )
    return coordinator_log.catch_up()


def cold_log(lake: str, internal: str) -> CoordinatorLog:
    """The log a fresh coordinator (a new process) has after one request: caught up, from its newest snapshot."""
    if internal == TRANSACTION_STATE_LOG:
        coordinator = TransactionCoordinator(lake, broker_config=BROKER)
        coordinator.list_transactions()
    else:
        coordinator = GroupCoordinator(lake, broker_config=BROKER)
        coordinator.list_groups()
    return coordinator._logs[0]


@pytest.mark.parametrize("internal", [TRANSACTION_STATE_LOG, CONSUMER_OFFSETS_LOG])
def test_S8_2_a_cold_coordinator_starts_from_the_newest_snapshot_and_reads_only_the_records_after_it(lake, make_topic, internal):
    topic = make_topic()
    traffic(lake, topic, transactions=12)
    full = replayed_from_zero(lake, internal)
    folder = Path(lake) / internal / "0" / SIDECAR_DIR / "coordinator"
    assert len(list(folder.iterdir())) == 2, "only the two newest snapshots are kept"

    cold = cold_log(lake, internal)
    assert 0 < cold.snapshot_position <= cold.position == cold.log.log_end_offset()
    assert cold.state == full
    # The records below the snapshot are no longer read: make every file wholly below it unreadable.
    table = cold.log.table
    spoiled = [entry for entry in partition_files(table) if entry.max_offset < cold.snapshot_position]
    assert spoiled, "the test needs files below the snapshot"
    for entry in spoiled:
        Path(table.file_path(entry)).write_bytes(b"not parquet")
    assert cold_log(lake, internal).state == full


def test_S8_2_snapshots_that_are_garbage_or_of_another_table_are_skipped(lake, make_topic, monkeypatch):
    topic = make_topic()
    traffic(lake, topic, transactions=9)
    monkeypatch.setattr(state_log, "SNAPSHOT_EVERY_RECORDS", 10**9)  # cold readers load, and write none of their own
    full = replayed_from_zero(lake, TRANSACTION_STATE_LOG)
    folder = Path(lake) / TRANSACTION_STATE_LOG / "0" / SIDECAR_DIR / "coordinator"
    older, newest = sorted(folder.iterdir())
    written = newest.read_bytes()
    assert b'"format":1,' in written and b',"v":1}' in written
    # Garbage, another table's, another format's (issue 12 item 4), or holding a record of a newer version.
    for garbage in (
        b"{not json",
        b'{"table_id": 1}',
        b"[]",
        written.replace(b'"body":[', b'"body":[{"transactional_id":5},'),
        written.replace(b'"format":1,', b'"format":2,'),
        written.replace(b',"v":1}', b',"v":2}', 1),
    ):
        newest.write_bytes(garbage)
        cold = cold_log(lake, TRANSACTION_STATE_LOG)
        assert cold.state == full
        assert cold.snapshot_position == int(older.stem), "the older snapshot is taken instead"
    # Written before snapshots named their format (and records their version): read as format 1.
    newest.write_bytes(written.replace(b'"format":1,', b"").replace(b',"v":1}', b"}"))
    assert cold_log(lake, TRANSACTION_STATE_LOG).snapshot_position == int(newest.stem)
    older.unlink()
    newest.unlink()
    assert cold_log(lake, TRANSACTION_STATE_LOG).state == full  # no snapshot at all: replay from 0


def rows_by_offset(lake: str, internal: str) -> dict[int, dict]:
    log = open_internal_partition(lake, internal, 0, 1)
    rows = log.fetch(0, max_records=1_000_000, max_bytes=1 << 40).rows
    return {row["offset"]: row for row in rows.to_pylist()}


@pytest.mark.parametrize("internal", [TRANSACTION_STATE_LOG, CONSUMER_OFFSETS_LOG])
def test_S9_3_internal_logs_compact_by_record_key_and_replay_to_the_same_state(lake, make_topic, internal):
    topic = make_topic()
    traffic(lake, topic, transactions=12)
    full = replayed_from_zero(lake, internal)
    before = rows_by_offset(lake, internal)
    # A coordinator that read part of the log before the compaction (a long-lived process).
    stale = cold_log(lake, internal)
    stale_position = stale.position

    done = [item for item in compact_internal_logs(lake) if item.log_name == internal]
    assert len(done) == 1 and done[0].error is None
    result = done[0].compaction
    assert result.records_after < result.records_before
    after = rows_by_offset(lake, internal)
    assert len(after) < len(before)
    # S9.3: kept records keep their offsets, and replay of the compacted log gives the state of the whole log.
    assert all(before[offset] == row for offset, row in after.items())
    assert replayed_from_zero(lake, internal) == full
    assert cold_log(lake, internal).state == full
    # S8.2: a second pass right after finds nothing to drop.
    assert [item for item in compact_internal_logs(lake) if item.log_name == internal] == []

    # The coordinators carry on on the compacted log; a stale reader whose position the compaction passed
    # below replays from offset 0 rather than miss the rows that superseded those it read.
    traffic_more = make_topic()
    traffic(lake, traffic_more, transactions=4)
    stale.position = min(stale_position, result.last_offset)
    assert stale.catch_up() == replayed_from_zero(lake, internal)
    assert cold_log(lake, internal).state == replayed_from_zero(lake, internal)


def _commit_offsets(lake: str, commits: int) -> None:
    coordinator = GroupCoordinator(lake, broker_config=BROKER)
    for n in range(commits):
        coordinator.commit_offsets(f"g{n % 3}", "", -1, {("orders", n % 2): (n, "")})


@pytest.mark.slow
def test_S8_2_S9_3_offset_commits_from_another_process_during_internal_compaction_lose_nothing(lake):
    import multiprocessing

    assert GroupCoordinator(lake, broker_config=BROKER).num_partitions == 1
    context = multiprocessing.get_context("spawn")
    writer = context.Process(target=_commit_offsets, args=(lake, 60))
    writer.start()
    compactions = 0
    while writer.is_alive():
        compactions += sum(item.compaction is not None for item in compact_internal_logs(lake))
    writer.join(60)
    assert writer.exitcode == 0
    compact_internal_logs(lake)
    expected = {}
    for n in range(60):
        expected[(f"g{n % 3}", ("orders", n % 2))] = n
    cold = GroupCoordinator(lake, broker_config=BROKER)
    for (group_id, tp), offset in expected.items():
        assert cold.fetch_offsets(group_id, [tp])[tp].offset == offset
    assert replayed_from_zero(lake, CONSUMER_OFFSETS_LOG) == cold._logs[0].state
    assert compactions >= 1
