"""Isolation on real Delta tables: the LSO, read_committed and the aborted-transaction index (S5.1-S5.4, S4.8).

One test per rule that makes it fail on purpose: a transaction left open, one
aborted, markers that close nothing, readers that would assume dense offsets.
Transactional batches are written straight to the partition log, markers with
the bumped epoch a coordinator would write.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from helpers import table_fingerprint

from lakelog import Consumer, KafkaError, Producer, TopicPartition
from lakelog.client.types import OFFSET_BEGINNING
from lakelog.coordinator.transaction.coordinator import FAULT_BEFORE_MARKER, TransactionCoordinator
from lakelog.errors import CorruptRecord, InvalidRequest, OffsetOutOfRange
from lakelog.log import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AbortedTransaction,
    BatchHeader,
    ControlType,
    PartitionLog,
    open_partition,
    payload_table,
)
from lakelog.log.partition_file import PARTITION_ORDER, partition_files
from lakelog.log.transactions import TransactionIndex
from lakelog.log.verification import _UNVERIFIED
from lakelog.store import Location
from lakelog.store.delta.sidecar import SIDECAR_DIR
from lakelog.store.upkeep.maintenance import compact, vacuum

pytestmark = pytest.mark.roots("local", "s3")

COMMIT, ABORT = ControlType.COMMIT, ControlType.ABORT


class Writer:
    """Writes one partition as producers and a coordinator would: sequences and epochs kept per producer id."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.epochs: dict[int, int] = {}
        self.sequences: dict[int, int] = {}

    def txn(self, producer_id: int, *texts: str) -> int:
        """A transactional batch of `producer_id`; returns its base offset."""
        epoch, sequence = self.epochs.setdefault(producer_id, 0), self.sequences.get(producer_id, 0)
        header = BatchHeader(producer_id, epoch, sequence, is_transactional=True)
        self.sequences[producer_id] = sequence + len(texts)
        return self.log.append(values(*texts), header, transaction=_UNVERIFIED).base_offset

    def plain(self, *texts: str) -> int:
        return self.log.append(values(*texts)).base_offset

    def marker(self, producer_id: int, control: ControlType) -> int:
        """The end of `producer_id`'s transaction, with the bumped epoch; returns the marker's offset."""
        epoch = self.epochs.get(producer_id, 0) + 1
        self.epochs[producer_id] = epoch
        self.sequences[producer_id] = 0
        return self.log.append_marker(producer_id, epoch, control).base_offset


def values(*texts: str):
    return payload_table([text.encode() for text in texts])


def read(log: PartitionLog, isolation_level: str, **budget: int) -> list[tuple[int, str]]:
    """(offset, value) of every row a reader gets from the log start on, paging with next_offset."""
    out = []
    offset = log.log_start_offset()
    end = log.last_stable_offset() if isolation_level == READ_COMMITTED else log.high_watermark()
    while offset < end:
        fetched = log.fetch(offset, isolation_level=isolation_level, **budget)
        assert fetched.next_offset > offset
        out += [(row["offset"], row["value"].decode() if row["value"] else row["control"]) for row in fetched.rows.to_pylist()]
        offset = fetched.next_offset
    assert offset == end
    return out


def reopened(log: PartitionLog) -> PartitionLog:
    """The same partition as a new process opens it: its transaction state is rebuilt from the table alone."""
    root = log.table.uri.rsplit("/", 3)[0]  # <root>/topics/<topic>/<partition>
    return open_partition(root, log.topic, log.partition)


def snapshot_folder(log: PartitionLog) -> Location:
    """Where the partition's transaction index keeps its snapshots (a sidecar folder beside the table)."""
    return log.table.location / SIDECAR_DIR / "transactions"


def snapshot_names(log: PartitionLog) -> list[str]:
    return sorted(entry.name for entry in snapshot_folder(log).list() if not entry.is_dir)


# -- S5.1 ------------------------------------------------------------------------------------


