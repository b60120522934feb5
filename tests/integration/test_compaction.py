"""Compaction by key on real partition tables (S9.3, S3.5, S5.1, S5.4, S8.2): what a compacted topic keeps,
and that every reader still reads it, from every offset, across the gaps."""

from __future__ import annotations

import multiprocessing

import pytest

from lakelog.errors import OutOfOrderSequence
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, BatchHeader, ControlType, PartitionLog, open_partition, payload_table
from lakelog.log.compaction import compact_partition
from lakelog.log.scan import LATEST, plan_scan
from lakelog.log.verification import _UNVERIFIED

pytestmark = pytest.mark.roots("local", "s3")

T0 = 1_700_000_000_000
RETENTION_MS = 60_000
COMPACT = {"cleanup.policy": "compact", "delete.retention.ms": RETENTION_MS}


def keyed(*pairs: tuple[str, str | None], at_ms: int | None = None):
    """A batch of (key, value) records, stamped `at_ms` (None: the append's time)."""
    keys = [key.encode() for key, _ in pairs]
    values = [None if value is None else value.encode() for _, value in pairs]
    return payload_table(values, keys=keys, timestamps_ms=None if at_ms is None else [at_ms] * len(pairs))


def rows(log: PartitionLog, start: int | None = None, isolation_level: str = READ_UNCOMMITTED, max_records: int = 3):
    """(offset, key, value, control) of every row from `start` (the log start) on, paging with next_offset."""
    out = []
    offset = log.log_start_offset() if start is None else start
    end = log.last_stable_offset() if isolation_level == READ_COMMITTED else log.high_watermark()
    while offset < end:
        fetched = log.fetch(offset, max_records=max_records, isolation_level=isolation_level)
        assert fetched.next_offset > offset
        out += [(row["offset"], row["key"], row["value"], row["control"]) for row in fetched.rows.to_pylist()]
        offset = fetched.next_offset
    assert offset == end
    return out


def latest_by_key(found):
    latest = {}
    for offset, key, value, control in found:
        if control is None:
            latest[key] = (offset, value)
    return latest


def test_S9_3_compaction_keeps_offsets_and_the_last_value_per_key_and_reads_across_gaps_from_every_offset(root, topic):
    name = topic(COMPACT)
    log = open_partition(root, name, 0)
    for n in range(12):
        log.append(keyed((f"k{n % 3}", f"v{n}"), (f"k{n % 4}", f"w{n}")))
    before = rows(log)
    start, end = log.log_start_offset(), log.log_end_offset()

    result = compact_partition(log, T0)
    assert result is not None and result.records_after < result.records_before

    cold = open_partition(root, name, 0)  # a new process: its transaction index folds across the gaps
    after = rows(cold)
    assert (cold.log_start_offset(), cold.log_end_offset(), cold.last_stable_offset()) == (start, end, end)
    assert all(row in before for row in after), "kept rows keep their offsets (S1.1)"
    assert latest_by_key(after) == latest_by_key(before)
    assert len(after) == len(latest_by_key(before))
    # S5.4: a reader from any offset, either isolation level, gets exactly the kept rows from there on.
    for offset in range(start, end + 1):
        expected = [row for row in after if row[0] >= offset]
        assert rows(cold, offset) == expected
        assert rows(cold, offset, READ_COMMITTED, max_records=1) == expected
    # The Spark source's plan (lakelog.log.scan) splits and reads the compacted range from every start too.
    for offset in range(start, end + 1):
        [scan] = plan_scan(root, name, READ_COMMITTED, {0: offset}, LATEST)
        for piece in scan.split(1):
            assert piece.start_offset < piece.end_offset or piece.start_offset == end
        read = [row["offset"] for chunk in scan.read(max_bytes=1) for row in chunk.to_pylist()]
        assert read == [row[0] for row in after if row[0] >= offset]
    # S8.2: a second pass finds nothing to do and commits nothing; new records below the LSO make it due again.
    version = cold.version
    assert compact_partition(cold, T0) is None and cold.version == version
    cold.append(keyed(("k0", "new")))
    cold.append(keyed(("k9", "new")))
    assert compact_partition(cold, T0) is not None
    assert latest_by_key(rows(cold))[b"k0"] == (end, b"new")


