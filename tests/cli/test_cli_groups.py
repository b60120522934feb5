"""`lakelog groups list | describe | offsets | reset-offsets | delete`, run for real, like
kafka-consumer-groups.sh; and the group part of `lakelog coordinator sweep` (S6, S8.2, S8.3)."""

from __future__ import annotations

import json

import pytest
from helpers import FakeClock, table_fingerprint

from lakelog import Producer
from lakelog.coordinator.group import Heartbeat
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.log import create_topic
from lakelog.log.partition import Clock, wall_clock_ms


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def table(output: str) -> list[dict[str, str]]:
    header, *rows = output.strip().splitlines()
    names = header.split("\t")
    return [dict(zip(names, row.split("\t"), strict=False)) for row in rows]


@pytest.fixture
def orders(lake) -> str:
    """Topic `orders`, 2 partitions of 5 records each, and one more open in a transaction on partition 1
    (its LSO is 5, its high watermark 6)."""
    create_topic(lake, "orders", 2)
    producer = Producer({"lakelog.root": lake, "linger.ms": 600_000})
    for n in range(10):
        producer.produce("orders", f"v{n}", partition=n % 2)
    producer.flush()
    open_transaction = Producer({"lakelog.root": lake, "transactional.id": "open"})
    open_transaction.init_transactions()
    open_transaction.begin_transaction()
    open_transaction.produce("orders", "pending", partition=1)
    open_transaction.flush()
    return "orders"


def join(lake: str, group: str, topic: str, session_timeout_ms: int = 45_000, clock: Clock = wall_clock_ms) -> str:
    request = Heartbeat(group, "", 0, (topic,), frozenset(), session_timeout_ms=session_timeout_ms)
    return GroupCoordinator(lake, clock=clock).heartbeat(request).member_id


def test_groups_list_and_describe_show_state_epochs_and_members(lakelog, lake, orders):
    member_id = join(lake, "etl", orders)
    GroupCoordinator(lake).commit_offsets("old", "", -1, {(orders, 0): (1, "")})
    assert table(ok(lakelog("groups", "list", "--root", lake))) == [
        {"Group": "etl", "State": "STABLE", "Members": "1"},
        {"Group": "old", "State": "EMPTY", "Members": "0"},
    ]
    assert [row["Group"] for row in table(ok(lakelog("groups", "list", "--state", "empty", "--root", lake)))] == ["old"]
    summary, members = ok(lakelog("groups", "describe", "--group", "etl", "--root", lake)).split("\n\n")
    assert table(summary) == [
        {
            "Group": "etl",
            "State": "STABLE",
            "Assignor": "uniform",
            "GroupEpoch": "1",
            "TargetAssignmentEpoch": "1",
            "Members": "1",
        }
    ]
    assert table(members) == [
        {
            "MemberId": member_id,
            "GroupInstanceId": "-",
            "MemberEpoch": "1",
            "RevocationEpoch": "0",
            "Assignment": "orders-0,orders-1",
            "TargetAssignment": "orders-0,orders-1",
            "PendingRevocation": "-",
        }
    ]
    described = json.loads(ok(lakelog("groups", "describe", "--group", "etl", "--json", "--root", lake)))
    assert described["state"] == "STABLE" and described["members"][0]["assignment"] == ["orders-0", "orders-1"]


def test_groups_offsets_shows_lag_against_the_high_watermark_and_the_last_stable_offset(lakelog, lake, orders):
    member_id = join(lake, "etl", orders)
    GroupCoordinator(lake).commit_offsets("etl", member_id, 1, {(orders, 0): (2, ""), (orders, 1): (4, "")})
    rows = table(ok(lakelog("groups", "offsets", "--group", "etl", "--root", lake)))
    assert [
        (r["Partition"], r["CurrentOffset"], r["LogEndOffset"], r["LastStableOffset"], r["Lag"], r["LagLso"]) for r in rows
    ] == [("0", "2", "5", "5", "3", "3"), ("1", "4", "6", "5", "2", "1")]
    assert {r["MemberId"] for r in rows} == {member_id} and {r["PendingOffset"] for r in rows} == {"-"}
    as_json = json.loads(ok(lakelog("groups", "offsets", "--group", "etl", "--json", "--root", lake)))
    assert [(r["lag"], r["lag_lso"]) for r in as_json] == [(3, 3), (2, 1)]


