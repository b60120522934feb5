"""Transforming a topic into another exactly once per run (lakelog/jobs/transform.py).

What the Airflow operator's repeats come down to, without Airflow: runs with
new input between them, an attempt fenced by a newer one (S4.1), an attempt
that left its offsets pending in an open transaction (S4.2, S7.3), a stop
between batches, a group offset that retention left behind (S9.1), and bad
input refused before anything is written (S8.3).
Output rows and input offsets commit in one transaction (S7.1), so each input
row is in the output once (S7.4). The runs with
new input also run on an S3 root; the rest only on a local one (each
transaction is about ten commits, some seconds on the S3 emulator).
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import pyarrow as pa
import pytest
from helpers import table_fingerprint

from lakelog import Consumer, Producer, TopicPartition
from lakelog.client.admin.groups import list_offsets
from lakelog.client.partitioner import partition_for
from lakelog.errors import InvalidRequest, NonEmptyGroup, ProducerFenced, PurgeQueue, UnknownTopicOrPartition
from lakelog.jobs.transform import run_transform
from lakelog.log import READ_COMMITTED, PartitionLog, open_partition

INPUT_PARTITIONS = 3
OUTPUT_PARTITIONS = 2
TID = "lakelog.transform.test.tag.-1"


def produce(root: str, topic: str, ids: range) -> None:
    """Rows {"id": i} keyed k<i>, spread round-robin over the input's partitions."""
    producer = Producer({"lakelog.root": root})
    for i in ids:
        producer.produce(topic, key=f"k{i}", value=json.dumps({"id": i}), partition=i % INPUT_PARTITIONS)
    producer.flush()


def tag(batch: pa.Table) -> pa.Table:
    """Each input row once, its id and where it came from, keyed as it was."""
    values = [
        json.dumps({"id": json.loads(value)["id"], "source": f"{partition}@{offset}"})
        for value, partition, offset in zip(
            batch.column("value").to_pylist(),
            batch.column("partition").to_pylist(),
            batch.column("offset").to_pylist(),
            strict=True,
        )
    ]
    return pa.table({"key": batch.column("key"), "value": pa.array(values, pa.string()), "timestamp": batch.column("timestamp")})


def output_ids(root: str, topic: str) -> Counter:
    ids: Counter = Counter()
    for partition in range(OUTPUT_PARTITIONS):
        rows = open_partition(root, topic, partition).fetch(0, max_records=1_000_000, isolation_level=READ_COMMITTED).rows
        ids.update(json.loads(value)["id"] for value in rows.column("value").to_pylist())
    return ids


def committed_offsets(root: str, group: str, topic: str) -> dict[int, int]:
    listed = list_offsets(root, group, [(topic, p) for p in range(INPUT_PARTITIONS)], require_stable=True)
    return {tp.partition: tp.offset for tp in listed.topic_partitions}


def input_lso(root: str, topic: str) -> dict[int, int]:
    return {p: open_partition(root, topic, p).last_stable_offset() for p in range(INPUT_PARTITIONS)}


@pytest.fixture
def topics(make_topic) -> tuple[str, str]:
    return make_topic(partitions=INPUT_PARTITIONS, name="events"), make_topic(partitions=OUTPUT_PARTITIONS, name="tagged")


