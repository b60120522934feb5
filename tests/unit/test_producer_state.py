"""Pure tests of the idempotence check and the producer entries (S3.1-S3.5, S9.4): lakelog/log/producer_state.py, no tables."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequence, ProducerFenced, UnknownProducerId
from lakelog.log.producer_state import STATE_COLUMNS, ProducerEntry, Verdict, check_batch, fold, out_of_order
from lakelog.log.records import (
    MAX_EPOCH,
    MAX_SEQUENCE,
    NO_SEQUENCE,
    BatchHeader,
    ControlType,
    conform_payload,
    last_sequence,
    next_sequence,
    payload_table,
    stamp,
)

NOW = 1_700_000_000_000
DAY = 86_400_000

epochs = st.integers(min_value=0, max_value=MAX_EPOCH)
sequences = st.integers(min_value=0, max_value=MAX_SEQUENCE)
last_sequences = st.integers(min_value=-1, max_value=MAX_SEQUENCE)
counts = st.integers(min_value=1, max_value=10_000)


def entry(epoch: int = 0, last: int = 4, pid: int = 1, at: int = NOW) -> ProducerEntry:
    return ProducerEntry(producer_id=pid, producer_epoch=epoch, last_sequence=last, last_timestamp_ms=at)


def check(
    current: ProducerEntry | None,
    epoch: int,
    base: int,
    count: int = 1,
    *,
    pid: int = 1,
    transactional: bool = False,
    now: int = NOW,
    expiration: int = DAY,
) -> Verdict:
    header = BatchHeader(producer_id=pid, producer_epoch=epoch, base_sequence=base, is_transactional=transactional)
    return check_batch(current, header, count, now, expiration)


def after_append(header: BatchHeader, count: int, now: int) -> ProducerEntry:
    """The entry the rows of an appended batch leave (its last row's sequence, epoch and timestamp)."""
    return ProducerEntry(header.producer_id, header.producer_epoch, last_sequence(header.base_sequence, count), now)


def rows_of(*batches: tuple[BatchHeader, int, int, ControlType | None]) -> pa.Table:
    """The rows of (header, record count, log clock ms, control) batches appended one after the other."""
    tables, offset = [], 0
    for header, count, now, control in batches:
        payload = conform_payload(payload_table([b"v"] * count))
        tables.append(stamp(payload, offset, header, now * 1000, control))
        offset += count
    return pa.concat_tables(tables).select(STATE_COLUMNS)


# -- The entry is the producer's last row (S3.5, S9.4) --


def test_S3_5_entry_is_the_last_row_of_each_producer():
    rows = rows_of(
        (BatchHeader(1, 0, 0), 3, NOW, None),
        (BatchHeader(), 2, NOW + 1, None),  # not idempotent: no entry
        (BatchHeader(2, 4, 0, is_transactional=True), 2, NOW + 2, None),
        (BatchHeader(1, 0, 3), 1, NOW + 3, None),
    )
    assert fold(rows) == {
        1: ProducerEntry(1, 0, 3, NOW + 3, last_offset=7),
        2: ProducerEntry(2, 4, 1, NOW + 2, last_offset=6, transaction_open=True),
    }


def test_S3_5_marker_ends_the_transaction_and_the_sequence():
    """After a marker: its epoch, NO_SEQUENCE, no open transaction (S4.5)."""
    rows = rows_of(
        (BatchHeader(2, 4, 0, is_transactional=True), 2, NOW, None),
        (BatchHeader(2, 5, 0, is_transactional=True), 1, NOW + 9, ControlType.COMMIT),
    )
    assert fold(rows) == {2: ProducerEntry(2, 5, NO_SEQUENCE, NOW + 9, last_offset=2)}


def test_S9_4_transaction_is_open_while_the_last_row_is_transactional_data():
    rows = rows_of((BatchHeader(3, 0, 0, is_transactional=True), 2, NOW, None), (BatchHeader(4, 0, 0), 1, NOW, None))
    assert fold(rows)[3].transaction_open is True
    assert fold(rows)[4].transaction_open is False


@settings(deadline=None, max_examples=50)  # builds Arrow tables: timings vary with the machine's load
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4), st.booleans()), min_size=1, max_size=12), st.integers(0, 12))
def test_S3_5_folding_in_two_steps_equals_one(batches, cut):
    """The cache's incremental fold (any split at a batch boundary) gives the entries of the whole fold."""
    sequences: dict[int, int] = {}
    spec = []
    for i, (pid, count, marker) in enumerate(batches):
        if marker:
            spec.append((BatchHeader(pid, 1, 0, is_transactional=True), 1, NOW + i, ControlType.ABORT))
            sequences[pid] = 0
        else:
            spec.append((BatchHeader(pid, 1, sequences.get(pid, 0), is_transactional=pid % 2 == 0), count, NOW + i, None))
            sequences[pid] = sequences.get(pid, 0) + count
    rows = rows_of(*spec)
    split = sum(count for _, count, _, _ in spec[: min(cut, len(spec))])
    stepwise = {**fold(rows.slice(0, split)), **fold(rows.slice(split))}
    assert stepwise == fold(rows)


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
def test_S9_4_producer_in_a_transaction_never_expires(expiration, idle):
    """Kafka never expires a producer with an ongoing transaction, however long idle."""
    current = ProducerEntry(1, 5, 9, NOW, transaction_open=True)
    assert not current.is_expired(NOW + idle, expiration)
    assert check(current, epoch=5, base=10, now=NOW + idle, expiration=expiration) is Verdict.APPEND


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
