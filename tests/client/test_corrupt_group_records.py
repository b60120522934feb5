"""A `__consumer_offsets` row that does not decode (issue 12 item 4): CorruptRecord naming the table and
offset of the row, for its group only; the other groups of the same partition are served (S6.1, S8.3).

Real tables: two groups share the one `__consumer_offsets` partition of the root, and a bad row keyed by
one of them is appended to it as a newer or broken writer would leave it.
"""

from __future__ import annotations

import json

import pytest
from helpers import table_fingerprint

from lakelog.client.admin import groups as group_admin
from lakelog.coordinator.compaction.internal_compaction import compact_internal_logs
from lakelog.coordinator.group import GroupRecord, OffsetRecord
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG, GroupCoordinator
from lakelog.coordinator.runtime import state_log
from lakelog.coordinator.transaction.coordinator import TRANSACTION_STATE_LOG, TransactionCoordinator
from lakelog.errors import CorruptRecord
from lakelog.log import BatchHeader, create_topic, payload_table
from lakelog.log.topics import open_internal_partition

BROKER = {"offsets.topic.num.partitions": 1}
TP = ("orders", 0)

# A valid row of group `bad`, as this code writes it.
VALID = OffsetRecord("bad", "orders", 0, 9, "", 0).to_row()
BAD_ROWS = {
    "not JSON": b"\x00\xffnot json",
    "not an object": b"[1, 2]",
    "unknown kind": json.dumps({**VALID, "kind": "rebalance"}).encode(),
    "field missing": json.dumps({k: v for k, v in VALID.items() if k != "offset"}).encode(),
    "field of the wrong type": json.dumps({**VALID, "partition": "0"}).encode(),
    "newer version": json.dumps({**VALID, "v": 99}).encode(),
}


def append_row(lake: str, group_id: str, value: bytes) -> int:
    """Append one row keyed by `group_id` to `__consumer_offsets/0`; its offset."""
    log = open_internal_partition(lake, CONSUMER_OFFSETS_LOG, 0, 1)
    offset = log.log_end_offset()
    log.append(payload_table([value], keys=[group_id.encode()]), BatchHeader(expected_offset=offset))
    return offset


@pytest.fixture
def two_groups(lake: str) -> str:
    """Groups `good` and `bad` in the one `__consumer_offsets` partition, each with a committed offset."""
    create_topic(lake, "orders", 1)
    coordinator = GroupCoordinator(lake, broker_config=BROKER)
    assert coordinator.num_partitions == 1
    for group_id in ("good", "bad"):
        coordinator.commit_offsets(group_id, "", -1, {TP: (3, "")})
    return lake


def offsets_table(lake: str) -> str:
    return f"{lake}/{CONSUMER_OFFSETS_LOG}/0"


def assert_names_the_row(error: CorruptRecord, lake: str, offset: int) -> None:
    assert error.offset == offset and error.group_id == "bad"
    assert f"{CONSUMER_OFFSETS_LOG}/0 offset {offset}" in str(error)
    assert error.table == open_internal_partition(lake, CONSUMER_OFFSETS_LOG, 0, 1).table.uri


@pytest.mark.parametrize("value", BAD_ROWS.values(), ids=BAD_ROWS.keys())
def test_a_corrupt_row_refuses_its_group_and_serves_the_other_groups_of_the_partition(two_groups, value):
    lake = two_groups
    offset = append_row(lake, "bad", value)
    coordinator = GroupCoordinator(lake)  # cold: replays the bad row

    assert coordinator.fetch_offsets("good")[TP].offset == 3
    assert coordinator.commit_offsets("good", "", -1, {TP: (4, "")}) == {TP: 4}
    assert [group.group_id for group in coordinator.list_groups()] == ["good"]
    assert group_admin.describe_group(lake, "good").group_id == "good"

    before = table_fingerprint(offsets_table(lake))
    with pytest.raises(CorruptRecord) as refused:
        coordinator.commit_offsets("bad", "", -1, {TP: (5, "")})
    assert_names_the_row(refused.value, lake, offset)
    assert table_fingerprint(offsets_table(lake)) == before  # S8.3: a refusal writes nothing
    with pytest.raises(CorruptRecord) as described:
        group_admin.describe_group(lake, "bad")
    assert_names_the_row(described.value, lake, offset)
    assert list(coordinator.corrupt_groups()) == ["bad"]


