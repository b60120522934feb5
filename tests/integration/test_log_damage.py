"""A log that takes no damage for truth and never builds on it (S1.1, S9.5, S12.3, S8.3).

Each test damages a partition's `_delta_log` as a power loss, an operator or a zombie would (an emptied commit, a
hole, a commit no lakelog writer made, a malformed action, a truncated commit or checkpoint, a deleted topic's late
writer) and checks that the damage is refused as CorruptRecord (not retriable) or, where the commits are all there,
survived, and that nothing is written on top of it: no acknowledged record lost, no offset given twice.
"""

from __future__ import annotations

import json

import pytest

from lakelog import Consumer, Producer, TopicPartition
from lakelog.errors import CorruptRecord, KafkaError, UnknownTopicOrPartition
from lakelog.log import create_topic, open_partition
from lakelog.log.records import PARTITION_SCHEMA
from lakelog.log.topic_changes import delete_topic
from lakelog.store import Location, Table, delete_table
from lakelog.store.delta.log import DeltaLog, checkpoint_name, commit_name

pytestmark = pytest.mark.roots("local", "s3")


def produce(root: str, topic: str, values: list[bytes], producer: Producer | None = None) -> list[tuple]:
    """Produce `values` to partition 0 (one flush each); the delivery reports as (error code or None, offset)."""
    producer = producer or Producer({"lakelog.root": root})
    reports: list[tuple] = []
    for value in values:
        producer.produce(
            topic,
            value=value,
            partition=0,
            on_delivery=lambda error, message: reports.append((error.code() if error else None, message.offset())),
        )
        producer.flush(30)
    return reports


def log_of(root: str, topic: str, partition: int = 0) -> DeltaLog:
    return DeltaLog(Location.of(root) / "topics" / topic / str(partition))


def commit_names(log: DeltaLog) -> list[str]:
    return sorted(name for name in log.names() if name.endswith(".json"))


