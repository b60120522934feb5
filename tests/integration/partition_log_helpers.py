"""What the partition-log tests share: T0 for `helpers.FakeClock`, batches, views of a partition's table, and the S8.3 check."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable
from helpers import table_fingerprint

from lakelog.log import BatchHeader, PartitionLog, open_partition, payload_table
from lakelog.store import Location

T0 = 1_700_000_000_000


def batch(*values: bytes):
    return payload_table(list(values))


def numbered(prefix: str, count: int):
    return payload_table([f"{prefix}{i}".encode() for i in range(count)])


def all_rows(log: PartitionLog):
    return log.fetch(log.log_start_offset(), max_records=1_000_000, max_bytes=1 << 40).rows


def delta_log_entries(log: PartitionLog) -> list[str]:
    return sorted(entry.name for entry in log.table.io.list(log.table.child_uri("_delta_log")))


def data_files(log: PartitionLog) -> set[str]:
    return {entry.name for entry in log.table.location.list() if entry.name.endswith(".parquet")}


def commit_actions(log: PartitionLog, version: int) -> list[dict]:
    text = log.table.io.read(log.table.child_uri(f"_delta_log/{version:020d}.json")).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def drop_commits_up_to_last_checkpoint(log: PartitionLog) -> int:
    """Delete the commits the last checkpoint covers, as log cleanup does; returns the checkpoint's version."""
    io = log.table.io
    last_checkpoint = json.loads(io.read(log.table.child_uri("_delta_log/_last_checkpoint")))["version"]
    for version in range(last_checkpoint + 1):
        assert io.delete(log.table.child_uri(f"_delta_log/{version:020d}.json"))
    return last_checkpoint


def delta_table(log: PartitionLog, version: int | None = None) -> DeltaTable:
    """The partition's table opened by delta-rs directly (an independent reader), on any kind of root."""
    return DeltaTable(log.table.uri, version=version, storage_options=log.table.io.delta_options())


def on_object_store(root: str) -> bool:
    """S3 variants make fewer commits where their number is not the point (one costs ~10x a local one)."""
    return not Location.of(root).is_local


def refuses(log: PartitionLog, error: type[Exception], payload, header: BatchHeader = BatchHeader()):
    """Append must raise `error` and leave the table byte-for-byte and version-for-version as it was (S8.3)."""
    before, version = table_fingerprint(log.table.uri), log.version
    with pytest.raises(error) as raised:
        log.append(payload, header)
    assert type(raised.value) is error
    assert table_fingerprint(log.table.uri) == before
    assert log.version == version
    assert open_partition_fresh(log).version == version
    return raised.value


def open_partition_fresh(log: PartitionLog) -> PartitionLog:
    """A brand-new PartitionLog on the same table, as another process would open it."""
    root = log.table.uri.rsplit("/", 3)[0]  # <root>/topics/<topic>/<partition>
    return open_partition(root, log.topic, log.partition)
