"""The way out for a group set aside by a `__consumer_offsets` row that does not decode: `groups delete
--discard-corrupt` (`GroupCoordinator.delete_group(..., discard_corrupt=True)`) writes the group's deletion,
which replay takes even from a set-aside group, and the group starts again empty.

Real tables: groups `good` and `bad` share the one `__consumer_offsets` partition of the root, a row keyed
by `bad` that does not decode is appended as tests/client/test_corrupt_group_records.py does, and the CLI
runs in-process. Every refusal leaves the tables byte-identical (S8.3); `good` is untouched throughout.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from helpers import table_fingerprint

from lakelog import Consumer, TopicPartition
from lakelog.cli import EXIT_BAD_INPUT, EXIT_FAILURE, main
from lakelog.coordinator.group import OffsetRecord
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG, GroupCoordinator
from lakelog.coordinator.runtime import state_log
from lakelog.errors import CorruptRecord, InvalidRequest
from lakelog.log import BatchHeader, create_topic, payload_table
from lakelog.log.topics import open_internal_partition

BROKER = {"offsets.topic.num.partitions": 1}
TP = ("orders", 0)
TP1 = ("orders", 1)
# A row of a newer writer's record version: it does not decode here.
NEWER = json.dumps({**OffsetRecord("bad", "orders", 0, 9, "", 0).to_row(), "v": 99}).encode()


def append_row(lake: str, group_id: str, value: bytes) -> int:
    """Append one row keyed by `group_id` to `__consumer_offsets/0`; its offset."""
    log = open_internal_partition(lake, CONSUMER_OFFSETS_LOG, 0, 1)
    offset = log.log_end_offset()
    log.append(payload_table([value], keys=[group_id.encode()]), BatchHeader(expected_offset=offset))
    return offset


def offsets_table(lake: str) -> str:
    return f"{lake}/{CONSUMER_OFFSETS_LOG}/0"


def committed(coordinator: GroupCoordinator, group_id: str) -> dict:
    return {tp: record.offset for tp, record in coordinator.fetch_offsets(group_id).items() if record is not None}


@pytest.fixture(autouse=True)
def root_logging():
    """`main` configures the root logger (basicConfig(force=True)); put back what pytest had."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([*args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def corrupt(lake: str) -> tuple[str, int]:
    """`good` and `bad` with committed offsets, then a row of `bad` that does not decode; (root, its offset)."""
    create_topic(lake, "orders", 2)
    coordinator = GroupCoordinator(lake, broker_config=BROKER)
    assert coordinator.num_partitions == 1
    for group_id in ("good", "bad"):
        coordinator.commit_offsets(group_id, "", -1, {TP: (3, ""), TP1: (5, "")})
    offset = append_row(lake, "bad", NEWER)
    # A row of `bad` after its corrupt one: replay folds none of them (its state is unknown from there on).
    append_row(lake, "bad", json.dumps(OffsetRecord("bad", "orders", 1, 8, "", 0).to_row()).encode())
    return lake, offset


def test_groups_delete_refuses_a_corrupt_group_naming_the_flag_and_writes_nothing(corrupt, capsys):
    lake, offset = corrupt
    before = table_fingerprint(offsets_table(lake))
    code, out, err = cli(capsys, "groups", "delete", "--group", "bad", "--root", lake)
    assert code == EXIT_FAILURE and out == ""
    line = err.strip().splitlines()[-1]
    assert line.startswith("lakelog: CORRUPT_MESSAGE: group 'bad' is not served")
    assert f"{CONSUMER_OFFSETS_LOG}/0 offset {offset} does not decode" in line
    assert "--discard-corrupt" in line
    assert table_fingerprint(offsets_table(lake)) == before  # S8.3

    # The API without the flag: the same refusal, nothing written.
    with pytest.raises(CorruptRecord) as refused:
        GroupCoordinator(lake).delete_group("bad")
    assert refused.value.offset == offset and refused.value.group_id == "bad"
    assert table_fingerprint(offsets_table(lake)) == before
    assert committed(GroupCoordinator(lake), "good") == {TP: 3, TP1: 5}


