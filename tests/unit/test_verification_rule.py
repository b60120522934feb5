"""Which batches S4.4 verifies, as a property of the partition's rows (lakelog/log/verification.py, no tables).

A transactional batch of (producer id, epoch) skips the coordinator only while the
rows show that producer's transaction open at that epoch; every other transactional
batch (a first one, one after a marker, one at another epoch) is verified, and a
batch without a transactional.id to verify with is refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_producer_state import NOW, rows_of

from lakelog.errors import InvalidTxnState
from lakelog.log.producer_state import fold
from lakelog.log.records import BatchHeader, ControlType
from lakelog.log.verification import needs_verification, verify_batch

PID, OTHER = 7, 9

# One producer's transactions in order: (data batches, ended by a marker?); each end bumps the epoch (S4.6).
transactions = st.lists(st.tuples(st.integers(1, 3), st.booleans()), min_size=1, max_size=6)


def history(txns: list[tuple[int, bool]], start_epoch: int) -> tuple[list, int | None]:
    """The batches of `txns` for PID, with another producer's rows between; and the epoch PID has open, if any."""
    batches, epoch, open_epoch = [], start_epoch, None
    for index, (count, ended) in enumerate(txns):
        for sequence in range(count):
            batches.append((BatchHeader(PID, epoch, sequence, is_transactional=True), 1, NOW, None))
            batches.append((BatchHeader(OTHER, 0, index * 3 + sequence), 1, NOW, None))
        open_epoch = epoch
        if ended or index < len(txns) - 1:
            epoch += 1
            batches.append((BatchHeader(PID, epoch, 0, is_transactional=True), 1, NOW, ControlType.ABORT))
            open_epoch = None
    return batches, open_epoch


@settings(max_examples=200, deadline=None)
@given(txns=transactions, start_epoch=st.integers(0, 100), asked=st.integers(0, 110))
def test_S4_4_only_a_batch_of_the_open_transaction_skips_verification(txns, start_epoch, asked):
    batches, open_epoch = history(txns, start_epoch)
    entry = fold(rows_of(*batches)).get(PID)
    header = BatchHeader(PID, asked, 5, is_transactional=True)
    assert needs_verification(entry, header) is (open_epoch is None or asked != open_epoch)
    assert not needs_verification(entry, BatchHeader(PID, asked, 5))  # idempotent, not transactional
    if needs_verification(entry, header):
        with pytest.raises(InvalidTxnState):
            verify_batch(None, entry, header, "t", 0)  # no transactional.id to verify with: refused
    else:
        verify_batch(None, entry, header, "t", 0)