def test_S9_3_a_tombstone_stays_for_delete_retention_ms_then_goes(root, topic):
    name = topic(COMPACT)
    log = open_partition(root, name, 0)
    log.append(keyed(("a", "1"), ("b", "1"), at_ms=T0))
    log.append(keyed(("a", None), at_ms=T0))  # the tombstone of a
    log.append(keyed(("b", "2"), at_ms=T0))
    assert compact_partition(log, T0 + RETENTION_MS) is not None
    assert [(key, value) for _, key, value, _ in rows(log)] == [(b"a", None), (b"b", b"2")]
    assert compact_partition(log, T0 + RETENTION_MS) is None
    assert compact_partition(log, T0 + RETENTION_MS + 1) is not None
    assert [(key, value) for _, key, value, _ in rows(log)] == [(b"b", b"2")]


def test_S9_3_S5_1_aborted_rows_go_committed_stay_and_an_open_transaction_is_not_touched(root, topic):
    name = topic(COMPACT)
    log = open_partition(root, name, 0)
    epochs = {1: 0, 2: 0, 3: 0}

    def txn(pid: int, sequence: int, *pairs):
        return log.append(
            keyed(*pairs), BatchHeader(pid, epochs[pid], sequence, is_transactional=True), transaction=_UNVERIFIED
        ).base_offset

    def end(pid: int, control: ControlType):
        epochs[pid] += 1
        return log.append_marker(pid, epochs[pid], control).base_offset

    txn(1, 0, ("a", "committed-1"), ("b", "committed-1"))
    end(1, ControlType.COMMIT)
    txn(2, 0, ("a", "aborted"), ("c", "aborted"))
    end(2, ControlType.ABORT)
    log.append(keyed(("b", "plain")))
    open_first = txn(3, 0, ("a", "open"))
    log.append(keyed(("a", "after-open")))
    committed_before = rows(log, isolation_level=READ_COMMITTED)
    above_lso = [row for row in rows(log) if row[0] >= open_first]
    assert log.last_stable_offset() == open_first

    assert compact_partition(log, T0) is not None
    cold = open_partition(root, name, 0)
    kept = rows(cold)
    assert [row for row in kept if row[0] >= open_first] == above_lso, "nothing at or above the LSO changes"
    values = [value for _, _, value, _ in kept]
    assert b"aborted" not in values
    assert b"committed-1" in values  # a's committed value: the aborted a after it never hid it
    assert cold.last_stable_offset() == open_first
    assert rows(cold, isolation_level=READ_COMMITTED) == [row for row in committed_before if row in kept]
    assert latest_by_key(rows(cold, isolation_level=READ_COMMITTED)) == latest_by_key(committed_before)
    # The committed transaction's marker stays with its kept row; the aborted one's went with its rows
    # unless it is producer 2's last marker (its state: the bumped epoch, S3.5).
    markers = [(offset, control) for offset, _, _, control in kept if control is not None]
    assert (2, "COMMIT") in markers


def test_S3_5_a_producers_last_batch_survives_compaction_whole(root, topic):
    name = topic(COMPACT)
    log = open_partition(root, name, 0)
    pid, sequence = 42, 0
    for n in range(4):
        log.append(keyed(("a", f"{n}"), ("b", f"{n}"), ("a", f"{n}!")), BatchHeader(pid, 0, sequence))
        sequence += 3
    last = log.append(keyed(("z", "last")), BatchHeader(pid, 0, sequence))
    log.append(keyed(("a", "other"), ("b", "other"), ("z", "other")))  # supersedes every key of pid 42
    assert compact_partition(log, T0) is not None

    cold = open_partition(root, name, 0)
    assert [(offset, value) for offset, _, value, _ in rows(cold) if offset == last.base_offset] == [(last.base_offset, b"last")]
    # A retry of the last batch is still found (S3.2), and the next sequence is still the next one.
    retry = cold.append(keyed(("z", "last")), BatchHeader(pid, 0, sequence))
    assert retry.duplicate and retry.base_offset == last.base_offset
    with pytest.raises(OutOfOrderSequence):
        cold.append(keyed(("q", "gap")), BatchHeader(pid, 0, sequence + 5))
    assert not cold.append(keyed(("q", "next")), BatchHeader(pid, 0, sequence + 1)).duplicate


