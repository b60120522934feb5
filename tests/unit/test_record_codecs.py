"""One codec per internal-log record kind (issue 12 item 4; lakelog.coordinator.runtime.record_codec): rows carry a
version, decoding tolerates unknown fields and rows written before versions existed, and anything else is
CorruptRecord, never a raw KeyError or TypeError (S4.3 for `__transaction_state`, S6.1 for `__consumer_offsets`)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.coordinator.group.records import (
    GROUP_RECORD_VERSION,
    CurrentRecord,
    GroupRecord,
    MemberRecord,
    OffsetRecord,
    TargetRecord,
    from_row,
)
from lakelog.coordinator.runtime.record_codec import VERSION_FIELD
from lakelog.coordinator.transaction import TransactionMetadata, TxnState
from lakelog.errors import CorruptRecord

RECORDS = {
    "group": GroupRecord("g", 3, "range"),
    "member": MemberRecord("g", "m1", "i1", ("a", "b"), 45_000, 300_000, 17),
    "target": TargetRecord("g", 3, {"m1": frozenset({("a", 0), ("b:x", 2)}), "m2": frozenset()}),
    "current": CurrentRecord("g", "m1", 3, 2, 1, frozenset({("a", 0)}), frozenset({("b", 1)}), {("b", 1): 2}, 99),
    "offset": OffsetRecord("g", "a", 0, 42, "meta", 5, 7, 1),
    "transaction": TransactionMetadata("t", 5, -1, 2, -1, 60_000, TxnState.ONGOING, frozenset({("a", 0)}), 1, 2),
}


def decode(kind: str, row):
    return TransactionMetadata.from_row(row) if kind == "transaction" else from_row(row)


@pytest.mark.parametrize("kind", RECORDS)
def test_a_record_round_trips_through_json_with_its_version(kind):
    record = RECORDS[kind]
    row = json.loads(json.dumps(record.to_row()))
    assert row[VERSION_FIELD] == GROUP_RECORD_VERSION
    assert decode(kind, row) == record


@pytest.mark.parametrize("kind", RECORDS)
def test_unknown_fields_of_a_newer_writer_are_ignored_and_a_row_without_a_version_decodes(kind):
    record = RECORDS[kind]
    row = record.to_row()
    assert decode(kind, {**row, "leader_epoch": 4, "tagged": {"x": [1]}}) == record
    del row[VERSION_FIELD]
    assert decode(kind, row) == record


@pytest.mark.parametrize("kind", RECORDS)
@pytest.mark.parametrize("version", [2, 99, -1, "1", True, None])
def test_a_row_of_an_unknown_version_is_corrupt_record(kind, version):
    with pytest.raises(CorruptRecord, match="version"):
        decode(kind, {**RECORDS[kind].to_row(), VERSION_FIELD: version})


def test_fields_an_older_writer_did_not_write_take_their_defaults():
    row = {k: v for k, v in RECORDS["offset"].to_row().items() if k not in ("producer_id", "producer_epoch", "removed", "v")}
    assert from_row(row) == OffsetRecord("g", "a", 0, 42, "meta", 5)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(RECORDS)), data=st.data())
def test_any_mangled_row_decodes_or_is_corrupt_record(kind, data):
    """Drop, replace or add fields of a valid row: decoding gives a record or CorruptRecord, nothing else."""
    row = RECORDS[kind].to_row()
    for name in data.draw(st.lists(st.sampled_from(sorted(row)), max_size=3, unique=True)):
        if data.draw(st.booleans()):
            del row[name]
        else:
            row[name] = data.draw(JSON)
    row.update(data.draw(st.dictionaries(st.text(max_size=5), JSON, max_size=2)))
    try:
        decode(kind, row)
    except CorruptRecord:
        pass


@pytest.mark.parametrize("row", [None, [], "text", 7])
@pytest.mark.parametrize("kind", ["offset", "transaction"])
def test_a_row_that_is_not_an_object_is_corrupt_record(kind, row):
    with pytest.raises(CorruptRecord):
        decode(kind, row)