def test_S5_1_an_open_transaction_holds_the_lso_until_its_marker(root, topic):
    """S5.1: LSO = first offset of the earliest open transaction, else the HW; it never moves backwards."""
    log = open_partition(root, topic(), 0)
    w = Writer(log)
    seen = [log.last_stable_offset()]
    assert seen == [0]
    w.plain("n0")
    seen.append(log.last_stable_offset())
    assert seen[-1] == 1 == log.high_watermark()
    w.txn(7, "a1", "a2")  # 1-2: producer 7 opens at 1
    w.plain("n3")
    w.txn(8, "b4")  # producer 8 opens at 4
    w.txn(7, "a5")
    seen.append(log.last_stable_offset())
    assert seen[-1] == 1 and log.high_watermark() == 6
    assert log.open_transactions() == {7: 1, 8: 4}
    assert reopened(log).last_stable_offset() == 1
    w.marker(9, COMMIT)  # 6: producer 9 has no open transaction here: the marker closes nothing
    seen.append(log.last_stable_offset())
    assert seen[-1] == 1
    w.marker(7, COMMIT)  # 7: the LSO moves on to producer 8's transaction, not to the HW
    seen.append(log.last_stable_offset())
    assert seen[-1] == 4 and log.high_watermark() == 8
    w.marker(8, ABORT)  # 8: nothing is open: LSO = HW
    seen.append(log.last_stable_offset())
    assert seen[-1] == 9 == log.high_watermark()
    assert log.open_transactions() == {}
    w.txn(8, "b9")  # a new transaction of 8 opens at the HW: the LSO does not go back
    seen.append(log.last_stable_offset())
    assert seen[-1] == 9
    assert seen == sorted(seen)
    assert reopened(log).last_stable_offset() == 9 and reopened(log).open_transactions() == {8: 9}


def test_S5_1_the_lso_of_a_reader_follows_other_writers(root, topic):
    """S5.1: a reader's LSO is that of its snapshot, and moves on once it reloads after the marker."""
    name = topic()
    writer, reader = Writer(open_partition(root, name, 0)), open_partition(root, name, 0)
    writer.txn(3, "x")
    reader.refresh()
    assert reader.last_stable_offset() == 0 and reader.high_watermark() == 1
    writer.marker(3, COMMIT)
    assert reader.last_stable_offset() == 0  # the snapshot in hand still has the transaction open
    reader.refresh()
    assert reader.last_stable_offset() == 2


# -- S5.2 ------------------------------------------------------------------------------------


def test_S5_2_read_committed_never_returns_open_or_aborted_rows_or_markers(root, topic):
    """S5.2: read_committed = data rows below the LSO minus aborted ones; read_uncommitted = every row below the HW."""
    log = open_partition(root, topic(), 0)
    w = Writer(log)
    w.plain("n0")
    w.txn(1, "committed1", "committed2")  # 1-2
    w.txn(2, "aborted3")  # 3
    w.marker(1, COMMIT)  # 4
    w.txn(2, "aborted5")  # 5
    w.marker(2, ABORT)  # 6
    w.txn(3, "open7")  # 7: open, holds the LSO
    w.plain("n8")  # 8: not transactional, but above the LSO
    assert read(log, READ_COMMITTED) == [(0, "n0"), (1, "committed1"), (2, "committed2")]
    assert read(log, READ_UNCOMMITTED) == [
        (0, "n0"),
        (1, "committed1"),
        (2, "committed2"),
        (3, "aborted3"),
        (4, "COMMIT"),
        (5, "aborted5"),
        (6, "ABORT"),
        (7, "open7"),
        (8, "n8"),
    ]
    w.marker(3, COMMIT)  # 9
    committed = [(0, "n0"), (1, "committed1"), (2, "committed2"), (7, "open7"), (8, "n8")]
    assert read(log, READ_COMMITTED) == committed
    # The aborted rows never come back: not after more commits, not to a new process, not after compaction.
    w.plain("n10")
    assert read(reopened(log), READ_COMMITTED) == committed + [(10, "n10")]
    assert compact(log.table, PARTITION_ORDER, fan_in=2) is not None
    assert read(log, READ_COMMITTED) == read(reopened(log), READ_COMMITTED) == committed + [(10, "n10")]