def _append_keyed(root: str, name: str, count: int, queue) -> None:
    log = open_partition(root, name, 0)
    for n in range(count):
        queue.put((log.append(keyed((f"k{n % 5}", f"{n}"))).base_offset, f"k{n % 5}", f"{n}"))
    queue.put(None)


def _compact_until(root: str, name: str, done, counter) -> None:
    log = open_partition(root, name, 0)
    while not done.is_set():
        if compact_partition(log, T0) is not None:
            with counter.get_lock():
                counter.value += 1


@pytest.mark.slow
@pytest.mark.roots("local")
def test_S8_2_appends_from_another_process_during_two_compactors_lose_nothing(root, topic):
    name = topic(COMPACT)
    log = open_partition(root, name, 0)
    for n in range(10):
        log.append(keyed((f"k{n % 5}", f"seed{n}")))
    context = multiprocessing.get_context("spawn")
    queue, done, counter = context.Queue(), context.Event(), context.Value("i", 0)
    writer = context.Process(target=_append_keyed, args=(root, name, 40, queue))
    rival = context.Process(target=_compact_until, args=(root, name, done, counter))  # another sweep
    rival.start()
    writer.start()
    acknowledged, compactions = [], 0
    while True:
        while not queue.empty():
            item = queue.get()
            if item is None:
                break
            acknowledged.append(item)
        else:
            compactions += compact_partition(log, T0) is not None
            continue
        break
    writer.join(60)
    done.set()
    rival.join(60)
    assert writer.exitcode == 0 and rival.exitcode == 0
    compact_partition(log, T0)
    final = open_partition(root, name, 0)
    kept = {offset: (key, value) for offset, key, value, _ in rows(final)}
    assert final.log_end_offset() == 50
    for offset, key, value in acknowledged:
        # Each acknowledged record is either there at its offset or superseded by a later record of its key.
        assert kept.get(offset) == (key.encode(), value.encode()) or any(
            later > offset and found[0] == key.encode() for later, found in kept.items()
        )
    assert {found[0]: found[1] for _, found in sorted(kept.items())} == {f"k{n}".encode(): f"{35 + n}".encode() for n in range(5)}
    assert compactions + counter.value >= 1


def test_S9_4_S9_3_an_expired_producers_last_batch_and_marker_go_and_its_verdict_is_unchanged(root, topic):
    """A producer's last batch and last marker are kept only while its state lives (S9.4): once
    producer.id.expiration.ms has passed since its last append, compaction drops them like any superseded
    row, and the partition's answer for that producer is UnknownProducerId before and after."""
    from helpers import FakeClock

    from lakelog.errors import UnknownProducerId

    expiration = 60_000
    name = topic({**COMPACT, "producer.id.expiration.ms": expiration})
    clock = FakeClock(T0)
    log = open_partition(root, name, 0, clock=clock)
    log.append(keyed(("a", "txn"), at_ms=T0), BatchHeader(7, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    log.append_marker(7, 1, ControlType.COMMIT)
    log.append(keyed(("b", "idempotent"), at_ms=T0), BatchHeader(42, 0, 0))
    log.append(keyed(("a", "new"), ("b", "new"), at_ms=T0))  # supersedes both producers' rows

    assert compact_partition(log, T0 + expiration) is not None  # not past it: their rows carry their state
    assert [value for _, _, value, _ in rows(open_partition(root, name, 0))].count(b"idempotent") == 1
    clock.advance(expiration + 1)
    log.append(keyed(("c", "dirty"), at_ms=clock()))  # something new to clean
    later = open_partition(root, name, 0, clock=clock)
    with pytest.raises(UnknownProducerId):
        later.append(keyed(("q", "retry")), BatchHeader(42, 0, 1))
    assert compact_partition(log, clock()) is not None
    cold = open_partition(root, name, 0, clock=clock)
    kept = rows(cold)
    assert [(key, value) for _, key, value, control in kept if control is None] == [
        (b"a", b"new"),
        (b"b", b"new"),
        (b"c", b"dirty"),
    ]
    assert [control for *_, control in kept if control is not None] == []  # producer 7's marker went with it
    assert cold.producer_entry(7) is None and cold.producer_entry(42) is None
    with pytest.raises(UnknownProducerId):
        cold.append(keyed(("q", "retry")), BatchHeader(42, 0, 1))
