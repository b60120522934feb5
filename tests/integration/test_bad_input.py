"""Bad input to the log layer is refused with a named error and writes nothing (S8.3)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from helpers import unchanged

from lakelog.errors import (
    CorruptRecord,
    InvalidConfig,
    InvalidPartitions,
    InvalidRequest,
    InvalidTopic,
    MsgSizeTooLarge,
    OffsetOutOfRange,
    PolicyViolation,
    UnknownTopicOrPartition,
)
from lakelog.log import (
    BatchHeader,
    allocate_producer_id,
    create_topic,
    list_topics,
    open_partition,
    payload_table,
    topic_config,
)
from lakelog.log.partition_file import partition_files
from lakelog.log.records import MAX_EPOCH, MAX_SEQUENCE


@pytest.fixture
def log(root, topic):
    partition = open_partition(root, topic(), 0)
    partition.append(payload_table([b"a", b"b"]))
    return partition


# -- payloads -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        "text",
        b"bytes",
        [b"a", b"b"],
        None,
        {"value": [b"a"]},
        pa.record_batch({"value": pa.array([b"a"])}),
        pa.table({"value": [1, 2]}),
        pa.table({"value": [{"a": 1}]}),
        pa.table({"key": [[1, 2]]}),
        pa.table({"timestamp": ["yesterday"]}),
        pa.table({"headers": [["not", "pairs"]]}),
        pa.table({"value": [b"a"], "offset": [5]}),
        pa.table({"bogus": [b"a"]}),
    ],
    ids=lambda payload: type(payload).__name__ if not isinstance(payload, pa.Table) else ",".join(payload.column_names),
)
def test_wrong_payload_refused_nothing_written(log, payload):
    with unchanged(log.table.uri), pytest.raises(InvalidRequest) as raised:
        log.append(payload)
    assert type(raised.value) is InvalidRequest
    assert log.log_end_offset() == 2


def test_empty_payload_refused_nothing_written(log):
    with unchanged(log.table.uri), pytest.raises(PolicyViolation):
        log.append(payload_table([]))


def test_payload_may_not_choose_its_offsets_or_header(log):
    """Only payload columns are taken from the caller: offsets and the batch header are the log's."""
    with unchanged(log.table.uri), pytest.raises(InvalidRequest) as raised:
        log.append(pa.table({"value": [b"x"], "producer_id": [5]}))
    assert "producer_id" in str(raised.value)


@pytest.mark.parametrize(
    "payload",
    [
        payload_table([b"a", b"x" * 2001, b"c"]),
        payload_table([b"a", b"v"], keys=[None, b"k" * 1000], headers=[None, [("h" * 500, b"y" * 500)]]),
    ],
    ids=["value", "key and headers"],
)
def test_record_past_topic_max_message_bytes_refused_nothing_written(root, topic, payload):
    """finding 6: the append refuses a batch holding a record past the topic's max.message.bytes (headers counted),
    whole, naming the record: the table's version and files stay as they were (S8.3)."""
    log = open_partition(root, topic(config={"max.message.bytes": 2000}), 0)
    log.append(payload_table([b"first"]))
    with unchanged(log.table.uri), pytest.raises(MsgSizeTooLarge) as raised:
        log.append(payload)
    assert (raised.value.index, raised.value.max_bytes) == (1, 2000)
    assert raised.value.size > 2000
    assert log.version == open_partition(root, log.topic, 0).version == 1
    assert log.log_end_offset() == 1


def test_record_at_topic_max_message_bytes_appended(root, topic):
    """finding 6: exactly max.message.bytes (key, value, header name and value) is taken."""
    log = open_partition(root, topic(config={"max.message.bytes": 2000}), 0)
    landed = log.append(payload_table([b"v" * 1000], keys=[b"k" * 500], headers=[[("h" * 250, b"y" * 250)]]))
    assert landed.base_offset == 0


# -- batch headers ------------------------------------------------------------------