def test_a_snapshot_past_a_corrupt_row_still_refuses_its_group(two_groups, monkeypatch):
    lake = two_groups
    monkeypatch.setattr(state_log, "SNAPSHOT_EVERY_RECORDS", 2)
    offset = append_row(lake, "bad", BAD_ROWS["newer version"])
    writer = GroupCoordinator(lake)
    for n in range(4):
        writer.commit_offsets("good", "", -1, {TP: (10 + n, "")})
    cold = GroupCoordinator(lake)
    with pytest.raises(CorruptRecord) as refused:
        cold.describe("bad")
    assert cold._log(0).snapshot_position > offset  # the state came from a snapshot past the bad row
    assert_names_the_row(refused.value, lake, offset)
    assert cold.fetch_offsets("good")[TP].offset == 13


def test_S9_3_compaction_keeps_a_corrupt_row_and_reports_it(two_groups):
    lake = two_groups
    for n in range(3):
        GroupCoordinator(lake).commit_offsets("good", "", -1, {TP: (10 + n, "")})
    offset = append_row(lake, "bad", BAD_ROWS["field missing"])
    before = table_fingerprint(offsets_table(lake))
    report = compact_internal_logs(lake)
    assert [(item.log_name, item.partition) for item in report] == [(CONSUMER_OFFSETS_LOG, 0)]
    assert f"offset {offset}" in report[0].error
    assert table_fingerprint(offsets_table(lake)) == before


def test_rows_of_a_newer_writer_with_extra_fields_and_rows_without_a_version_decode(two_groups):
    lake = two_groups
    newer = {**OffsetRecord("newer", "orders", 0, 7, "m", 0).to_row(), "leader_epoch": 4, "tags": {"x": 1}}
    append_row(lake, "newer", json.dumps(newer).encode())
    unversioned = {k: v for k, v in OffsetRecord("old", "orders", 0, 6, "", 0).to_row().items() if k != "v"}
    append_row(lake, "old", json.dumps(unversioned).encode())
    coordinator = GroupCoordinator(lake)
    assert coordinator.fetch_offsets("newer")[TP].offset == 7
    assert coordinator.fetch_offsets("old")[TP].offset == 6
    assert coordinator.corrupt_groups() == {}


def test_deleting_a_group_after_its_corrupt_row_serves_it_again_from_empty(two_groups):
    lake = two_groups
    append_row(lake, "bad", BAD_ROWS["not JSON"])
    append_row(lake, "bad", json.dumps(GroupRecord("bad", 0, deleted=True).to_row()).encode())
    coordinator = GroupCoordinator(lake)
    assert coordinator.describe("bad") is None
    assert coordinator.commit_offsets("bad", "", -1, {TP: (5, "")}) == {TP: 5}


def test_a_corrupt_transaction_state_row_is_corrupt_record_naming_table_and_offset(lake):
    """`__transaction_state` is not split by id on replay: its bad row stops the partition, but as
    CorruptRecord naming where it is, never a raw KeyError (S4.3)."""
    coordinator = TransactionCoordinator(lake, broker_config={"transaction.state.log.num.partitions": 1})
    coordinator.init_producer_id("etl", 60_000)
    log = open_internal_partition(lake, TRANSACTION_STATE_LOG, 0, 1)
    offset = log.log_end_offset()
    row = {"transactional_id": "etl", "state": "Ongoing"}
    log.append(payload_table([json.dumps(row).encode()], keys=[b"etl"]), BatchHeader(expected_offset=offset))
    with pytest.raises(CorruptRecord) as refused:
        TransactionCoordinator(lake).list_transactions()
    assert refused.value.offset == offset and f"{TRANSACTION_STATE_LOG}/0 offset {offset}" in str(refused.value)
