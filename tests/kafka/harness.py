"""One program, two systems: a scenario is a function of a `System` (confluent-kafka against an Apache Kafka broker,
or lakelog against a root, imported the way a ported program imports it), returning what the program observed as
plain data (values, keys, headers, partitions, offsets in the order read per partition, error codes and their
retriable/abortable/fatal flags). `compare` runs it on both and asserts the observations are equal.

Where lakelog differs on purpose, a scenario says so by name through `System.accepted(name, ...)`: the name must be
one of DIFFERENCES, the "Differences that remain" list of docs/differences-from-kafka.md, line for line (tests/kafka/test_differences.py
checks the two are the same list). Every other difference fails the comparison.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .differences import DIFFERENCES

# How long a drain waits for a partition's end (EOF) before it gives up and reports what it read.
DRAIN_TIMEOUT_S = 20.0


@dataclass
class System:
    """One of the two systems: its client modules (as a program imports them) and how it is reached."""

    name: str
    package: ModuleType
    admin_module: ModuleType
    connection: dict[str, Any]
    prefix: str
    used: list[str] = field(default_factory=list)

    def __getattr__(self, item: str) -> Any:
        # Producer, Consumer, TopicPartition, KafkaError, KafkaException, ...: as `from <package> import ...`.
        try:
            return getattr(self.package, item)
        except AttributeError:
            return getattr(self.admin_module, item)

    @property
    def is_kafka(self) -> bool:
        return self.name == "kafka"

    def conf(self, **extra: Any) -> dict[str, Any]:
        """A client's config: the connection and the given keys (dots spelled as underscores)."""
        return {**self.connection, **{key.replace("_", "."): value for key, value in extra.items()}}

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def group(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def txn_id(self, name: str) -> str:
        return f"{self.prefix}{name}-{uuid.uuid4().hex[:6]}"

    def admin(self) -> Any:
        return self.admin_module.AdminClient(self.conf())

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        topic = self.topic(name)
        admin = self.admin()  # held until the future is done: a client's futures end with it
        futures = admin.create_topics([self.NewTopic(topic, partitions, 1, config=config or {})])
        futures[topic].result(30)
        if self.is_kafka:
            wait_for_metadata(self, topic, partitions)
        return topic

    def settle(self) -> None:
        """Let a change reach what the next call reads: Kafka's broker applies a config change when the controller's
        metadata record reaches it (milliseconds on loopback, but after the call returned); lakelog's is committed."""
        if self.is_kafka:
            time.sleep(0.5)

    def accepted(self, name: str, observed: Any, *, kafka: Any, lakelog: Any) -> str:
        """An observation where lakelog differs on purpose (DIFFERENCES[name]): each system must observe what the
        difference says it does (Kafka `kafka`, lakelog `lakelog`); both then report the name in its place, so the
        comparison checks everything else."""
        assert name in DIFFERENCES, f"{name!r} is not in the harness's list of accepted differences"
        self.used.append(name)
        expected = kafka if self.is_kafka else lakelog
        assert observed == expected, f"{self.name}: accepted difference {name!r}: observed {observed!r}, not {expected!r}"
        return f"accepted difference: {name}"


def kafka_system(bootstrap: str, prefix: str) -> System:
    return System(
        "kafka",
        importlib.import_module("confluent_kafka"),
        importlib.import_module("confluent_kafka.admin"),
        {"bootstrap.servers": bootstrap},
        prefix,
    )


def lakelog_system(root: str, prefix: str = "") -> System:
    return System(
        "lakelog", importlib.import_module("lakelog"), importlib.import_module("lakelog.admin"), {"lakelog.root": root}, prefix
    )


def wait_for_metadata(system: System, topic: str, partitions: int) -> None:
    """A topic Kafka just created is in every broker's metadata shortly after; wait for it (loopback: milliseconds)."""
    admin = system.admin()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) == partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} has not {partitions} partitions in Kafka's metadata")


# -- observations --------------------------------------------------------------------------------------------------------


def error_of(error: Any) -> dict[str, Any] | None:
    """What a program sees of a KafkaError: its code's name and its flags."""
    if error is None:
        return None
    return {
        "code": error.name(),
        "retriable": error.retriable(),
        "fatal": error.fatal(),
        "txn_requires_abort": error.txn_requires_abort(),
    }


def raised(call: Callable[[], Any]) -> dict[str, Any] | None:
    """The error a call raised (a KafkaException's KafkaError; a TypeError/ValueError by its class), or None."""
    try:
        call()
    except (TypeError, ValueError) as error:
        kafka_error = error.args[0] if error.args and hasattr(error.args[0], "code") else None
        return {"python": "TypeError" if isinstance(error, TypeError) else "ValueError", **(error_of(kafka_error) or {})}
    except Exception as error:  # noqa: BLE001 - a KafkaException of either package
        if error.args and hasattr(error.args[0], "code"):
            return error_of(error.args[0])
        raise
    return None


def message_of(message: Any) -> dict[str, Any]:
    headers = message.headers()
    return {
        "partition": message.partition(),
        "offset": message.offset(),
        "key": message.key(),
        "value": message.value(),
        "headers": [(name, value) for name, value in headers] if headers else None,
    }


def drain(consumer: Any, system: System, partitions: int, timeout_s: float = DRAIN_TIMEOUT_S) -> dict[str, Any]:
    """Read until every one of `partitions` partitions reported its end (enable.partition.eof): the messages in the
    order read per partition, and the offset each end was reported at (the high watermark, or the LSO in
    read_committed)."""
    per_partition: dict[int, list[dict[str, Any]]] = {}
    ends: dict[int, int] = {}
    deadline = time.monotonic() + timeout_s
    while len(ends) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() == system.KafkaError._PARTITION_EOF:
                ends[message.partition()] = message.offset()
                continue
            per_partition.setdefault(message.partition(), []).append({"error": error_of(message.error())})
            continue
        ends.pop(message.partition(), None)
        per_partition.setdefault(message.partition(), []).append(message_of(message))
    return {"messages": dict(sorted(per_partition.items())), "ends": dict(sorted(ends.items()))}


def read_topic(system: System, topic: str, partitions: int, isolation: str = "read_committed") -> dict[str, Any]:
    """A fresh consumer assigned every partition from the beginning: what `drain` sees."""
    consumer = system.Consumer(
        system.conf(group_id=system.group(f"reader-{uuid.uuid4().hex[:6]}"), enable_partition_eof=True, isolation_level=isolation)
    )
    try:
        consumer.assign([system.TopicPartition(topic, p, system.OFFSET_BEGINNING) for p in range(partitions)])
        return drain(consumer, system, partitions)
    finally:
        consumer.close()


def deliveries(producer: Any, produce: Callable[[Callable[..., None]], None], timeout: float = 30) -> list[dict[str, Any]]:
    """Produce through `produce(callback)`, flush, and return the delivery reports in the order they came."""
    reports: list[dict[str, Any]] = []

    def report(error: Any, message: Any) -> None:
        reports.append(
            {
                "error": error_of(error),
                "topic_partition": message.partition(),
                "offset": message.offset() if error is None else None,
            }
        )

    produce(report)
    producer.flush(timeout)
    return reports


def compare(scenario: Callable[[System], Any], kafka: System, lake: System) -> Any:
    """Run `scenario` on both systems; assert what the program observed is the same; return Kafka's observation."""
    expected = scenario(kafka)
    got = scenario(lake)
    assert got == expected, f"lakelog observed\n  {got!r}\nKafka observed\n  {expected!r}"
    assert lake.used == kafka.used, "both runs must name the same accepted differences"
    return expected


def without(mapping: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if key not in set(keys)}
