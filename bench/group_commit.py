"""Consumer groups: offset commit latency, plain and transactional, and how fast a group settles after a join.

Commits (p50/p95 over many rounds, one process, one member that owns 4 partitions):
- plain: `Consumer.commit(offsets=..., asynchronous=False)` of all 4 partitions (one
  `__consumer_offsets` commit after the member check, S6.4);
- transactional, send: `Producer.send_offsets_to_transaction` (the TxnOffsetCommit: the
  first one of a transaction also adds the offsets partition to it, S7.1);
- transactional, whole: begin, send_offsets_to_transaction, commit_transaction
  (decision record, marker into `__consumer_offsets`, completion record).

Settling: a stable group of 10 (then 100) members, each owning 2 partitions of one
topic, and one member joins. Members heartbeat in rounds, every member once per round
in turn, each reporting what its last response let it own (revocations are reported
at the next heartbeat, S6.2). Measured from the join until the group is stable (every
member at the target epoch, owning exactly its target, nothing pending): heartbeats,
rounds, and wall time. Heartbeats are commits to one `__consumer_offsets` partition,
so they serialize whatever the number of processes; with real members the time to
settle is about rounds x heartbeat.interval.ms once heartbeats are that far apart.

Ratios (informational, no target): transactional whole / plain commit at p50; time to
settle 100 members / 10 members.
"""

from __future__ import annotations

import time

from bench import _common
from lakelog import Consumer, Producer, TopicPartition
from lakelog.coordinator.group import Heartbeat
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.log import create_topic

PARTITIONS = 4
COMMITS = 200
COMMITS_QUICK = 40
GROUP_SIZES = (10, 100)
PARTITIONS_PER_MEMBER = 2


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("group_commit")
    rounds = COMMITS_QUICK if quick else COMMITS
    print(f"== group_commit: offset commit latency ({rounds} rounds) and time to a stable group after a join")
    with _common.temp_root(root_parent, keep) as root:
        latencies = _commit_latencies(root, rounds)
        rows = [
            [name, len(values), _common.percentile(values, 50) * 1e3, _common.percentile(values, 95) * 1e3]
            for name, values in latencies.items()
        ]
        _common.print_table(["commit", "n", "p50 ms", "p95 ms"], rows)
        settle_rows = [_settle_after_join(root, size) for size in GROUP_SIZES]
        _common.print_table(["members before join", "heartbeats", "rounds", "seconds", "ms per heartbeat"], settle_rows)
    plain = _common.percentile(latencies["plain commit"], 50)
    whole = _common.percentile(latencies["transactional: begin+send+commit"], 50)
    result.add("group_commit transactional(whole)/plain p50", whole / plain)
    result.add("group_commit settle 100 members/10 members", settle_rows[1][3] / settle_rows[0][3])
    return result


def _commit_latencies(root: str, rounds: int) -> dict[str, list[float]]:
    create_topic(root, "bench-in", PARTITIONS)
    consumer = Consumer(
        {
            "lakelog.root": root,
            "group.id": "bench",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 60_000,
            "session.timeout.ms": 600_000,
        }
    )
    consumer.subscribe(["bench-in"])
    deadline = time.monotonic() + 60
    while len(consumer.assignment()) < PARTITIONS:
        assert time.monotonic() < deadline, "the member got no assignment"
        consumer.consume(1, 0.05)
    producer = Producer({"lakelog.root": root, "transactional.id": "bench-txn"})
    producer.init_transactions()
    out: dict[str, list[float]] = {"plain commit": [], "transactional: send offsets": [], "transactional: begin+send+commit": []}
    # In two blocks: a plain commit right after a transaction would first lose the race to the
    # transaction's marker in the same log and decide again (measured apart, not mixed in).
    for n in range(rounds + 1):  # the first round warms up (handles, replay)
        offsets = [TopicPartition("bench-in", p, n + 1) for p in range(PARTITIONS)]
        t0 = time.perf_counter()
        consumer.commit(offsets=offsets, asynchronous=False)
        if n:
            out["plain commit"].append(time.perf_counter() - t0)
    for n in range(rounds + 1):
        offsets = [TopicPartition("bench-in", p, rounds + n + 1) for p in range(PARTITIONS)]
        t0 = time.perf_counter()
        producer.begin_transaction()
        t1 = time.perf_counter()
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
        t2 = time.perf_counter()
        producer.commit_transaction()
        t3 = time.perf_counter()
        if n:
            out["transactional: send offsets"].append(t2 - t1)
            out["transactional: begin+send+commit"].append(t3 - t0)
    consumer.close()
    return out


def _settle_after_join(root: str, size: int) -> list:
    topic, group = f"settle-{size}", f"settle-{size}"
    create_topic(root, topic, (size + 1) * PARTITIONS_PER_MEMBER)
    coordinator = GroupCoordinator(root)
    owned: dict[str, tuple[int, frozenset]] = {}

    def beat(member_id: str) -> None:
        epoch, partitions = owned[member_id]
        response = coordinator.heartbeat(Heartbeat(group, member_id, epoch, (topic,), partitions, session_timeout_ms=600_000))
        owned[member_id] = (response.member_epoch, response.assignment)

    def join() -> str:
        response = coordinator.heartbeat(Heartbeat(group, "", 0, (topic,), frozenset(), session_timeout_ms=600_000))
        owned[response.member_id] = (response.member_epoch, response.assignment)
        return response.member_id

    def settle() -> tuple[int, int]:
        return _common.settle_group(lambda: coordinator.describe(group), owned, beat)

    for _ in range(size):
        join()
    settle()
    t0 = time.perf_counter()
    join()
    heartbeats, rounds = settle()
    seconds = time.perf_counter() - t0
    return [size, heartbeats + 1, rounds, seconds, seconds / (heartbeats + 1) * 1e3]


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