@pytest.mark.parametrize("field", ["producer_id", "producer_epoch", "base_sequence"])
@pytest.mark.parametrize("value", ["1", 1.0, True, None, [1]])
def test_batch_header_non_int_field_refused(field, value):
    with pytest.raises(InvalidRequest) as raised:
        BatchHeader(**{"producer_id": 1, "producer_epoch": 0, "base_sequence": 0, field: value})
    assert field in str(raised.value)


@pytest.mark.parametrize(
    "fields",
    [
        {"producer_id": -2},
        {"producer_id": 1, "producer_epoch": -2, "base_sequence": 0},
        {"producer_id": 1, "producer_epoch": MAX_EPOCH + 1, "base_sequence": 0},
        {"producer_id": 1, "producer_epoch": 0, "base_sequence": MAX_SEQUENCE + 1},
        {"producer_id": 1, "producer_epoch": 0, "base_sequence": -2},
        {"producer_id": 1},  # idempotent without epoch and sequence
        {"producer_id": 1, "producer_epoch": 0},  # idempotent without a sequence
    ],
)
def test_batch_header_out_of_range_refused(fields):
    with pytest.raises(InvalidRequest):
        BatchHeader(**fields)


@pytest.mark.parametrize("expected_offset", [-1, -(2**40), 1.0, "0", True])
def test_negative_or_non_int_expected_offset_refused(expected_offset):
    with pytest.raises(InvalidRequest) as raised:
        BatchHeader(expected_offset=expected_offset)
    assert "expected_offset" in str(raised.value)


@pytest.mark.parametrize("flag", ["false", 0, None])
def test_batch_header_non_bool_is_transactional_refused(flag):
    with pytest.raises(InvalidRequest):
        BatchHeader(is_transactional=flag)


@pytest.mark.parametrize("header", [{"producer_id": 1}, None, (1, 0, 0)])
def test_header_that_is_not_a_batch_header_refused(log, header):
    with unchanged(log.table.uri), pytest.raises(InvalidRequest):
        log.append(payload_table([b"x"]), header)


# -- fetch arguments ----------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"start_offset": "0"},
        {"start_offset": 0.0},
        {"start_offset": None},
        {"start_offset": True},
        {"start_offset": 0, "max_records": "5"},
        {"start_offset": 0, "max_bytes": 1.5},
        {"start_offset": 0, "max_records": -1},
    ],
)
def test_fetch_bad_arguments_refused(log, arguments):
    with unchanged(log.table.uri), pytest.raises(OffsetOutOfRange):
        log.fetch(**arguments)


# -- topic names, config, roots -----------------------------------------------------

BAD_NAMES = ["", ".", "..", "a" * 250, "a/b", "../escape", "a b", "/abs", None, 7]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_topic_name_refused_nothing_written(root, name):
    with unchanged(root):
        with pytest.raises(InvalidTopic):
            create_topic(root, name)
        with pytest.raises(InvalidTopic):
            open_partition(root, name, 0)
        with pytest.raises(InvalidTopic):
            topic_config(root, name)
    assert not (Path(root).parent / "escape").exists()


def test_longest_legal_topic_name_accepted(root):
    name = "a-b.c_" + "x" * 243
    assert len(name) == 249
    create_topic(root, name)
    assert list_topics(root) == [name]
    assert open_partition(root, name, 0).append(payload_table([b"x"])).base_offset == 0


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"retention.ms": -2}, "retention.ms"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"no.such.key": 1}, "no.such.key"),
        ({"check.expected.offsets": "maybe"}, "check.expected.offsets"),
        ({"checkpoint.interval.commits": 0}, "checkpoint.interval.commits"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"producer.id.expiration.ms": "soon"}, "producer.id.expiration.ms"),
    ],
)
def test_bad_topic_config_refused_naming_key_nothing_written(root, overrides, key):
    with unchanged(root), pytest.raises(InvalidConfig) as raised:
        create_topic(root, "t", config=overrides)
    assert raised.value.key == key
    assert key in str(raised.value)


@pytest.mark.parametrize("partitions", [0, -1, "2", 1.0, True])
def test_bad_partition_count_refused_nothing_written(root, partitions):
    with unchanged(root), pytest.raises(InvalidPartitions):
        create_topic(root, "t", partitions)


