"""A framework's stateful program on the classic protocol's range assignor (S6.2): a state store per input
partition, its changelog partition of the same number, subscribed together. Two instances: each changelog partition
is restored by the member that owns its input partition, and the counts carry on across the rebalance."""

from __future__ import annotations

import time

import pytest

from lakelog import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

pytestmark = pytest.mark.roots("local")

PARTITIONS = 4
KEYS = 3


class StoreApp:
    """One instance: counts per key in a store per input partition, each change written to the changelog."""

    def __init__(self, root: str, name: str, events: str, changelog: str) -> None:
        self.root, self.name, self.events, self.changelog = root, name, events, changelog
        self.stores: dict[int, dict[bytes, int]] = {}
        self.restored: list[int] = []
        self.missing_state: list[int] = []
        self.producer = Producer({"bootstrap.servers": root})
        self.consumer = Consumer(
            {
                "bootstrap.servers": root,
                "group.id": "stateful",
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "heartbeat.interval.ms": 50,
            }
        )
        self.consumer.subscribe([events, changelog], on_assign=self.on_assign, on_revoke=self.on_revoke)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)
        changelogs = [tp for tp in partitions if tp.topic == self.changelog]
        consumer.pause(changelogs)  # read by the restore below, never as input
        owned = {tp.partition for tp in changelogs}
        for tp in partitions:
            if tp.topic != self.events:
                continue
            if tp.partition not in owned:
                self.missing_state.append(tp.partition)  # its store lives on another member
                continue
            self.stores[tp.partition] = self.restore(tp.partition)
            self.restored.append(tp.partition)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.stores = {}
        consumer.unassign()

    def restore(self, partition: int) -> dict[bytes, int]:
        store: dict[bytes, int] = {}
        with Consumer({"bootstrap.servers": self.root, "enable.partition.eof": True}) as reader:
            reader.assign([TopicPartition(self.changelog, partition, OFFSET_BEGINNING)])
            while True:
                message = reader.poll(5)
                assert message is not None, "no partition EOF"
                if message.error() is not None:
                    return store
                store[message.key()] = int(message.value())

    def step(self) -> int:
        messages = [m for m in self.consumer.consume(50, 0.05) if m.error() is None and m.topic() == self.events]
        for message in messages:
            store = self.stores.get(message.partition())
            if store is None:
                continue  # no state restored for it: the program cannot count it
            store[message.key()] = store.get(message.key(), 0) + 1
            self.producer.produce(
                self.changelog, key=message.key(), value=str(store[message.key()]), partition=message.partition()
            )
        if messages:
            self.producer.flush()
            self.consumer.commit(asynchronous=False)
        return len(messages)


def produce_events(root: str, events: str, rounds: int) -> None:
    producer = Producer({"lakelog.root": root})
    for _ in range(rounds):
        for partition in range(PARTITIONS):
            for key in range(KEYS):
                producer.produce(events, key=f"p{partition}k{key}", value="1", partition=partition)
    producer.flush()


def run_until(apps: list[StoreApp], done, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, [(app.name, app.stores, app.missing_state) for app in apps]
        for app in apps:
            app.step()


def test_S6_2_range_assignor_restores_each_changelog_partition_on_the_owner_of_its_input(root, topic):
    events = topic(name="events", partitions=PARTITIONS)
    changelog = topic(name="events-store-changelog", partitions=PARTITIONS)
    first = StoreApp(root, "first", events, changelog)
    produce_events(root, events, 2)
    run_until([first], lambda: sum(sum(s.values()) for s in first.stores.values()) == 2 * PARTITIONS * KEYS)

    second = StoreApp(root, "second", events, changelog)
    run_until([first, second], lambda: len(first.stores) == len(second.stores) == PARTITIONS // 2)
    produce_events(root, events, 3)
    apps = [first, second]

    def counted() -> bool:
        return (
            all(count == 5 for app in apps for store in app.stores.values() for count in store.values())
            and sum(len(store) for app in apps for store in app.stores.values()) == PARTITIONS * KEYS
        )

    run_until(apps, counted)
    assert first.missing_state == second.missing_state == []
    # Each instance restored exactly the changelog partitions of the input partitions it owns.
    # range gives each member a run of input partitions (by sorted member id) with the changelog partitions of
    # the same numbers, and each instance restored exactly those.
    assert sorted([sorted(first.stores), sorted(second.stores)]) == [[0, 1], [2, 3]]
    assert set(second.restored) == set(second.stores)
    for app in apps:
        app.consumer.close()
