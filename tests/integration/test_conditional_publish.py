"""Conditional publish on real Delta tables: one test per rule of SEMANTICS.md S2 (an expected offset, decided
on the latest snapshot)."""

from __future__ import annotations

import threading

import pytest
from helpers import table_fingerprint
from partition_log_helpers import all_rows, batch, numbered, refuses

from lakelog.errors import OffsetMismatch, PolicyViolation
from lakelog.log import BatchHeader, open_partition

pytestmark = pytest.mark.roots("local", "s3")


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
