"""`lakelog groups describe` over a `__consumer_offsets` partition holding a row that does not decode
(issue 12 item 4): the bad row's group is CorruptRecord naming the table and offset of the row, every other
group of the partition is described as before, and nothing is written (S8.3)."""

from __future__ import annotations

import json

from helpers import table_fingerprint

from lakelog.coordinator.group import OffsetRecord
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG, GroupCoordinator
from lakelog.log import BatchHeader, create_topic, payload_table
from lakelog.log.topics import open_internal_partition


def test_groups_describe_names_the_bad_row_and_describes_the_other_groups(lakelog, lake):
    create_topic(lake, "orders", 1)
    coordinator = GroupCoordinator(lake, broker_config={"offsets.topic.num.partitions": 1})
    for group_id in ("good", "bad"):
        coordinator.commit_offsets(group_id, "", -1, {("orders", 0): (3, "")})
    log = open_internal_partition(lake, CONSUMER_OFFSETS_LOG, 0, 1)
    offset = log.log_end_offset()
    newer = {**OffsetRecord("bad", "orders", 0, 4, "", 0).to_row(), "v": 7}
    log.append(payload_table([json.dumps(newer).encode()], keys=[b"bad"]), BatchHeader(expected_offset=offset))
    before = table_fingerprint(f"{lake}/{CONSUMER_OFFSETS_LOG}")

    described = lakelog("groups", "describe", "--group", "bad", "--root", lake)
    assert described.returncode == 1
    error = described.stderr.strip().splitlines()[-1]
    assert error.startswith("lakelog: CORRUPT_MESSAGE: group 'bad' is not served")
    assert f"{CONSUMER_OFFSETS_LOG}/0 offset {offset} does not decode" in error and "version 7" in error
    good = lakelog("groups", "describe", "--group", "good", "--json", "--root", lake)
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["group_id"] == "good"
    assert table_fingerprint(f"{lake}/{CONSUMER_OFFSETS_LOG}") == before
    # groups list shows the set-aside group as UNKNOWN (confluent-kafka's state), with a WARNING naming the row.
    listed = lakelog("groups", "list", "--root", lake)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.strip().splitlines()[1:]}
    assert rows["bad"] == ["UNKNOWN", "-"] and rows["good"][0] == "EMPTY"
    assert "group bad is listed as UNKNOWN" in listed.stderr and f"offset {offset}" in listed.stderr
    only = lakelog("groups", "list", "--state", "unknown", "--root", lake)
    assert [line.split()[0] for line in only.stdout.strip().splitlines()[1:]] == ["bad"]
    assert table_fingerprint(f"{lake}/{CONSUMER_OFFSETS_LOG}") == before
