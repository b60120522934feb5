"""lakelog beside Apache Kafka: the same programs, timed against a root and against a Kafka broker in one run.

Kafka runs as one KRaft node on loopback (bench/_kafka.py: the jars ./dev fetched from jvm/kafka/pom.xml, 512 MB
heap), reached through confluent-kafka; lakelog through its confluent-shaped clients on a temporary local root. Each
ratio is printed for lakelog with the same ratio for Kafka beside it, and each measure's absolute latencies side by
side: a broker's write is an append to a page cache, lakelog's a Delta commit, so the absolute figures differ by
design, and show the price of having no broker.

- transactional against idempotent produce, 4 partitions, 10k and 100 records per transaction (rounds alternate);
- begin + send_offsets_to_transaction + commit against a plain synchronous offset commit;
- produce() calls per second for 1 M (quick: 100k) 100-byte messages in one process, lakelog against confluent-kafka.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bench import _common
from bench._kafka import JARS_ENV, KafkaBroker, jars_dir

PARTITIONS = 4
VALUE = b"v" * 100
ROUNDS = {10_000: 8, 100: 30, "offsets": 30}
ROUNDS_QUICK = {10_000: 3, 100: 10, "offsets": 10}
TARGETS = {10_000: 1.3, 100: 2.0, "offsets": 3.0}
CALLS = 1_000_000
CALLS_QUICK = 100_000


@dataclass
class Side:
    """One system as a program sees it: its package and how it is reached."""

    name: str
    package: ModuleType
    admin_module: ModuleType
    connection: dict[str, Any]

    def conf(self, **extra: Any) -> dict[str, Any]:
        return {**self.connection, **extra}

    def create_topic(self, partitions: int) -> str:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        admin = self.admin_module.AdminClient(self.conf())
        admin.create_topics([self.admin_module.NewTopic(topic, partitions, 1)])[topic].result(30)
        if self.name == "kafka":
            deadline = time.monotonic() + 15
            while len(admin.list_topics(topic, timeout=5).topics[topic].partitions) < partitions:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topic} did not reach Kafka's metadata")
                time.sleep(0.1)
        return topic


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("kafka_reference")
    print("== kafka_reference: lakelog beside an Apache Kafka broker (KRaft, loopback), the same programs")
    jars = jars_dir()
    if jars is None:
        print(f"(skipped: Apache Kafka's jars are absent, ${JARS_ENV} unset or not fetched; ./dev fetches them)")
        return result
    rounds = ROUNDS_QUICK if quick else ROUNDS
    calls = CALLS_QUICK if quick else CALLS
    broker = KafkaBroker(jars).start()
    try:
        with _common.temp_root(root_parent, keep) as root:
            sides = [
                Side(
                    "lakelog",
                    importlib.import_module("lakelog"),
                    importlib.import_module("lakelog.admin"),
                    {"lakelog.root": root},
                ),
                Side(
                    "kafka",
                    importlib.import_module("confluent_kafka"),
                    importlib.import_module("confluent_kafka.admin"),
                    {"bootstrap.servers": broker.bootstrap},
                ),
            ]
            rows, ratios = [], {}
            for size in (10_000, 100):
                for side in sides:
                    txn_s, idem_s = _produce_rounds(side, size, rounds[size])
                    ratios[(size, side.name)] = txn_s / idem_s
                    rows.append(
                        [
                            f"txn/idempotent @{size:,}/txn",
                            side.name,
                            txn_s / rounds[size] * 1e3,
                            idem_s / rounds[size] * 1e3,
                            txn_s / idem_s,
                        ]
                    )
            for side in sides:
                txn_s, plain_s = _offset_rounds(side, rounds["offsets"])
                ratios[("offsets", side.name)] = txn_s / plain_s
                rows.append(
                    [
                        "txn offsets/plain commit",
                        side.name,
                        txn_s / rounds["offsets"] * 1e3,
                        plain_s / rounds["offsets"] * 1e3,
                        txn_s / plain_s,
                    ]
                )
            _common.print_table(["measure", "system", "ms/round (txn)", "ms/round (base)", "ratio"], rows)
            rates = {side.name: _produce_calls(side, calls) for side in sides}
            _common.print_table(
                ["produce() calls", "system", "calls/s", "then flush s"],
                [[f"{calls:,} x 100 B", name, rate, flush_s] for name, (rate, flush_s) in rates.items()],
            )
            for key in (10_000, 100, "offsets"):
                label = f"@{key}" if isinstance(key, int) else "send_offsets+commit/plain commit"
                name = f"kafka_reference txn/idempotent {label}" if isinstance(key, int) else f"kafka_reference {label}"
                result.add(f"{name} (Kafka's: {ratios[(key, 'kafka')]:.3f})", ratios[(key, "lakelog")], TARGETS[key])
            result.add(
                "kafka_reference produce() calls/s lakelog/confluent-kafka",
                rates["lakelog"][0] / rates["kafka"][0],
                0.5,
                higher_is_better=True,
            )
    finally:
        broker.stop()
    return result


def _produce_rounds(side: Side, size: int, rounds: int) -> tuple[float, float]:
    topic = side.create_topic(PARTITIONS)
    transactional = side.package.Producer(side.conf(**{"transactional.id": f"bench-{uuid.uuid4().hex[:8]}", "linger.ms": 5}))
    transactional.init_transactions(30)
    idempotent = side.package.Producer(side.conf(**{"enable.idempotence": True, "linger.ms": 5}))

    def produce(producer: Any) -> None:
        for n in range(size):
            producer.produce(topic, VALUE, partition=n % PARTITIONS)
            if n % 10_000 == 9_999:
                producer.poll(0)

    def transactional_round() -> float:
        started = time.perf_counter()
        transactional.begin_transaction()
        produce(transactional)
        transactional.commit_transaction(60)
        return time.perf_counter() - started

    def idempotent_round() -> float:
        started = time.perf_counter()
        produce(idempotent)
        idempotent.flush(60)
        return time.perf_counter() - started

    transactional_round(), idempotent_round()  # warm up: connections, partitions opened, first commits
    return _alternate(transactional_round, idempotent_round, rounds)


def _offset_rounds(side: Side, rounds: int) -> tuple[float, float]:
    topic = side.create_topic(1)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    tp = side.package.TopicPartition
    consumer = side.package.Consumer(side.conf(**{"group.id": group, "enable.auto.commit": False}))
    consumer.assign([tp(topic, 0, 0)])
    producer = side.package.Producer(side.conf(**{"transactional.id": f"bench-{uuid.uuid4().hex[:8]}"}))
    producer.init_transactions(30)
    offset = [0]

    def transactional_round() -> float:
        offset[0] += 1
        started = time.perf_counter()
        producer.begin_transaction()
        producer.send_offsets_to_transaction([tp(topic, 0, offset[0])], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        return time.perf_counter() - started

    def plain_round() -> float:
        offset[0] += 1
        started = time.perf_counter()
        consumer.commit(offsets=[tp(topic, 0, offset[0])], asynchronous=False)
        return time.perf_counter() - started

    transactional_round(), plain_round()
    try:
        return _alternate(transactional_round, plain_round, rounds)
    finally:
        consumer.close()


def _produce_calls(side: Side, calls: int) -> tuple[float, float]:
    topic = side.create_topic(PARTITIONS)
    producer = side.package.Producer(
        side.conf(**{"queue.buffering.max.messages": 2 * calls, "queue.buffering.max.kbytes": 2_000_000, "linger.ms": 50})
    )
    started = time.perf_counter()
    for n in range(calls):
        producer.produce(topic, VALUE, partition=n % PARTITIONS)
    produced = time.perf_counter()
    producer.flush(300)
    return calls / (produced - started), time.perf_counter() - produced


def _alternate(first: Callable[[], float], second: Callable[[], float], rounds: int) -> tuple[float, float]:
    """Rounds alternate which goes first, so machine load hits both alike."""
    first_s = second_s = 0.0
    for n in range(rounds):
        if n % 2:
            first_s += first()
            second_s += second()
        else:
            second_s += second()
            first_s += first()
    return first_s, second_s


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