@pytest.mark.roots("local", "s3")
def test_S7_1_S7_4_runs_with_new_input_between_them_transform_each_row_once(lake, topics):
    source, target = topics
    produce(lake, source, range(150))
    batches: list[pa.Table] = []

    def recording_tag(batch: pa.Table) -> pa.Table:
        batches.append(batch)
        return tag(batch)

    first = run_transform(lake, source, target, "g", recording_tag, transactional_id=TID, max_records_per_transaction=75)
    assert (first.records_in, first.records_out, first.transactions) == (150, 150, 2)
    assert output_ids(lake, target) == Counter(dict.fromkeys(range(150), 1))
    assert committed_offsets(lake, "g", source) == input_lso(lake, source) == {0: 50, 1: 50, 2: 50}
    assert first.as_dict() == {
        "input_topic": source,
        "output_topic": target,
        "group_id": "g",
        "records_in": 150,
        "records_out": 150,
        "offsets": {"0": 50, "1": 50, "2": 50},
    }
    # Batches: one partition each, in offset order, within the budget, in the Kafka source's columns.
    assert all(b.num_rows <= 75 and len(set(b.column("partition").to_pylist())) == 1 for b in batches)
    assert batches[0].column_names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    # Output rows are spread by key as the Producer spreads them.
    for partition in range(OUTPUT_PARTITIONS):
        keys = (
            open_partition(lake, target, partition).fetch(0, max_records=1000, isolation_level=READ_COMMITTED).rows.column("key")
        )
        assert {partition_for(key, OUTPUT_PARTITIONS, "consistent_random") for key in keys.to_pylist()} <= {partition}

    produce(lake, source, range(150, 240))
    second = run_transform(lake, source, target, "g", tag, transactional_id=TID, max_records_per_transaction=75)
    assert (second.records_in, second.records_out) == (90, 90)
    assert output_ids(lake, target) == Counter(dict.fromkeys(range(240), 1))
    assert committed_offsets(lake, "g", source) == input_lso(lake, source) == {0: 80, 1: 80, 2: 80}

    # A run with nothing new writes nothing, not even an epoch bump (S8.3).
    before = table_fingerprint(lake)
    third = run_transform(lake, source, target, "g", tag, transactional_id=TID)
    assert (third.records_in, third.transactions, dict(third.offsets)) == (0, 0, {0: 80, 1: 80, 2: 80})
    assert table_fingerprint(lake) == before


BAD_OUTPUTS = {
    "no value column": (lambda batch: pa.table({"key": batch.column("key")}), "has no value column"),
    "an unknown column": (lambda batch: batch.select(["value", "offset"]), "has unknown column.s. offset:"),
    "a value of numbers": (lambda batch: pa.table({"value": batch.column("offset")}), "has column value of type int64"),
    "headers of the wrong shape": (
        lambda batch: pa.table({"value": batch.column("value"), "headers": pa.array([["h"]] * batch.num_rows)}),
        "has column headers of type list<item: string>",
    ),
    "not a table": (lambda batch: batch.to_pylist(), "holds a dict"),
    "a string": (lambda batch: "oops", "is a str"),
}


@pytest.mark.parametrize("case", sorted(BAD_OUTPUTS))
def test_S8_3_a_bad_output_schema_is_refused_and_nothing_is_written(lake, topics, case):
    source, target = topics
    produce(lake, source, range(30))
    before = table_fingerprint(lake)
    transform, words = BAD_OUTPUTS[case]
    with pytest.raises(InvalidRequest, match=words) as raised:
        run_transform(lake, source, target, "g", transform, transactional_id=TID)
    assert "\n" not in str(raised.value)
    assert f"transform output for {source}-0 offsets [0, 9]" in str(raised.value)
    assert table_fingerprint(lake) == before


@pytest.mark.parametrize("missing", ["input", "output"])
def test_S8_3_a_missing_topic_is_refused_before_anything_is_written(lake, topics, missing):
    source, target = topics
    produce(lake, source, range(30))
    before = table_fingerprint(lake)
    names = {"input": ("absent", target), "output": (source, "absent")}[missing]
    with pytest.raises(UnknownTopicOrPartition, match="topic absent does not exist"):
        run_transform(lake, *names, "g", tag, transactional_id=TID)
    assert table_fingerprint(lake) == before


def test_S4_1_an_attempt_fenced_by_a_newer_one_leaves_each_row_once(lake, topics, caplog):
    caplog.set_level(logging.INFO, logger="lakelog.jobs.transform")
    source, target = topics
    produce(lake, source, range(120))
    asked = {"n": 0}

    def newer_attempt_takes_over() -> bool:
        asked["n"] += 1
        if asked["n"] == 4:
            # The retry of a stalled attempt, while the old one has a transaction open: it fences it and finishes.
            assert (
                run_transform(lake, source, target, "g", tag, transactional_id=TID, max_records_per_transaction=30).records_in > 0
            )
        return False

    with pytest.raises(ProducerFenced):
        run_transform(
            lake,
            source,
            target,
            "g",
            tag,
            transactional_id=TID,
            max_records_per_transaction=30,
            should_stop=newer_attempt_takes_over,
        )
    assert output_ids(lake, target) == Counter(dict.fromkeys(range(120), 1))
    assert committed_offsets(lake, "g", source) == input_lso(lake, source)
    # The newer attempt says it fenced, the fenced one says what it left open.
    messages = [record.getMessage() for record in caplog.records if record.name == "lakelog.jobs.transform"]
    assert any(f"{TID} took over the transactional id, fencing earlier attempts" in m for m in messages), messages
    assert any(f"transaction of {TID} left to the attempt that fenced this one (PRODUCER_FENCED" in m for m in messages), messages


