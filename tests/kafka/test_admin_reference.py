"""Producer errors and the AdminClient, one program on Kafka and on lakelog: produce to an unknown topic or partition;
delete_records, list_offsets and watermarks; create_partitions; incremental_alter_configs and describe_configs."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .harness import System, compare, deliveries, error_of

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("kafka-broker")]


def produce_errors(system: System) -> dict[str, Any]:
    topic = system.create_topic("known", partitions=2)
    # librdkafka waits topic.metadata.propagation.max.ms for a missing topic to appear, then fails its messages.
    producer = system.Producer(system.conf(allow_auto_create_topics=False, topic_metadata_propagation_max_ms=1000))
    observed: dict[str, Any] = {}
    observed["unknown partition"] = produce_error(producer, topic, 7)
    unknown = system.topic("never-created")
    started = time.monotonic()
    observed["unknown topic"] = produce_error(producer, unknown, -1)
    observed["unknown topic: reported without waiting for it to appear"] = system.accepted(
        "missing-topic-no-wait", time.monotonic() - started < 0.9, kafka=False, lakelog=True
    )
    return observed


def produce_error(producer: Any, topic: str, partition: int) -> Any:
    """The error a produce() to a partition met: raised at once or in its delivery report. Which of the two depends,
    in librdkafka, on whether the topic's metadata is cached yet: a program handles both, so both count as one."""
    try:
        reports = deliveries(
            producer,
            lambda cb: producer.produce(topic, b"v", on_delivery=cb, **({} if partition < 0 else {"partition": partition})),
        )
    except Exception as error:  # noqa: BLE001 - the refusal is the observation
        return error_of(error.args[0])
    assert len(reports) == 1, reports
    return reports[0]["error"]


def test_produce_errors_for_unknown_topics_and_partitions(systems: tuple[System, System]) -> None:
    compare(produce_errors, *systems)


def records_and_offsets(system: System) -> dict[str, Any]:
    topic = system.create_topic("records", partitions=2)
    producer = system.Producer(system.conf())
    for n in range(10):
        producer.produce(topic, value=f"v{n}".encode(), partition=n % 2)
    producer.flush(30)
    admin = system.admin()
    tp = system.TopicPartition
    spec = system.OffsetSpec
    observed: dict[str, Any] = {}
    deleted = admin.delete_records([tp(topic, 0, 3), tp(topic, 1, -1)])
    observed["delete_records"] = sorted((t.partition, f.result(30).low_watermark) for t, f in deleted.items())
    beyond = admin.delete_records([tp(topic, 0, 99)])
    observed["delete beyond the end"] = [error_of(_exception(f).args[0]) for f in beyond.values()]
    # Not max_timestamp: records made within one millisecond tie, and Kafka answers from its time index, which
    # delete_records does not trim.
    for name, offset_spec in (("earliest", spec.earliest()), ("latest", spec.latest())):
        listed = admin.list_offsets({tp(topic, p): offset_spec for p in range(2)})
        observed[f"list_offsets {name}"] = sorted((t.partition, f.result(30).offset) for t, f in listed.items())
    consumer = system.Consumer(system.conf(group_id=system.group("wm")))
    observed["watermarks"] = [consumer.get_watermark_offsets(tp(topic, p), 10) for p in range(2)]
    consumer.assign([tp(topic, 0, system.OFFSET_BEGINNING)])
    first = consumer.poll(10)
    observed["first readable"] = (first.offset(), first.value())
    consumer.close()
    return observed


def _exception(future: Any) -> BaseException:
    try:
        future.result(30)
    except Exception as error:  # noqa: BLE001 - the future's exception is the observation
        return error
    raise AssertionError("the future succeeded")


def test_delete_records_list_offsets_and_watermarks(systems: tuple[System, System]) -> None:
    compare(records_and_offsets, *systems)


