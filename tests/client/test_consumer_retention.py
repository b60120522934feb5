"""A consumer whose position retention or delete_records passed follows auto.offset.reset (S9.1), as librdkafka."""

from __future__ import annotations

import pytest

from lakelog import Consumer
from lakelog.client.types import OFFSET_BEGINNING, TopicPartition
from lakelog.errors import KafkaError
from lakelog.log import open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.log.retention import delete_records, enforce_retention


def append(root, name, count, at_ms=None, start=0):
    values = [f"v{start + n}".encode() for n in range(count)]
    timestamps = None if at_ms is None else [at_ms] * count
    open_partition(root, name, 0).append(payload_table(values, timestamps_ms=timestamps))


def poll_all(consumer):
    """Every message (or error) the consumer has now, without waiting."""
    out = []
    while (message := consumer.poll(0)) is not None:
        out.append(message)
    return out


def offsets(messages):
    return [message.offset() for message in messages if message.error() is None]


@pytest.fixture
def sitting(root, topic):
    """A topic whose 6 records (2 files) a consumer has read up to its position 3; then the log start moves to 6."""

    def make(policy, trim, vacuumed=False):
        name = topic({"retention.ms": 1000})
        append(root, name, 3, at_ms=0)
        append(root, name, 3, at_ms=0, start=3)
        consumer = Consumer(
            {"lakelog.root": root, "auto.offset.reset": policy, "max.poll.records": 3, "max.partition.fetch.bytes": 1}
        )
        consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
        assert [consumer.poll(0).offset() for _ in range(3)] == [0, 1, 2]
        log = open_partition(root, name, 0)
        if trim == "retention":
            assert enforce_retention(log, 10_000).log_start_offset == 6
        else:
            assert delete_records(log, 6) == 6
        append(root, name, 3, start=6)
        if vacuumed:
            # The consumer's snapshot still lists the removed files: once vacuum deleted them, it must look again.
            log.refresh()
            active = {entry.path for entry in partition_files(log.table)}
            for entry in log.table.io.list(log.table.uri):
                if entry.name.endswith(".parquet") and entry.name not in active:
                    log.table.io.delete(entry.uri)
        else:
            # A fetch on the consumer's older snapshot may still read the removed files (the grace); it looks again here.
            assert consumer.get_watermark_offsets(TopicPartition(name, 0)) == (6, 9)
        return name, consumer

    return make


@pytest.mark.parametrize(("trim", "vacuumed"), [("retention", False), ("delete_records", False), ("retention", True)])
def test_s9_1_earliest_moves_to_the_new_log_start(sitting, trim, vacuumed):
    _, consumer = sitting("earliest", trim, vacuumed)
    assert offsets(poll_all(consumer)) == [6, 7, 8]


@pytest.mark.parametrize("trim", ["retention", "delete_records"])
def test_s9_1_latest_moves_to_the_end(root, sitting, trim):
    name, consumer = sitting("latest", trim)
    assert poll_all(consumer) == []
    append(root, name, 2, start=9)
    assert offsets(poll_all(consumer)) == [9, 10]


@pytest.mark.parametrize("vacuumed", [False, True])
def test_s9_1_error_reports_once_until_the_application_seeks(root, sitting, vacuumed):
    name, consumer = sitting("error", "delete_records", vacuumed)
    [message] = poll_all(consumer)
    assert message.error().code() == KafkaError._AUTO_OFFSET_RESET
    assert (message.topic(), message.partition(), message.offset()) == (name, 0, 3)
    assert "auto.offset.reset=error" in message.error().str()
    assert poll_all(consumer) == []  # reported once; no fetch there until a seek
    consumer.seek(TopicPartition(name, 0, OFFSET_BEGINNING))
    assert offsets(poll_all(consumer)) == [6, 7, 8]
