"""Transaction markers in a partition log (S4.5, S4.6) on real Delta tables."""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog.errors import InvalidRequest, OutOfOrderSequence, ProducerFenced
from lakelog.log import BatchHeader, ControlType, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED

pytestmark = pytest.mark.roots("local", "s3")


def values(*texts: str):
    return payload_table([text.encode() for text in texts])


def test_S4_6_marker_fences_the_transactions_epoch_and_resets_sequences(root, topic):
    """S4.6: after a marker at epoch e+1, a late write at epoch e is ProducerFenced; the next transaction starts at 0."""
    log = open_partition(root, topic(), 0)
    log.append(values("a", "b"), BatchHeader(5, 3, 0, is_transactional=True), transaction=_UNVERIFIED)
    marker = log.append_marker(5, 4, ControlType.COMMIT)
    assert (marker.base_offset, marker.duplicate) == (2, False)
    row = log.fetch(2).rows.to_pylist()[0]
    assert (row["control"], row["producer_id"], row["producer_epoch"], row["sequence"], row["is_transactional"]) == (
        "COMMIT",
        5,
        4,
        -1,
        True,
    )
    before = table_fingerprint(log.table.uri)
    with pytest.raises(ProducerFenced):  # the zombie's next sequence, at the old epoch
        log.append(values("late"), BatchHeader(5, 3, 2, is_transactional=True), transaction=_UNVERIFIED)
    with pytest.raises(OutOfOrderSequence):  # the new epoch must start at sequence 0
        log.append(values("next"), BatchHeader(5, 4, 2, is_transactional=True), transaction=_UNVERIFIED)
    assert table_fingerprint(log.table.uri) == before  # S8.3
    assert log.append(values("next"), BatchHeader(5, 4, 0, is_transactional=True), transaction=_UNVERIFIED).base_offset == 3


def test_S4_5_marker_written_twice_is_appended_once(root, topic):
    """S4.5: whoever finishes a transaction may retry its markers; a partition takes each marker once."""
    name = topic()
    log = open_partition(root, name, 0)
    log.append(values("a"), BatchHeader(8, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    first = log.append_marker(8, 1, ControlType.ABORT)
    other_process = open_partition(root, name, 0)
    again = other_process.append_marker(8, 1, ControlType.ABORT)
    assert (first.duplicate, again.duplicate) == (False, True)
    assert log.append_marker(8, 1, ControlType.ABORT).duplicate
    assert open_partition(root, name, 0).log_end_offset() == 2


def test_S4_5_marker_for_a_partition_without_data_of_the_producer(root, topic):
    """S4.5: a partition added to a transaction but never written to still gets its marker."""
    log = open_partition(root, topic(), 0)
    assert log.append_marker(11, 1, ControlType.COMMIT).base_offset == 0
    assert log.producer_entry(11).producer_epoch == 1


def test_S2_3_markers_need_no_expected_offset(root, topic):
    """S2.3 refuses producer batches without an expected offset, never the coordinator's markers."""
    log = open_partition(root, topic({"check.expected.offsets": True}), 0)
    log.append(values("a"), BatchHeader(3, 0, 0, is_transactional=True, expected_offset=0), transaction=_UNVERIFIED)
    assert log.append_marker(3, 1, ControlType.COMMIT).base_offset == 1


def test_marker_bad_input_writes_nothing(root, topic):
    log = open_partition(root, topic(), 0)
    before = table_fingerprint(log.table.uri)
    with pytest.raises(InvalidRequest):
        log.append_marker(1, 1, "COMMIT")
    with pytest.raises(InvalidRequest):
        log.append_marker(-1, 1, ControlType.ABORT)
    with pytest.raises(InvalidRequest):
        log.append_marker(1, 2**15, ControlType.ABORT)
    assert table_fingerprint(log.table.uri) == before
