"""What a transaction costs over the same work without one (S4.5, S7.1).

Two comparisons, each against a baseline measured in the same process, rounds
alternating so machine load hits both sides alike:

- produce: a transactional Producer (begin, produce to 4 partitions, commit)
  over an idempotent Producer writing the same batches (produce, flush), at 100
  and 10k records per transaction. Targets: <= 2 at 100, <= 1.3 at 10k.
- offsets: begin + send_offsets_to_transaction + commit_transaction of 4
  partitions' offsets over a plain `Consumer.commit` of the same offsets, p50.
  Target: <= 3.

A transaction's fixed cost is its serial commits: the coordinator records
(partitions added, decision, completion), the markers (one per partition) and
the offsets commit. Kafka's is about 3% at 100 ms transactions. The table also
shows the `__transaction_state` commits per transaction (a count, unmoved by load).

The floor (printed, no target): what the same ratio would be if every commit cost only its physical floor
(bench/append_floor's: pyarrow writes the Parquet file, a ~1 KB commit file is created O_EXCL), measured here
for the batches of each size and for a one-row marker, with the produce() calls of a round (measured here too)
on both sides. A transaction makes 10 commits (4 data, 4 markers, the state commit that adds the partitions and
the decision) where the idempotent producer makes 4 data commits.
"""

from __future__ import annotations

import tempfile
import time

from bench import _common
from lakelog import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from lakelog.coordinator import partition_for_transactional_id
from lakelog.coordinator.transaction.coordinator import TRANSACTION_STATE_LOG, TransactionCoordinator
from lakelog.log import BatchHeader, ControlType, payload_table
from lakelog.log.records import conform_payload, stamp
from lakelog.log.topics import open_internal_partition

PARTITIONS = 4
SIZES = (100, 10_000)
ROUNDS = {100: 30, 10_000: 10}
ROUNDS_QUICK = {100: 8, 10_000: 3}
TARGETS = {100: 2.0, 10_000: 1.3}
OFFSET_ROUNDS = 60
OFFSET_ROUNDS_QUICK = 15
OFFSETS_TARGET = 3.0
VALUE = b"v" * 100


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    rounds = ROUNDS_QUICK if quick else ROUNDS
    result = _common.Result("transaction_cost")
    print(
        f"== transaction_cost: transactional over idempotent produce ({PARTITIONS} partitions), "
        "and begin+send_offsets+commit over a plain offset commit"
    )
    with _common.temp_root(root_parent, keep) as root:
        rows = []
        for size in SIZES:
            before = _state_log_version(root, f"cost-{size}")
            transactional, idempotent = _produce_rounds(root, size, rounds[size])
            # Every round plus the warm-up; the init's own commit is in `before` (taken after the topic exists).
            state_commits = (_state_log_version(root, f"cost-{size}") - before - 1) / (rounds[size] + 1)
            rows.append(
                [
                    f"{size:,}",
                    rounds[size],
                    _common.median(transactional) * 1e3,
                    _common.median(idempotent) * 1e3,
                    state_commits,
                    sum(transactional) / sum(idempotent),
                ]
            )
        _common.print_table(["records/txn", "rounds", "txn ms p50", "idem ms p50", "state commits/txn", "ratio (sums)"], rows)
        floors = {size: _floor_ratio(root, root_parent, size, rounds[size]) for size in SIZES}
        transactional_offsets, plain_offsets = _offset_rounds(root, OFFSET_ROUNDS_QUICK if quick else OFFSET_ROUNDS)
        txn_p50 = _common.percentile(transactional_offsets, 50)
        plain_p50 = _common.percentile(plain_offsets, 50)
        _common.print_table(
            ["offsets of 4 partitions", "n", "p50 ms", "p95 ms"],
            [
                ["plain commit", len(plain_offsets), plain_p50 * 1e3, _common.percentile(plain_offsets, 95) * 1e3],
                [
                    "begin+send_offsets+commit",
                    len(transactional_offsets),
                    txn_p50 * 1e3,
                    _common.percentile(transactional_offsets, 95) * 1e3,
                ],
            ],
        )
    for size, row in zip(SIZES, rows, strict=True):
        result.add(f"transaction_cost txn/idempotent @{size}", row[-1], TARGETS[size])
        result.add(f"transaction_cost the same ratio at the physical floor of each commit @{size}", floors[size], None)
    result.add("transaction_cost begin+send_offsets+commit/plain commit p50", txn_p50 / plain_p50, OFFSETS_TARGET)
    return result