def test_S4_2_S7_3_offsets_left_pending_by_a_dead_attempt_are_aborted_and_the_run_goes_on(lake, topics):
    source, target = topics
    produce(lake, source, range(60))
    # A dead attempt of the same task: its output and its offsets are in a transaction nobody will end.
    dead = Producer({"lakelog.root": lake, "transactional.id": TID})
    dead.init_transactions()
    dead.begin_transaction()
    dead.produce(target, value=json.dumps({"id": -1}), partition=0)
    dead.flush()
    metadata = Consumer({"lakelog.root": lake, "group.id": "g"}).consumer_group_metadata()
    dead.send_offsets_to_transaction([TopicPartition(source, p, 20) for p in range(INPUT_PARTITIONS)], metadata)

    result = run_transform(lake, source, target, "g", tag, transactional_id=TID, max_records_per_transaction=25)
    assert result.records_in == 60
    assert output_ids(lake, target) == Counter(dict.fromkeys(range(60), 1))
    assert committed_offsets(lake, "g", source) == input_lso(lake, source)


def test_S4_5_a_run_told_to_stop_aborts_its_transaction_and_the_next_run_finishes(lake, topics, caplog):
    caplog.set_level(logging.INFO, logger="lakelog.jobs.transform")
    source, target = topics
    produce(lake, source, range(90))
    asked = {"n": 0}

    def stop_at_the_fourth_question() -> bool:
        asked["n"] += 1
        return asked["n"] >= 4

    with pytest.raises(PurgeQueue, match="told to stop"):
        run_transform(
            lake,
            source,
            target,
            "g",
            tag,
            transactional_id=TID,
            max_records_per_transaction=20,
            should_stop=stop_at_the_fourth_question,
        )
    stopped_at = committed_offsets(lake, "g", source)
    assert sum(output_ids(lake, target).values()) == sum(offset for offset in stopped_at.values() if offset > 0)
    for partition in range(OUTPUT_PARTITIONS):
        log = open_partition(lake, target, partition)
        assert log.last_stable_offset() == log.high_watermark()  # aborted, not left open
    assert any(
        record.levelno == logging.WARNING
        and record.getMessage().startswith(f"transaction of {TID} aborted: ")
        and "told to stop before its next batch" in record.getMessage()
        for record in caplog.records
    ), caplog.text
    run_transform(lake, source, target, "g", tag, transactional_id=TID, max_records_per_transaction=20)
    assert output_ids(lake, target) == Counter(dict.fromkeys(range(90), 1))


def test_S6_4_a_group_with_members_is_refused(lake, topics):
    source, target = topics
    produce(lake, source, range(10))
    member = Consumer({"lakelog.root": lake, "group.id": "shared", "auto.offset.reset": "earliest"})
    member.subscribe([source])
    member.poll(1.0)
    try:
        with pytest.raises(NonEmptyGroup, match="give it a group of its own"):
            run_transform(lake, source, target, "shared", tag, transactional_id=TID)
    finally:
        member.close()
    assert output_ids(lake, target) == Counter()


def test_S9_1_a_group_offset_below_the_log_start_starts_there(lake, topics, monkeypatch, caplog):
    source, target = topics
    produce(lake, source, range(30))
    run_transform(lake, source, target, "g", tag, transactional_id=TID)
    produce(lake, source, range(30, 60))
    # Retention removed offsets 10-14 of partition 0 (ids 30, 33, ..., 42) before the group read them.
    log_start = PartitionLog.log_start_offset
    monkeypatch.setattr(
        PartitionLog, "log_start_offset", lambda log: 15 if (log.topic, log.partition) == (source, 0) else log_start(log)
    )
    caplog.set_level(logging.WARNING, logger="lakelog.jobs.transform")
    result = run_transform(lake, source, target, "g", tag, transactional_id=TID)
    removed = set(range(30, 45, 3))
    assert result.records_in == 30 - len(removed)
    assert output_ids(lake, target) == Counter({i: 1 for i in range(60) if i not in removed})
    assert committed_offsets(lake, "g", source) == input_lso(lake, source) == {0: 20, 1: 20, 2: 20}
    assert f"{source}-0: the group's offset 10 is below the log start 15" in caplog.text
