"""Consumer group heartbeats: what a settled group writes, and how settling grows with the group.

Settled group: 20 `Consumer`s in one process, each with its own coordinator state (as
separate processes would have), subscribed to one topic of 40 partitions with Kafka's
defaults (`heartbeat.interval.ms` 3000, `session.timeout.ms` 45000), polled in turn
until the group is stable, then for 30 s more. Counted: commits to
the group's `__consumer_offsets` partition in those 30 s (about 200 heartbeats). A heartbeat that changes
nothing only reads; a member writes when its liveness lease has a third of its session
left (S6.5), so at most one renewal per member in 30 s. Target: <= 20 commits.

Settling: a stable group of 10 (then 100) members, each owning 2 partitions of one topic,
each with its own `GroupCoordinator`, and one member joins. Members heartbeat in rounds,
every member once per round in turn, each reporting what its last response let it own.
Measured from the join until the group is stable: heartbeats, commits, rounds and wall
time. Target: time to settle 100 members / 10 members <= 3 (it grew 10x when every
heartbeat and every member's epoch bump was a commit of its own). The members run one
after another in this one process, so the wall time also holds every member's reads of
the log (a snapshot refresh and the replay of what changed), which separate processes
would make side by side: the commits column is what no longer grows with the group.
"""

from __future__ import annotations

import time

from bench import _common
from lakelog import Consumer
from lakelog.client.admin.groups import ConsumerGroupState, group_state
from lakelog.coordinator.group import Heartbeat
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.log import create_topic

SETTLED_MEMBERS = 20
SETTLED_PARTITIONS = 40
WINDOW_S = 30.0
COMMITS_TARGET = 20
GROUP_SIZES = (10, 100)
PARTITIONS_PER_MEMBER = 2
SETTLE_TARGET = 3.0


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("heartbeats")
    print(f"== heartbeats: a settled {SETTLED_MEMBERS}-member group over {WINDOW_S:g} s, and time to settle after a join")
    with _common.temp_root(root_parent, keep) as root:
        commits = _settled_group(root)
        _common.print_table(
            ["members", "seconds", "heartbeat.interval.ms", "commits to __consumer_offsets"],
            [[SETTLED_MEMBERS, WINDOW_S, 3000, commits]],
        )
        settle_rows = [_settle_after_join(root, size) for size in GROUP_SIZES]
        _common.print_table(
            ["members before join", "heartbeats", "commits", "rounds", "seconds", "ms per heartbeat"],
            [[*row, row[4] / row[1] * 1e3] for row in settle_rows],
        )
    result.add(f"heartbeats commits of a settled {SETTLED_MEMBERS}-member group in {WINDOW_S:g} s", commits, COMMITS_TARGET)
    result.add("heartbeats settle 100 members/10 members", settle_rows[1][4] / settle_rows[0][4], SETTLE_TARGET)
    return result


def _settled_group(root: str) -> int:
    """The commits of a settled group over the window."""
    topic = group = "settled"
    create_topic(root, topic, SETTLED_PARTITIONS)
    consumers = [Consumer({"lakelog.root": root, "group.id": group}) for _ in range(SETTLED_MEMBERS)]
    watcher = GroupCoordinator(root)
    offsets_log = watcher.offsets_log(watcher.offsets_partition(group)[1])
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        deadline = time.monotonic() + 300
        while not _stable(watcher, group, SETTLED_MEMBERS):
            assert time.monotonic() < deadline, "the group did not settle"
            _poll_all(consumers)
        offsets_log.refresh()
        version = offsets_log.version
        end = time.monotonic() + WINDOW_S
        while time.monotonic() < end:
            _poll_all(consumers)
        offsets_log.refresh()
        assert _stable(watcher, group, SETTLED_MEMBERS), "the settled group moved"
        return offsets_log.version - version
    finally:
        for consumer in consumers:
            consumer.close()


def _poll_all(consumers: list[Consumer]) -> None:
    for consumer in consumers:
        consumer.consume(1, 0.005)  # heartbeats when due, as poll() does


def _stable(coordinator: GroupCoordinator, group_id: str, members: int) -> bool:
    group = coordinator.describe(group_id)
    return group is not None and len(group.members) == members and group_state(group) is ConsumerGroupState.STABLE


def _settle_after_join(root: str, size: int) -> list:
    topic = group = f"settle-{size}"
    create_topic(root, topic, (size + 1) * PARTITIONS_PER_MEMBER)
    watcher = GroupCoordinator(root)
    offsets_log = watcher.offsets_log(watcher.offsets_partition(group)[1])
    members: dict[str, tuple[GroupCoordinator, int, frozenset]] = {}

    def join() -> None:
        coordinator = GroupCoordinator(root)
        response = coordinator.heartbeat(Heartbeat(group, "", 0, (topic,), frozenset(), session_timeout_ms=600_000))
        members[response.member_id] = (coordinator, response.member_epoch, response.assignment)

    def beat(member_id: str) -> None:
        coordinator, epoch, owned = members[member_id]
        request = Heartbeat(group, member_id, epoch, (topic,), owned, session_timeout_ms=600_000)
        response = coordinator.heartbeat(request)
        members[member_id] = (coordinator, response.member_epoch, response.assignment)

    def settle() -> tuple[int, int]:
        return _common.settle_group(lambda: watcher.describe(group), members, beat)

    for _ in range(size):
        join()
    settle()
    for coordinator, _, _ in members.values():
        coordinator.describe(group)  # every member has replayed the settled group before the clock starts
    offsets_log.refresh()
    version = offsets_log.version
    t0 = time.perf_counter()
    join()
    heartbeats, rounds = settle()
    seconds = time.perf_counter() - t0
    offsets_log.refresh()
    return [size, heartbeats + 1, offsets_log.version - version, rounds, seconds]


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