def test_S5_2_isolation_level_is_checked_and_a_bad_one_writes_nothing(root, topic):
    log = open_partition(root, topic(), 0)
    Writer(log).txn(1, "a")
    before = table_fingerprint(log.table.uri)
    for level in ("READ_COMMITTED", "committed", None, 1):
        with pytest.raises(InvalidRequest):
            log.fetch(0, isolation_level=level)
    with pytest.raises(OffsetOutOfRange):
        log.fetch(-1, isolation_level=READ_COMMITTED)
    with pytest.raises(InvalidRequest):
        log.aborted_transactions(-1, 5)
    assert table_fingerprint(log.table.uri) == before


# -- S5.3 ------------------------------------------------------------------------------------


def test_S5_3_the_aborted_index_lists_every_aborted_transaction(root, topic):
    """S5.3: (PID, first offset, marker offset) for every abort, and nothing for commits or markers closing nothing."""
    log = open_partition(root, topic(), 0)
    w = Writer(log)
    w.txn(1, "a0")  # 0: 1 opens
    w.txn(2, "b1")  # 1: 2 opens
    w.txn(1, "a2")
    w.marker(1, ABORT)  # 3
    w.marker(3, ABORT)  # 4: 3 has nothing open: no entry
    w.txn(2, "b5")
    w.marker(2, COMMIT)  # 6
    w.txn(1, "a7", "a8")  # 7: 1 opens again
    w.marker(1, ABORT)  # 9
    w.marker(1, ABORT)  # 10: a second marker closes nothing
    everything = [AbortedTransaction(1, 0, 3), AbortedTransaction(1, 7, 9)]
    assert log.aborted_transactions(0, log.high_watermark()) == everything
    assert reopened(log).aborted_transactions(0, 11) == everything
    # A range gets the transactions whose [first, marker] it meets, as a one-pass reader of it needs.
    assert log.aborted_transactions(3, 4) == [AbortedTransaction(1, 0, 3)]
    assert log.aborted_transactions(4, 7) == []
    assert log.aborted_transactions(8, 9) == [AbortedTransaction(1, 7, 9)]
    assert log.aborted_transactions(10, 11) == []
    assert read(log, READ_COMMITTED) == [(1, "b1"), (5, "b5")]


# -- S5.4 ------------------------------------------------------------------------------------


def test_S5_4_read_committed_offsets_have_gaps_and_next_offset_skips_them(root, topic):
    """S5.4: a reader that assumed dense offsets would re-read or stall; next_offset moves past filtered rows."""
    log = open_partition(root, topic(), 0)
    w = Writer(log)
    w.txn(1, "a0", "a1", "a2")
    w.marker(1, ABORT)  # 3
    w.txn(1, "c4")
    w.marker(1, COMMIT)  # 5
    w.plain("n6")
    first = log.fetch(0, max_records=1, isolation_level=READ_COMMITTED)
    assert first.rows.column("offset").to_pylist() == [4] and first.next_offset == 5
    second = log.fetch(first.next_offset, max_records=1, isolation_level=READ_COMMITTED)
    assert second.rows.column("offset").to_pylist() == [6] and second.next_offset == 7
    # A byte budget that fits one file: the aborted batch comes back as no rows and a position past it.
    skipped = log.fetch(0, max_bytes=1, isolation_level=READ_COMMITTED)
    assert skipped.rows.num_rows == 0 and skipped.next_offset == 3
    assert read(log, READ_COMMITTED, max_records=1) == [(4, "c4"), (6, "n6")]
    assert read(log, READ_COMMITTED, max_bytes=1) == [(4, "c4"), (6, "n6")]
    # At or past the LSO there is nothing to read yet: the position stays.
    w.txn(2, "open")
    empty = log.fetch(7, isolation_level=READ_COMMITTED)
    assert empty.rows.num_rows == 0 and empty.next_offset == 7
    assert log.fetch(8, isolation_level=READ_COMMITTED).next_offset == 8


