"""One Apache Kafka broker per test session (KRaft, loopback, its jars fetched by ./dev), and a fresh lakelog root per
test, so a scenario runs through confluent-kafka against Kafka and through lakelog against the root.

Tests here are marked `kafka` and `slow`; they skip, saying why, only when the broker's jars are absent.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from bench._kafka import JARS_ENV, KafkaBroker, jars_dir

from .harness import System, kafka_system, lakelog_system


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    jars = jars_dir()
    if jars is None:
        pytest.skip(f"Apache Kafka's jars are absent (${JARS_ENV} unset or not fetched): ./dev fetches them")
    broker = KafkaBroker(jars).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka(kafka_broker: KafkaBroker) -> System:
    """confluent-kafka against the broker; topics get names unique to the test."""
    return kafka_system(kafka_broker.bootstrap, prefix=f"t{uuid.uuid4().hex[:8]}-")


@pytest.fixture
def lake(root: str) -> System:
    """lakelog against a fresh root."""
    return lakelog_system(root)


@pytest.fixture
def systems(kafka: System, lake: System) -> tuple[System, System]:
    return kafka, lake
