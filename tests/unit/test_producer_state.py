"""Pure tests of the idempotence check (S3.1-S3.5): lakelog/log/producer_state.py, no tables."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequence, ProducerFenced, UnknownProducerId
from lakelog.log.producer_state import (
    ProducerEntry,
    Verdict,
    after_append,
    check_batch,
    out_of_order,
    state_app_id,
    time_app_id,
)
from lakelog.log.records import MAX_EPOCH, MAX_SEQUENCE, BatchHeader, last_sequence, next_sequence

NOW = 1_700_000_000_000
DAY = 86_400_000
INT64_MAX = 2**63 - 1

producer_ids = st.integers(min_value=0, max_value=2**62)
epochs = st.integers(min_value=0, max_value=MAX_EPOCH)
sequences = st.integers(min_value=0, max_value=MAX_SEQUENCE)
last_sequences = st.integers(min_value=-1, max_value=MAX_SEQUENCE)
counts = st.integers(min_value=1, max_value=10_000)
timestamps = st.integers(min_value=0, max_value=2**53)


def entry(epoch: int = 0, last: int = 4, pid: int = 1, at: int = NOW) -> ProducerEntry:
    return ProducerEntry(producer_id=pid, producer_epoch=epoch, last_sequence=last, last_timestamp_ms=at)


def check(current: ProducerEntry | None, epoch: int, base: int, count: int = 1, *, pid: int = 1,
          transactional: bool = False, now: int = NOW, expiration: int = DAY) -> Verdict:
    header = BatchHeader(producer_id=pid, producer_epoch=epoch, base_sequence=base, is_transactional=transactional)
    return check_batch(current, header, count, now, expiration)


# -- ProducerEntry encode/decode (S3.5: state lives in two Delta txn versions) --


@given(pid=producer_ids, epoch=epochs, last=last_sequences, at=timestamps)
@example(pid=0, epoch=0, last=-1, at=0)
@example(pid=2**62, epoch=MAX_EPOCH, last=MAX_SEQUENCE, at=2**53)
def test_S3_5_entry_round_trips_through_app_versions(pid, epoch, last, at):
    """An entry written as txn versions decodes to the same entry; versions fit a Delta int64."""
    original = ProducerEntry(pid, epoch, last, at)
    versions = original.app_versions()
    assert set(versions) == {state_app_id(pid), time_app_id(pid)}
    assert all(0 <= version <= INT64_MAX for version in versions.values())
    decoded = ProducerEntry.from_app_versions(pid, versions[state_app_id(pid)], versions[time_app_id(pid)])
    assert decoded == original


@given(pid=producer_ids, a=st.tuples(epochs, last_sequences), b=st.tuples(epochs, last_sequences))
def test_S3_5_distinct_entries_encode_to_distinct_state_versions(pid, a, b):
    """(epoch, last sequence) -> state version is injective, so no two states are confused."""
    first = ProducerEntry(pid, a[0], a[1], 0).app_versions()[state_app_id(pid)]
    second = ProducerEntry(pid, b[0], b[1], 0).app_versions()[state_app_id(pid)]
    assert (first == second) == (a == b)


def test_S3_5_no_state_version_decodes_to_no_entry():
    assert ProducerEntry.from_app_versions(7, None, None) is None
    assert ProducerEntry.from_app_versions(7, None, 123) is None


def test_S3_5_missing_time_version_decodes_as_time_zero():
    decoded = ProducerEntry.from_app_versions(7, 3 * 2**32 + 10, None)
    assert decoded == ProducerEntry(7, 3, 9, 0)


def test_app_ids_are_per_producer():
    assert state_app_id(5) != state_app_id(6)
    assert state_app_id(5) != time_app_id(5)


# -- S3.1 sequences start at 0 and wrap at 2^31-1 --


def test_S3_1_first_batch_of_unknown_producer_must_start_at_zero():
    assert check(None, epoch=0, base=0, count=5) is Verdict.APPEND
    with pytest.raises(UnknownProducerId) as raised:
        check(None, epoch=0, base=1)
    assert raised.value.producer_id == 1


@given(base=st.integers(min_value=1, max_value=MAX_SEQUENCE), epoch=epochs)
def test_S3_1_unknown_producer_any_nonzero_start_is_refused(base, epoch):
    with pytest.raises(UnknownProducerId):
        check(None, epoch=epoch, base=base)


def test_S3_1_sequence_wraps_at_max():
    assert next_sequence(MAX_SEQUENCE) == 0
    assert last_sequence(MAX_SEQUENCE, 1) == MAX_SEQUENCE
    assert last_sequence(MAX_SEQUENCE - 1, 5) == 2
    wrapped = after_append(BatchHeader(1, 0, MAX_SEQUENCE - 1), 5, NOW)
    assert wrapped.last_sequence == 2
    assert check(wrapped, epoch=0, base=3) is Verdict.APPEND
    at_max = after_append(BatchHeader(1, 0, MAX_SEQUENCE), 1, NOW)
    assert at_max.last_sequence == MAX_SEQUENCE
    assert check(at_max, epoch=0, base=0) is Verdict.APPEND
    assert check(at_max, epoch=0, base=MAX_SEQUENCE) is Verdict.MAYBE_DUPLICATE


@given(epoch=epochs, base=sequences, count=counts)
def test_S3_1_next_batch_after_any_batch_is_appended(epoch, base, count):
    """after_append then the batch that follows it (wrapping) is always APPEND."""
    current = after_append(BatchHeader(1, epoch, base), count, NOW)
    assert current.last_sequence == (base + count - 1) % 2**31
    follower = (base + count) % 2**31
    assert check(current, epoch=epoch, base=follower, count=3) is Verdict.APPEND


@given(epoch=epochs, last=last_sequences, base=sequences)
def test_S3_3_any_base_other_than_next_is_never_append(epoch, last, base):
    """Same epoch: only next_sequence(last) appends; anything else is a possible duplicate or refused."""
    current = entry(epoch=epoch, last=last)
    expected_next = 0 if last == -1 else next_sequence(last)
    try:
        verdict = check(current, epoch=epoch, base=base)
    except OutOfOrderSequence:
        assert base != expected_next
        return
    assert (verdict is Verdict.APPEND) == (base == expected_next)


def test_S3_3_gap_is_maybe_duplicate_then_out_of_order():
    """A gap is not decided by the pure check (the log must look for the batch); out_of_order names the next."""
    current = entry(epoch=0, last=4)
    assert check(current, epoch=0, base=7) is Verdict.MAYBE_DUPLICATE
    error = out_of_order(current, BatchHeader(1, 0, 7))
    assert isinstance(error, OutOfOrderSequence)
    assert error.expected_sequence == 5
    assert error.producer_id == 1


def test_S3_2_retry_of_last_batch_is_maybe_duplicate():
    current = after_append(BatchHeader(1, 0, 0), 5, NOW)
    assert check(current, epoch=0, base=0, count=5) is Verdict.MAYBE_DUPLICATE


# -- S3.4 epochs --


@given(entry_epoch=st.integers(min_value=1, max_value=MAX_EPOCH), data=st.data())
def test_S3_4_stale_epoch_always_refused(entry_epoch, data):
    """An older epoch is refused whatever its sequence: InvalidProducerEpoch, ProducerFenced if transactional."""
    epoch = data.draw(st.integers(min_value=0, max_value=entry_epoch - 1))
    base = data.draw(sequences)
    last = data.draw(last_sequences)
    transactional = data.draw(st.booleans())
    current = entry(epoch=entry_epoch, last=last)
    expected = ProducerFenced if transactional else InvalidProducerEpoch
    with pytest.raises(expected) as raised:
        check(current, epoch=epoch, base=base, transactional=transactional)
    assert type(raised.value) is expected
    assert raised.value.producer_epoch == entry_epoch


@given(entry_epoch=st.integers(min_value=0, max_value=MAX_EPOCH - 1), last=last_sequences, data=st.data())
def test_S3_4_new_epoch_must_start_at_zero(entry_epoch, last, data):
    epoch = data.draw(st.integers(min_value=entry_epoch + 1, max_value=MAX_EPOCH))
    base = data.draw(st.integers(min_value=1, max_value=MAX_SEQUENCE))
    current = entry(epoch=entry_epoch, last=last)
    assert check(current, epoch=epoch, base=0) is Verdict.APPEND
    with pytest.raises(OutOfOrderSequence) as raised:
        check(current, epoch=epoch, base=base)
    assert raised.value.expected_sequence == 0


def test_S3_4_entry_without_sequence_must_restart_at_zero():
    """An entry with no sequence yet (epoch bumped by a marker) takes only sequence 0 at that epoch."""
    current = entry(epoch=3, last=-1)
    assert check(current, epoch=3, base=0) is Verdict.APPEND
    with pytest.raises(OutOfOrderSequence):
        check(current, epoch=3, base=1)


def test_S3_4_after_append_records_new_epoch():
    bumped = after_append(BatchHeader(1, 4, 0), 2, NOW + 5)
    assert bumped == ProducerEntry(producer_id=1, producer_epoch=4, last_sequence=1, last_timestamp_ms=NOW + 5)
    with pytest.raises(InvalidProducerEpoch):
        check(bumped, epoch=3, base=2)


# -- S3.5 expiry --


@given(expiration=st.integers(min_value=1, max_value=10 * DAY), idle=st.integers(min_value=0, max_value=20 * DAY))
def test_S3_5_expired_entry_is_forgotten(expiration, idle):
    """Idle longer than producer.id.expiration.ms: treated as unknown (old epoch and gaps no longer refused as such)."""
    current = entry(epoch=5, last=9, at=NOW)
    now = NOW + idle
    assert current.is_expired(now, expiration) == (idle > expiration)
    if idle > expiration:
        assert check(current, epoch=2, base=0, now=now, expiration=expiration) is Verdict.APPEND
        with pytest.raises(UnknownProducerId):
            check(current, epoch=5, base=10, now=now, expiration=expiration)
    else:
        assert check(current, epoch=5, base=10, now=now, expiration=expiration) is Verdict.APPEND
        with pytest.raises(InvalidProducerEpoch):
            check(current, epoch=2, base=0, now=now, expiration=expiration)