def _floor_ratio(root: str, root_parent: str | None, size: int, rounds: int) -> float:
    """(produce() calls + 10 commits at the floor) / (produce() calls + 4 commits at the floor), p50 of each part.

    The floor's files go to a folder of their own beside the root (`root_parent`), not under it."""
    with tempfile.TemporaryDirectory(dir=root_parent, prefix="lakelog-bench-floor-") as folder:
        return _floor_ratio_in(_common.Floor(folder), root, size, rounds)


def _floor_ratio_in(floor: _common.Floor, root: str, size: int, rounds: int) -> float:
    header = BatchHeader(1, 0, 0)
    batch = stamp(conform_payload(payload_table([VALUE] * (size // PARTITIONS))), 0, header, time.time_ns() // 1000)
    marker = stamp(conform_payload(payload_table([None])), 0, header, time.time_ns() // 1000, ControlType.COMMIT)
    topic = f"cost-floor-{size}"
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(topic, num_partitions=PARTITIONS)])
    producer = Producer({"lakelog.root": root, "linger.ms": 60_000, "batch.num.messages": 1_000_000, "batch.size": 1 << 30})
    data_s, marker_s, produce_s = [], [], []
    for _ in range(rounds + 1):
        data_s.append(floor.append(batch))
        marker_s.append(floor.append(marker))
        started = time.perf_counter()
        for n in range(size):
            producer.produce(topic, VALUE, partition=n % PARTITIONS)
        produce_s.append(time.perf_counter() - started)
        producer.purge()
    producer.close()
    data, one_row, calls = (_common.median(values[1:]) for values in (data_s, marker_s, produce_s))
    print(
        f"floor @{size}: a data commit {data * 1e3:.3f} ms, a one-row commit {one_row * 1e3:.3f} ms, "
        f"{size} produce() calls {calls * 1e3:.3f} ms"
    )
    return (calls + PARTITIONS * data + (PARTITIONS + 2) * one_row) / (calls + PARTITIONS * data)


def _state_log_version(root: str, transactional_id: str) -> int:
    """The Delta version of the id's __transaction_state partition (-1 before it exists)."""
    count = TransactionCoordinator(root).num_partitions
    partition = partition_for_transactional_id(transactional_id, count)
    return open_internal_partition(root, TRANSACTION_STATE_LOG, partition, count).version


def _produce_rounds(root: str, size: int, rounds: int) -> tuple[list[float], list[float]]:
    transactional_round, idempotent_round = _common.transactional_and_idempotent_rounds(
        root, size, PARTITIONS, VALUE, "cost-", f"cost-{size}"
    )
    transactional_s: list[float] = []
    idempotent_s: list[float] = []
    for n in range(rounds):
        if n % 2:
            transactional_s.append(transactional_round())
            idempotent_s.append(idempotent_round())
        else:
            idempotent_s.append(idempotent_round())
            transactional_s.append(transactional_round())
    return transactional_s, idempotent_s


def _offset_rounds(root: str, rounds: int) -> tuple[list[float], list[float]]:
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("cost-in", num_partitions=PARTITIONS)])
    consumers = {}
    for kind in ("plain", "txn"):
        # Two groups, so neither side's commit races the other's marker in one offsets log.
        consumer = Consumer(
            {
                "lakelog.root": root,
                "group.id": f"cost-{kind}",
                "enable.auto.commit": False,
                "heartbeat.interval.ms": 60_000,
                "session.timeout.ms": 600_000,
            }
        )
        consumer.subscribe(["cost-in"])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < PARTITIONS:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumer of group cost-{kind} got no assignment in 60 s")
            consumer.consume(1, 0.05)
        consumers[kind] = consumer
    producer = Producer({"lakelog.root": root, "transactional.id": "cost-offsets"})
    producer.init_transactions()

    def plain(n: int) -> float:
        offsets = [TopicPartition("cost-in", p, n + 1) for p in range(PARTITIONS)]
        t0 = time.perf_counter()
        consumers["plain"].commit(offsets=offsets, asynchronous=False)
        return time.perf_counter() - t0

    def transactional(n: int) -> float:
        offsets = [TopicPartition("cost-in", p, n + 1) for p in range(PARTITIONS)]
        t0 = time.perf_counter()
        producer.begin_transaction()
        producer.send_offsets_to_transaction(offsets, consumers["txn"].consumer_group_metadata())
        producer.commit_transaction()
        return time.perf_counter() - t0

    plain(0), transactional(0)  # warm-up: handles, replay
    plain_s: list[float] = []
    transactional_s: list[float] = []
    for n in range(1, rounds + 1):
        if n % 2:
            transactional_s.append(transactional(n))
            plain_s.append(plain(n))
        else:
            plain_s.append(plain(n))
            transactional_s.append(transactional(n))
    for consumer in consumers.values():
        consumer.close()
    return transactional_s, plain_s


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
