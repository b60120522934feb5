"""What the transaction coordinator did, in captured log lines (issue 12, item 7; STYLE.md's logging).

Every committed `__transaction_state` record is an INFO line naming the transactional.id and its new state;
an init says that it fences every earlier instance (S4.1), a fenced request refused says so, and the sweep's
abort of a transaction past its timeout says so too (S4.7).
"""

from __future__ import annotations

import logging

import pytest
from helpers import FakeClock

from lakelog import AdminClient, NewTopic, Producer
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import ProducerFenced
from lakelog.log.partition import wall_clock_ms

pytestmark = pytest.mark.roots("local")
COORDINATOR = "lakelog.coordinator.transaction.coordinator"


def info_lines(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == COORDINATOR and record.levelno == logging.INFO]


@pytest.fixture
def lake(root):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("orders", num_partitions=1)])
    return root


def producer(root: str, **config) -> Producer:
    return Producer({"lakelog.root": root, "transactional.id": "etl", **config})


def test_S4_1_a_fence_is_an_info_line_and_so_is_the_refusal_of_the_fenced_producer(lake, caplog):
    caplog.set_level(logging.INFO, logger=COORDINATOR)
    zombie = producer(lake)
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.produce("orders", value="zombie", partition=0)
    zombie.flush()
    caplog.clear()
    fresh = producer(lake)
    fresh.init_transactions()
    lines = info_lines(caplog)
    # The zombie's open transaction is aborted (S4.2), then the id is initialised at the next epoch.
    assert any("transactional.id 'etl': PrepareAbort" in line for line in lines), lines
    assert any("transactional.id 'etl': initialised" in line and "earlier epoch is fenced (S4.1)" in line for line in lines), (
        lines
    )
    caplog.clear()
    with pytest.raises(ProducerFenced):
        zombie.commit_transaction()
    assert any(line.startswith("refused a fenced producer:") for line in info_lines(caplog)), info_lines(caplog)


def test_S4_7_the_sweeps_abort_is_an_info_line(lake, caplog):
    p = producer(lake, **{"transaction.timeout.ms": 60_000})
    p.init_transactions()
    p.begin_transaction()
    p.produce("orders", value="slow", partition=0)
    p.flush()
    clock = FakeClock(wall_clock_ms())
    clock.advance(60_001)
    caplog.set_level(logging.INFO, logger=COORDINATOR)
    assert TransactionCoordinator(lake, clock=clock).sweep().aborted_timed_out == ["etl"]
    lines = info_lines(caplog)
    assert any(
        "sweep: transactional.id 'etl' past transaction.timeout.ms: aborting, its producer fenced (S4.7)" in line
        for line in lines
    ), lines
    assert any("transactional.id 'etl': PrepareAbort" in line for line in lines), lines
    assert any("transactional.id 'etl': CompleteAbort" in line for line in lines), lines


GROUPS = "lakelog.coordinator.group.coordinator"


def test_S6_2_S6_4_group_transitions_and_a_fenced_member_are_info_lines(lake, caplog):
    from lakelog.coordinator.group import Heartbeat
    from lakelog.coordinator.group.coordinator import GroupCoordinator
    from lakelog.errors import FencedMemberEpoch, StaleMemberEpoch, UnknownMemberId

    caplog.set_level(logging.INFO, logger=GROUPS)
    coordinator = GroupCoordinator(lake, clock=FakeClock())
    joined = coordinator.heartbeat(Heartbeat("etl", "", 0, ("orders",), frozenset()))
    lines = [r.getMessage() for r in caplog.records if r.name == GROUPS and r.levelno == logging.INFO]
    assert f"group etl: member {joined.member_id} joined (group epoch 1)" in lines, lines
    assert any(line.startswith("group etl: new target assignment at epoch 1") for line in lines), lines
    caplog.clear()
    with pytest.raises((FencedMemberEpoch, StaleMemberEpoch, UnknownMemberId)):
        coordinator.commit_offsets("etl", joined.member_id, joined.member_epoch + 5, {("orders", 0): (1, "")})
    lines = [r.getMessage() for r in caplog.records if r.name == GROUPS and r.levelno == logging.INFO]
    assert any(line.startswith("group etl: refused a fenced member:") for line in lines), lines