# -- S4.8 ------------------------------------------------------------------------------------


def committed_values(root: str, name: str, partition: int) -> list[str]:
    return [value for _, value in read(open_partition(root, name, partition), READ_COMMITTED)]


def test_S4_8_a_transaction_is_seen_whole_across_partitions_or_not_at_all(root, topic):
    """S4.8: read_committed sees all rows of a committed transaction in every partition, none of an aborted one.

    The producer dies after the first of two commit markers: the partition
    without a marker shows none of the transaction (its LSO holds) until the next
    init rolls the commit forward; then both show all of it. An aborted
    transaction is never seen in either.
    """
    name = topic(partitions=2)
    conf = {"lakelog.root": root, "transactional.id": "s48"}
    dying = Producer(conf)
    dying.init_transactions()
    dying.begin_transaction()
    for partition in (0, 1):
        for i in range(3):
            dying.produce(name, value=f"c{partition}{i}", partition=partition)
    dying.flush()
    assert committed_values(root, name, 0) == committed_values(root, name, 1) == []

    # Markers are written in parallel: dying before the second one leaves exactly the first.
    def crash_before_second_marker(point, details):
        if point == FAULT_BEFORE_MARKER and details.get("index") == 1:
            raise RuntimeError("the producer dies here")

    dying._coordinator = TransactionCoordinator(root, fault=crash_before_second_marker)
    with pytest.raises(RuntimeError):
        dying.commit_transaction()
    marked = [p for p in (0, 1) if open_partition(root, name, p).last_stable_offset() == 4]
    unmarked = 1 - marked[0]
    assert len(marked) == 1
    assert committed_values(root, name, marked[0]) == [f"c{marked[0]}{i}" for i in range(3)]
    assert committed_values(root, name, unmarked) == []  # not part of it: none of it

    successor = Producer(conf)
    successor.init_transactions()  # rolls the decided commit forward (S4.2)
    assert [committed_values(root, name, p) for p in (0, 1)] == [[f"c{p}{i}" for i in range(3)] for p in (0, 1)]

    successor.begin_transaction()
    for partition in (0, 1):
        successor.produce(name, value=f"x{partition}", partition=partition)
    successor.flush()
    successor.abort_transaction()
    for partition in (0, 1):
        log = open_partition(root, name, partition)
        assert log.last_stable_offset() == log.high_watermark()
        assert committed_values(root, name, partition) == [f"c{partition}{i}" for i in range(3)]
        assert [value for _, value in read(log, READ_UNCOMMITTED) if value.startswith("x")] == [f"x{partition}"]

    with Consumer({"lakelog.root": root, "enable.partition.eof": True}) as consumer:
        consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in (0, 1)])
        seen, ends = [], 0
        while ends < 2:
            message = consumer.poll(5.0)
            assert message is not None
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                ends += 1
            else:
                seen.append(message.value().decode())
    assert sorted(seen) == sorted(f"c{p}{i}" for p in (0, 1) for i in range(3))


# -- snapshots of the transaction index: a cache beside the table, never state ----------------


def history_with_aborts(log: PartitionLog, transactions: int) -> Writer:
    """Transactions of two producers, every third aborted; producer 2's last one left open."""
    w = Writer(log)
    for n in range(transactions):
        producer_id = 1 + n % 2
        w.txn(producer_id, f"t{n}a", f"t{n}b")
        if n < transactions - 1 or producer_id == 1:
            w.marker(producer_id, ABORT if n % 3 == 2 else COMMIT)
    return w