def test_groups_reset_offsets_is_a_dry_run_unless_executed_and_only_for_an_empty_group(lakelog, lake, orders):
    GroupCoordinator(lake).commit_offsets("etl", "", -1, {(orders, 0): (3, ""), (orders, 1): (1, "")})
    before = table_fingerprint(lake)
    dry = lakelog("groups", "reset-offsets", "--group", "etl", "--all-topics", "--shift-by", "-2", "--root", lake)
    assert [(r["Partition"], r["NewOffset"]) for r in table(ok(dry))] == [("0", "1"), ("1", "0")]  # clamped at 0
    assert "dry run" in dry.stderr and table_fingerprint(lake) == before
    ok(lakelog("groups", "reset-offsets", "--group", "etl", "--topic", "orders:1", "--to-latest", "--execute", "--root", lake))
    ok(
        lakelog(
            "groups", "reset-offsets", "--group", "etl", "--topic", "orders:0", "--to-offset", "99", "--execute", "--root", lake
        )
    )
    rows = table(ok(lakelog("groups", "offsets", "--group", "etl", "--root", lake)))
    assert [(r["CurrentOffset"], r["Lag"]) for r in rows] == [("5", "0"), ("6", "0")]
    join(lake, "etl", orders)
    before = table_fingerprint(lake)
    refused = lakelog("groups", "reset-offsets", "--group", "etl", "--all-topics", "--to-earliest", "--execute", "--root", lake)
    assert refused.returncode == 2 and "NON_EMPTY_GROUP" in refused.stderr and refused.stderr.count("\n") == 1
    assert table_fingerprint(lake) == before


def test_groups_delete_removes_empty_groups_only(lakelog, lake, orders):
    GroupCoordinator(lake).commit_offsets("done", "", -1, {(orders, 0): (3, "")})
    join(lake, "busy", orders)
    before = table_fingerprint(lake)
    for group in ("busy", "nobody"):
        refused = lakelog("groups", "delete", "--group", "done", "--group", group, "--root", lake)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and group in refused.stderr
    assert table_fingerprint(lake) == before  # "done" was not deleted either: all are checked first
    assert ok(lakelog("groups", "delete", "--group", "done", "--root", lake)) == "deleted group done\n"
    assert [r["Group"] for r in table(ok(lakelog("groups", "list", "--root", lake)))] == ["busy"]


@pytest.mark.parametrize(
    "args",
    [
        ("groups", "describe", "--group", "nobody"),
        ("groups", "offsets", "--group", "bad group"),
        ("groups", "reset-offsets", "--group", "g", "--topic", "orders:7", "--to-earliest"),
        ("groups", "reset-offsets", "--group", "g", "--topic", "orders:x", "--to-earliest"),
        ("groups", "reset-offsets", "--group", "g", "--topic", "nowhere", "--to-earliest"),
        ("groups", "reset-offsets", "--group", "g", "--topic", "orders", "--to-earliest", "--shift-by", "1"),
        ("groups", "reset-offsets", "--group", "g", "--topic", "orders", "--shift-by", "1", "--execute"),
        ("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest"),
        ("groups", "list", "--state", "sleepy"),
    ],
)
def test_groups_bad_input_exits_2_with_one_line_and_writes_nothing(lakelog, lake, orders, args):
    before = table_fingerprint(lake)
    result = lakelog(*args, "--root", lake)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert table_fingerprint(lake) == before


def test_S6_5_coordinator_sweep_removes_members_past_their_session(lakelog, lake, orders):
    """The member joined a minute ago by its passed-in clock, with a 45 s session: the sweep, a process on
    the wall clock, finds its lease over without the test waiting for it. The live member joins first: a member
    that joins later, on the wall clock, expires the stale one itself (the broker's session timer, S6.5)."""
    live_id = join(lake, "etl", orders, session_timeout_ms=45_000)
    member_id = join(lake, "etl", orders, session_timeout_ms=45_000, clock=FakeClock(wall_clock_ms() - 60_000))
    report = json.loads(ok(lakelog("coordinator", "sweep", "--root", lake)))
    assert report["members_expired"] == [{"group": "etl", "member_id": member_id}]
    assert set(GroupCoordinator(lake).describe("etl").members) == {live_id}
    assert json.loads(ok(lakelog("coordinator", "sweep", "--root", lake)))["members_expired"] == []