def partitions_added(system: System) -> dict[str, Any]:
    topic = system.create_topic("grow", partitions=2)
    admin = system.admin()
    observed: dict[str, Any] = {}
    admin.create_partitions([system.NewPartitions(topic, 4)])[topic].result(30)
    if system.is_kafka:
        from .harness import wait_for_metadata

        wait_for_metadata(system, topic, 4)
    observed["partitions"] = sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    for count in (3, 4):
        try:
            admin.create_partitions([system.NewPartitions(topic, count)])[topic].result(30)
            observed[f"to {count}"] = None
        except Exception as error:  # noqa: BLE001 - the refusal is the observation
            observed[f"to {count}"] = error_of(error.args[0])
    producer = system.Producer(system.conf())
    observed["produce to partition 3"] = deliveries(
        producer, lambda cb: producer.produce(topic, b"v", partition=3, on_delivery=cb)
    )
    return observed


def test_create_partitions(systems: tuple[System, System]) -> None:
    compare(partitions_added, *systems)


def topic_configs(system: System) -> dict[str, Any]:
    topic = system.create_topic("configs", config={"retention.ms": "86400000"})
    admin = system.admin()
    resource = system.ConfigResource
    op = system.AlterConfigOpType
    entry = system.ConfigEntry
    observed: dict[str, Any] = {}

    def describe(*names: str) -> dict[str, Any]:
        entries = admin.describe_configs([resource("TOPIC", topic)])
        found = next(iter(entries.values())).result(30)
        return {name: found[name].value for name in names}

    def alter(*changes: tuple[str, Any, str | None]) -> Any:
        changed = resource(
            "TOPIC", topic, incremental_configs=[entry(name, value, incremental_operation=o) for name, o, value in changes]
        )
        try:
            next(iter(admin.incremental_alter_configs([changed]).values())).result(30)
        except Exception as error:  # noqa: BLE001 - the refusal is the observation
            return error_of(error.args[0])
        system.settle()
        return None

    observed["created"] = describe("retention.ms", "cleanup.policy")
    observed["set"] = (alter(("retention.ms", op.SET, "3600000")), describe("retention.ms"))
    observed["delete"] = (alter(("retention.ms", op.DELETE, None)), describe("retention.ms"))
    observed["append compact"] = (alter(("cleanup.policy", op.APPEND, "compact")), describe("cleanup.policy"))
    observed["subtract compact"] = (alter(("cleanup.policy", op.SUBTRACT, "compact")), describe("cleanup.policy"))
    policy = next(iter(admin.describe_configs([resource("TOPIC", topic)]).values())).result(30)["cleanup.policy"]
    observed["source of a value set to the default"] = system.accepted(
        "config-source", (policy.value, policy.is_default), kafka=("delete", False), lakelog=("delete", True)
    )
    observed["subtract delete"] = (alter(("cleanup.policy", op.SUBTRACT, "delete")), describe("cleanup.policy"))
    observed["append delete again"] = (alter(("cleanup.policy", op.APPEND, "delete")), describe("cleanup.policy"))
    observed["set two, appended one present"] = (
        alter(("cleanup.policy", op.SET, "compact,delete")),
        alter(("cleanup.policy", op.APPEND, "delete")),
        describe("cleanup.policy"),
    )
    observed["subtract both"] = (alter(("cleanup.policy", op.SUBTRACT, "compact,delete")), describe("cleanup.policy"))
    observed["append to a non-list"] = alter(("retention.ms", op.APPEND, "5"))
    observed["a value not in the list's choices"] = alter(("cleanup.policy", op.SET, "bogus"))
    observed["unknown key"] = alter(("no.such.config", op.SET, "1"))
    try:
        group_configs = next(iter(admin.describe_configs([resource("GROUP", system.group("configs"))]).values())).result(30)
        group_answer: Any = "consumer.session.timeout.ms" in group_configs
    except Exception as error:  # noqa: BLE001 - the refusal is the observation
        group_answer = error_of(error.args[0])["code"]
    observed["a GROUP resource"] = system.accepted("read-only-broker", group_answer, kafka=True, lakelog="INVALID_REQUEST")
    return observed


def test_incremental_alter_configs_and_describe_configs(systems: tuple[System, System]) -> None:
    compare(topic_configs, *systems)