def test_discard_corrupt_deletes_the_group_and_it_starts_again_empty(corrupt, capsys):
    lake, offset = corrupt
    code, out, err = cli(capsys, "groups", "delete", "--group", "bad", "--discard-corrupt", "--root", lake)
    assert code == 0, err
    assert out.startswith("deleted group bad")
    warning = next(line for line in err.splitlines() if "WARNING" in line and "deleted" in line)
    table = open_internal_partition(lake, CONSUMER_OFFSETS_LOG, 0, 1).table.uri
    assert f"group bad deleted with its corrupt record at {table} offset {offset}" in warning
    assert "committed offsets are discarded" in warning

    # A new process's replay: the group is served and empty; neither the offsets before the corrupt row nor
    # the row after it came back.
    cold = GroupCoordinator(lake)
    assert cold.corrupt_groups() == {}
    assert cold.describe("bad") is None
    assert committed(cold, "bad") == {}
    assert committed(cold, "good") == {TP: 3, TP1: 5}

    # A new consumer of that group id joins, finds no committed offset, commits and reads it back.
    consumer = Consumer(
        {
            "lakelog.root": lake,
            "group.id": "bad",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 50,
        }
    )
    try:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.05)
        asked = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
        assert [tp.offset for tp in consumer.committed(asked)] == [-1001, -1001]  # OFFSET_INVALID: nothing
        consumer.commit(offsets=[TopicPartition("orders", 0, 1), TopicPartition("orders", 1, 2)], asynchronous=False)
        assert [tp.offset for tp in consumer.committed(asked)] == [1, 2]
    finally:
        consumer.close()

    fresh = GroupCoordinator(lake)  # another process agrees
    assert committed(fresh, "bad") == {TP: 1, TP1: 2}
    assert fresh.corrupt_groups() == {}
    assert committed(fresh, "good") == {TP: 3, TP1: 5}
    assert [group.group_id for group in fresh.list_groups()] == ["bad", "good"]


def test_the_deletion_holds_from_a_snapshot_past_it(corrupt, monkeypatch):
    lake, _ = corrupt
    monkeypatch.setattr(state_log, "SNAPSHOT_EVERY_RECORDS", 2)
    writer = GroupCoordinator(lake)
    writer.delete_group("bad", discard_corrupt=True)
    writer.commit_offsets("bad", "", -1, {TP: (4, "")})
    for n in range(3):
        writer.commit_offsets("good", "", -1, {TP: (10 + n, "")})
    cold = GroupCoordinator(lake)
    assert committed(cold, "bad") == {TP: 4}
    assert cold._log(0).snapshot_position > 0  # the state came from a snapshot
    assert cold.corrupt_groups() == {}
    assert committed(cold, "good") == {TP: 12, TP1: 5}


def test_discard_corrupt_refuses_a_healthy_or_missing_group_and_writes_nothing(corrupt, capsys):
    lake, _ = corrupt
    before = table_fingerprint(offsets_table(lake))
    code, out, err = cli(capsys, "groups", "delete", "--group", "good", "--discard-corrupt", "--root", lake)
    assert code == EXIT_BAD_INPUT and out == ""
    assert "group 'good' is served, not set aside by a corrupt record" in err
    # One healthy group among corrupt ones: all are checked before any is deleted.
    code, _, err = cli(capsys, "groups", "delete", "--group", "bad", "--group", "good", "--discard-corrupt", "--root", lake)
    assert code == EXIT_BAD_INPUT and "'good'" in err
    assert table_fingerprint(offsets_table(lake)) == before

    coordinator = GroupCoordinator(lake)
    for group_id in ("good", "nobody"):
        with pytest.raises(InvalidRequest, match="not set aside by a corrupt record"):
            coordinator.delete_group(group_id, discard_corrupt=True)
    assert table_fingerprint(offsets_table(lake)) == before  # S8.3
    assert committed(coordinator, "good") == {TP: 3, TP1: 5}
    with pytest.raises(CorruptRecord):
        coordinator.describe("bad")  # still set aside: nothing was discarded