def test_root_that_is_a_file_refused(tmp_path):
    file = tmp_path / "root-file"
    file.write_bytes(b"not a folder")
    with unchanged(str(tmp_path)):
        for call in (
            lambda: create_topic(str(file), "t"),
            lambda: open_partition(str(file), "t", 0),
            lambda: list_topics(str(file)),
            lambda: allocate_producer_id(str(file)),
        ):
            with pytest.raises(InvalidConfig) as raised:
                call()
            assert raised.value.key == "lakelog.root"
            assert str(file) in str(raised.value)


@pytest.mark.parametrize("bad_root", ["", None, 5])
def test_root_that_is_no_path_refused(bad_root):
    with pytest.raises(InvalidConfig):
        create_topic(bad_root, "t")


# -- unknown topics and partitions --------------------------------------------------


def test_unknown_topic_refused_nothing_written(root, topic):
    topic(name="known")
    with unchanged(root):
        for call in (lambda: open_partition(root, "unknown", 0), lambda: topic_config(root, "unknown")):
            with pytest.raises(UnknownTopicOrPartition) as raised:
                call()
            assert raised.value.topic == "unknown"


@pytest.mark.parametrize("partition", [2, 3, -1, "0", True, 0.0, None])
def test_unknown_partition_refused_nothing_written(root, topic, partition):
    name = topic(partitions=2)
    with unchanged(root), pytest.raises(UnknownTopicOrPartition):
        open_partition(root, name, partition)


# -- corrupt data files -------------------------------------------------------------


def _three_batches(root, topic):
    log = open_partition(root, topic(), 0)
    for i in range(3):
        log.append(payload_table([f"{i}-{j}".encode() for j in range(2)]), BatchHeader(1, 0, 2 * i))
    files = partition_files(log.table)
    assert [(entry.min_offset, entry.max_offset) for entry in files] == [(0, 1), (2, 3), (4, 5)]
    return log, files


def test_deleted_data_file_fetch_raises_corrupt_record_naming_it(root, topic):
    log, files = _three_batches(root, topic)
    missing = log.table.file_path(files[1])
    os.remove(missing)
    for reader in (log, open_partition(root, log.topic, 0)):
        with unchanged(log.table.uri):
            # The offsets before the lost file are returned first; the fetch that starts at it fails.
            before = reader.fetch(0)
            assert (before.rows.column("offset").to_pylist(), before.next_offset) == ([0, 1], 2)
            with pytest.raises(CorruptRecord) as raised:
                reader.fetch(2)
            assert files[1].path in str(raised.value)
            assert "missing" in str(raised.value)
            assert raised.value.path == missing
            # Data outside the lost file is still served.
            assert reader.fetch(4).rows.column("offset").to_pylist() == [4, 5]
            assert reader.fetch(0, max_records=2).rows.column("offset").to_pylist() == [0, 1]


def test_garbage_data_file_fetch_raises_corrupt_record_naming_it(root, topic):
    log, files = _three_batches(root, topic)
    garbage = log.table.file_path(files[0])
    Path(garbage).write_bytes(b"this is not parquet" * 100)
    with unchanged(log.table.uri):
        with pytest.raises(CorruptRecord) as raised:
            log.fetch(0)
        assert files[0].path in str(raised.value)
        assert "unreadable" in str(raised.value)
        assert raised.value.path == garbage
        assert log.fetch(2).rows.column("offset").to_pylist() == [2, 3, 4, 5]


def test_append_that_must_read_a_corrupt_file_refuses_and_writes_nothing(root, topic):
    """A retry's duplicate search reads the producer's files: a lost file is CorruptRecord, not a second append."""
    log, files = _three_batches(root, topic)
    Path(log.table.file_path(files[0])).write_bytes(b"garbage")
    with unchanged(log.table.uri), pytest.raises(CorruptRecord) as raised:
        log.append(payload_table([b"0-0", b"0-1"]), BatchHeader(1, 0, 0))
    assert files[0].path in str(raised.value)
    assert log.log_end_offset() == 6