def consume(root: str, topic: str, limit: int = 20) -> list:
    consumer = Consumer({"lakelog.root": root, "group.id": "reader", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    try:
        for _ in range(limit):
            message = consumer.poll(2.0)
            if message is None:
                break
            seen.append(message.error().code() if message.error() else (message.offset(), message.value()))
            if message.error():
                break
    finally:
        consumer.close()
    return seen


def test_finding_1_an_emptied_commit_is_corrupt_and_the_next_produce_writes_nothing(root, topic):
    name = topic()
    assert produce(root, name, [b"a", b"b", b"c"]) == [(None, 0), (None, 1), (None, 2)]
    log = log_of(root, name)
    log.io.write(log.file_uri(commit_name(3)), b"")  # the commit of offset 2, emptied as a power loss leaves it
    before = commit_names(log)

    with pytest.raises(CorruptRecord) as refused:
        open_partition(root, name, 0)
    assert "commit 3 is empty" in str(refused.value) and not refused.value.retriable
    reports = []
    try:
        reports = produce(root, name, [b"d"])
    except CorruptRecord:
        pass
    assert all(code == KafkaError.CORRUPT_MESSAGE for code, _ in reports)
    assert commit_names(log) == before  # no commit took the emptied one's offset (S8.3)
    with pytest.raises(CorruptRecord):
        consume(root, name)  # refused at assign: the partition's log cannot be read as it is


def test_finding_2_a_hole_in_the_log_is_corrupt_and_never_filled(root, topic):
    name = topic()
    produce(root, name, [b"a", b"b", b"c", b"d"])
    log = log_of(root, name)
    assert log.delete_commit(3)  # offset 2's commit gone, offset 3's kept
    with pytest.raises(CorruptRecord, match="commit 3 is missing while commit 4 is there"):
        open_partition(root, name, 0)
    with pytest.raises(CorruptRecord):
        produce(root, name, [b"new"])
    assert not log.commit_exists(3)  # the hole is evidence: never refilled
    assert log.read_commit(4) is not None


def test_a_commit_no_lakelog_writer_made_is_corrupt(root, topic):
    name = topic()
    produce(root, name, [b"a"])
    log = log_of(root, name)
    log.io.write(log.file_uri(commit_name(2)), json.dumps({"txn": {"appId": "x", "version": 1}}).encode() + b"\n")
    with pytest.raises(CorruptRecord, match="has no lakelog commit info"):
        open_partition(root, name, 0)


def test_finding_10_a_garbled_commit_or_a_malformed_action_is_corrupt_not_retriable(root, topic):
    name = topic()
    produce(root, name, [b"a", b"b"])
    log = log_of(root, name)
    data = log.read_commit_bytes(2)
    log.io.write(log.file_uri(commit_name(2)), data[: len(data) // 2])  # a torn write
    with pytest.raises(CorruptRecord) as torn:
        open_partition(root, name, 0)
    assert not torn.value.retriable and "\n" not in str(torn.value)

    actions = [json.loads(line) for line in data.splitlines()]
    for action in actions:
        if "add" in action:
            del action["add"]["path"]
    log.io.write(log.file_uri(commit_name(2)), b"\n".join(json.dumps(action).encode() for action in actions))
    with pytest.raises(CorruptRecord, match="malformed action"):
        open_partition(root, name, 0)


def test_finding_10_a_truncated_checkpoint_is_passed_over_for_the_commits(root, topic):
    name = topic({"checkpoint.interval.commits": 3})
    produce(root, name, [b"a", b"b", b"c", b"d"])
    log = log_of(root, name)
    checkpoint = log.file_uri(checkpoint_name(2))
    assert log.io.file_exists(checkpoint)
    log.io.write(checkpoint, log.io.read(checkpoint)[:100])

    partition = open_partition(root, name, 0)  # read from 0.json on: every commit is there
    assert partition.log_end_offset() == 4
    assert produce(root, name, [b"e"]) == [(None, 4)]
    assert [offset for offset, _ in consume(root, name)] == [0, 1, 2, 3, 4]


def test_finding_3_a_deleted_topics_late_writer_commits_nothing_into_it_or_its_successor(root, topic):
    name = topic()
    zombie = Producer({"lakelog.root": root})
    assert produce(root, name, [b"old-0", b"old-1"], zombie) == [(None, 0), (None, 1)]

    delete_topic(root, name)
    reports = produce(root, name, [b"late"], zombie)
    assert [code for code, _ in reports] == [KafkaError.UNKNOWN_TOPIC_OR_PART]

    create_topic(root, name, 1)
    assert produce(root, name, [b"new-0"]) == [(None, 0)]
    # The old producer's next record is refused: its partition is gone, or, opened anew, the new one has no state
    # for its producer id mid-sequence (Kafka's answer too).
    refused = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_PRODUCER_ID, KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER}
    assert produce(root, name, [b"late-2"], zombie)[0][0] in refused
    assert produce(root, name, [b"new-1", b"new-2"]) == [(None, 1), (None, 2)]
    assert consume(root, name) == [(0, b"new-0"), (1, b"new-1"), (2, b"new-2")]


def test_a_put_into_a_deleted_and_recreated_table_is_withdrawn(root):
    """The race the deletion mark cannot close alone: a writer decided before the delete puts after it (S9.5)."""
    location = Location.of(root) / "t"
    old, _ = Table.create(location, PARTITION_SCHEMA, {})
    old.append(PARTITION_SCHEMA.empty_table(), app_versions={"x": 1})
    old.append(PARTITION_SCHEMA.empty_table(), app_versions={"x": 2})
    delete_table(location)
    new, created = Table.create(location, PARTITION_SCHEMA, {})
    assert created
    for version in range(1, 4):
        new.append(PARTITION_SCHEMA.empty_table(), app_versions={"x": version})

    with pytest.raises(UnknownTopicOrPartition):
        old.append(PARTITION_SCHEMA.empty_table(), app_versions={"x": 9})  # put at 3 is taken; 3 is the new table's
    with pytest.raises(UnknownTopicOrPartition):
        Table(location, _snapshot_at(old)).append(PARTITION_SCHEMA.empty_table(), app_versions={"x": 9})
    log = DeltaLog(location)
    assert sorted(name for name in log.names() if name.endswith(".json")) == [commit_name(v) for v in range(4)]
    reopened = Table.open(location)
    assert reopened.version == 3 and reopened.table_id == new.table_id
    assert reopened.append(PARTITION_SCHEMA.empty_table(), app_versions={"x": 4}) == 4


def _snapshot_at(table: Table):
    """A copy of the old handle's snapshot moved to version 3 of its own table: its next put lands at 4, a free version."""
    snapshot = table._snapshot.copy()
    snapshot.version = 3
    return snapshot


def test_a_commit_that_adds_rows_without_its_log_end_offset_is_corrupt(root, topic):
    """Without the LEO `txn`, the next append would take the offsets of the rows it added (S1.1)."""
    name = topic()
    produce(root, name, [b"a", b"b"])
    log = log_of(root, name)
    lines = log.read_commit_bytes(2).splitlines()
    kept = [line for line in lines if b"lakelog.log_end_offset" not in line]
    assert len(kept) == len(lines) - 1
    log.io.write(log.file_uri(commit_name(2)), b"\n".join(kept) + b"\n")
    with pytest.raises(CorruptRecord, match="at or past the log end offset 1"):
        open_partition(root, name, 0).log_end_offset()


def test_damage_to_partition_0_refuses_its_writes_alone(root, topic):
    """Partition 0 carries the topic's config, but every partition does: the others still take records."""
    name = topic(partitions=2)
    produce(root, name, [b"a"])
    log = log_of(root, name)
    log.io.write(log.file_uri(commit_name(1)), b"")
    reports: list = []
    producer = Producer({"lakelog.root": root})
    for partition in (0, 1):
        producer.produce(
            name, value=b"x", partition=partition, on_delivery=lambda error, message: reports.append((error, message.partition()))
        )
    producer.flush(30)
    outcome = {partition: error.code() if error else None for error, partition in reports}
    assert outcome == {0: KafkaError.CORRUPT_MESSAGE, 1: None}
