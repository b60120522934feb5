"""Data is checked before it is returned: page checksums, and each file's rows against its add action's statistics.

A damaged data file is `CorruptRecord` naming the file, never rows of it; the records before it are still
delivered (a consumer gets the good records, then the error).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog import Consumer, KafkaException, TopicPartition
from lakelog.client.consumer.fetcher import fetched_offset
from lakelog.errors import CorruptRecord
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.fetch_pieces import pieces
from lakelog.log.partition_file import partition_files

# The S3 FileIO reads a whole file in one GET and decodes it from memory: both readers are checked (S12.1).
BOTH_ROOTS = pytest.mark.roots("local", "s3")


def _consume_all(root: str, topic: str) -> tuple[list[int], KafkaException | None]:
    """The offsets a Consumer poll loop delivers from offset 0, and the error that stopped it (None at the end)."""
    offsets: list[int] = []
    config = {"lakelog.root": root, "auto.offset.reset": "earliest", "enable.partition.eof": True}
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for _ in range(20):
            try:
                message = consumer.poll(1)
            except KafkaException as error:
                return offsets, error
            if message is None:
                continue
            if message.error() is not None:
                return offsets, None
            offsets.append(fetched_offset(message))
    return offsets, None


@BOTH_ROOTS
def test_a_flipped_byte_in_a_stored_value_is_corrupt_record_naming_the_file(root: str) -> None:
    """finding 4: one byte changed inside a stored value's page is CorruptRecord naming the file, not the wrong value."""
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    needle = b"the-value-that-is-damaged-0123456789"
    log.append(payload_table([b"before", needle, b"after"]))
    entry = partition_files(log.table)[0]
    path = log.table.file_path(entry)
    data = bytearray(log.table.io.read(path))
    at = bytes(data).find(needle)
    assert at > 0, "the value is stored as it is (no compression hides it)"
    data[at + 4] ^= 0x01
    log.table.io.write(path, bytes(data))
    offsets, error = _consume_all(root, "t")
    assert offsets == []
    assert error is not None and error.args[0].name() == "CORRUPT_MESSAGE"
    assert entry.path in str(error)


@BOTH_ROOTS
def test_a_data_file_copied_over_another_is_corrupt_record_after_the_records_before_it(root: str) -> None:
    """finding 4: one data file's bytes copied over another's is CorruptRecord naming that file and its offsets,
    and a Consumer's poll loop still delivers the records before it (no offset twice, none skipped)."""
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    for batch in range(3):
        log.append(payload_table([b"%d-a" % batch, b"%d-b" % batch]))
    first, second, _ = partition_files(log.table)
    io = log.table.io
    io.write(log.table.file_path(second), io.read(log.table.file_path(first)))
    offsets, error = _consume_all(root, "t")
    assert offsets == [0, 1]
    assert error is not None and error.args[0].name() == "CORRUPT_MESSAGE"
    assert second.path in str(error) and "offsets 2-3" in str(error)


def test_a_large_file_is_fetched_by_row_group_and_each_group_is_checked(root: str) -> None:
    """finding 11: a file larger than the fetch's budget is written in row groups and fetched one row group at a
    time, each checked against the footer's offsets; a fetch returns the rows of its first row group only."""
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    values: list[bytes | None] = [b"%06d" % index + b"x" * 2000 for index in range(3000)]
    log.append(payload_table(values))
    entry = partition_files(log.table)[0]
    found = list(pieces(log.table, iter([entry]), 0, entry.max_offset + 1, 64 << 10))
    assert len(found) > 1 and all(piece.row_groups is not None for piece in found)
    assert [piece.first for piece in found][0] == 0 and found[-1].last == entry.max_offset
    fetched = log.fetch(0, max_records=10_000, max_bytes=64 << 10)
    assert fetched.rows.num_rows == found[0].num_records and fetched.next_offset == found[1].first
    rows = log.fetch(fetched.next_offset, max_records=10_000, max_bytes=64 << 10).rows
    assert rows.column("offset")[0].as_py() == found[1].first


def test_a_file_whose_footer_disagrees_with_its_add_action_is_refused_before_any_row_is_read(root: str) -> None:
    """finding 4: a file rewritten with other offsets (one row fewer) is CorruptRecord, whatever columns are read."""
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    log.append(payload_table([b"a", b"b", b"c"]))
    entry = partition_files(log.table)[0]
    path = log.table.file_path(entry)
    rows = log.table.io.read_parquet(path)
    log.table.io.write_parquet(rows.slice(0, 2), path)
    reader = open_partition(root, "t", 0)
    with pytest.raises(CorruptRecord, match="footer counts 2 rows"):
        reader.table.read_file(entry, ["timestamp"])
    assert isinstance(rows, pa.Table)


def test_a_cold_lso_of_a_partition_without_transactions_opens_no_data_file(root: str) -> None:
    """finding 11: the add actions prove no file holds a transactional row or a marker, so a cold LSO reads none
    (every data file is made unreadable first: reading one would be CorruptRecord)."""
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    for batch in range(5):
        log.append(payload_table([b"%d" % batch] * 3))
    for entry in partition_files(log.table):
        log.table.io.write(log.table.file_path(entry), b"not parquet")
    cold = open_partition(root, "t", 0)
    assert cold.last_stable_offset() == 15