def index_state(index: TransactionIndex) -> tuple:
    return index.position, index.last_stable_offset(), index.open_transactions(), index.aborted_transactions(0, 1 << 62)


def test_S5_3_a_cold_index_starts_from_the_newest_snapshot_and_reads_only_the_rows_after_it(root, topic):
    log = open_partition(root, topic(), 0)
    history_with_aborts(log, 8)
    writer_index = TransactionIndex(snapshot_every_offsets=10)
    writer_index.catch_up(log.table, log.log_end_offset())
    assert writer_index.snapshot_position == log.log_end_offset()
    Writer(log).plain("after")
    # The rows below the snapshot are no longer needed: make them unreadable, and a cold index still gets it right.
    for entry in partition_files(log.table)[:-1]:
        log.table.io.write(log.table.file_path(entry), b"not parquet")
    cold = TransactionIndex(snapshot_every_offsets=10)
    cold.catch_up(log.table, log.log_end_offset())
    writer_index.catch_up(log.table, log.log_end_offset())
    assert index_state(cold) == index_state(writer_index)
    assert cold.aborted_transactions(0, 1 << 62) == [AbortedTransaction(1, 6, 8), AbortedTransaction(2, 15, 17)]
    with pytest.raises(CorruptRecord):  # without the snapshot, the whole log must be read
        TransactionIndex(snapshot_every_offsets=0).catch_up(log.table, log.log_end_offset())


def test_S5_3_snapshots_that_are_unreadable_from_another_table_or_ahead_are_ignored(root, topic):
    first, second = open_partition(root, topic(), 0), open_partition(root, topic(), 0)
    history_with_aborts(first, 8)  # LEO 23
    history_with_aborts(second, 6)  # LEO 17
    for log in (first, second):  # an index following every offset writes snapshots at 5, 10, 15, ...
        index = TransactionIndex(snapshot_every_offsets=5)
        for end in range(1, log.log_end_offset() + 1):
            index.catch_up(log.table, end)
    own, foreign, io = snapshot_folder(second), snapshot_folder(first), second.table.io
    assert snapshot_names(second) == [f"{10:020d}.json", f"{15:020d}.json"]
    rebuilt = TransactionIndex(snapshot_every_offsets=0)
    rebuilt.catch_up(second.table, second.log_end_offset())
    # The newest snapshot at or below the LEO is another table's, and one beside it is garbage: both are ignored.
    io.write((own / f"{15:020d}.json").uri, io.read((foreign / f"{15:020d}.json").uri))
    for garbage in (b"{not json", b'{"table_id": 1}', b"[]"):
        io.write((own / f"{16:020d}.json").uri, garbage)
        cold = TransactionIndex(snapshot_every_offsets=8)  # 17 - 10 < 8: it writes no snapshot of its own
        cold.catch_up(second.table, second.log_end_offset())
        assert index_state(cold) == index_state(rebuilt)
        assert cold.snapshot_position == 10
    # A reader whose snapshot in hand ends before every snapshot takes none (and, 9 < 10, writes none).
    early = TransactionIndex(snapshot_every_offsets=10)
    early.catch_up(second.table, 9)
    assert (early.snapshot_position, early.position) == (0, 9)


def test_S5_3_only_the_newest_snapshots_are_kept_and_delta_never_sees_them(root, topic):
    log = open_partition(root, topic(), 0)
    w = Writer(log)
    index = TransactionIndex(snapshot_every_offsets=2)
    for n in range(6):
        w.txn(1, f"v{n}")
        w.marker(1, ABORT)
        index.catch_up(log.table, log.log_end_offset())
    assert snapshot_names(log) == [f"{10:020d}.json", f"{12:020d}.json"]
    handle = DeltaTable(log.table.uri, storage_options=log.table.io.delta_options())
    assert handle.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False) == []
    assert vacuum(log.table, dry_run=True) == []
    assert handle.to_pyarrow_table().num_rows == 12
