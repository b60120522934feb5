"""Bulk load a file into a topic-partition exactly once, with expected offsets (S2.4, KIP-27).

Source row `i` of a load is appended at offset `start + i`, where `start` is the
partition's LEO when the load first began. Every batch is a conditional append
whose commit also records, as Delta `txn` actions, the load's start offset and
how many source rows it has appended. A loader killed at any point and started
again reads both back from the table and carries on from the next row; a second
instance of the same load racing the first gets `OffsetMismatch`, reloads the
counters and skips what the other appended. Only a foreign writer in the
partition stops the load.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from tqdm import tqdm

from lakelog.errors import InvalidRequest, OffsetMismatch
from lakelog.log import BatchHeader, PartitionLog, open_partition
from lakelog.log.records import PAYLOAD_SCHEMA
from lakelog.store import Location, check_root

FORMATS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


@dataclass(frozen=True)
class LoadResult:
    """How a load ended: the offsets its rows occupy and what this run appended."""

    load_id: str
    start_offset: int
    total_rows: int
    appended_by_this_run: int
    resumed_from_row: int

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.total_rows


def default_load_id(source: Location | str) -> str:
    """A load is named by its source's bytes, so a touched or re-copied file resumes the same load."""
    digest = hashlib.sha256()
    with open_source(Location.of(source, what="source")) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def open_source(source: Location) -> Iterator[BinaryIO]:
    """The source's bytes, buffered (line iteration works), through the file-IO layer of its scheme."""
    with source.io.open_input(source.uri) as raw:
        yield io.BufferedReader(raw, 1 << 20)


def _app_ids(load_id: str) -> tuple[str, str]:
    return f"lakelog.load.{load_id}.start", f"lakelog.load.{load_id}.rows"


def load(
    root: str | Location,
    topic: str,
    source: str | os.PathLike | Location,
    *,
    partition: int = 0,
    format: str | None = None,
    key_column: str | None = None,
    batch_records: int = 10_000,
    load_id: str | None = None,
    progress: bool = True,
) -> LoadResult:
    """Append every row of `source` (Parquet, CSV or JSON lines) to `topic`-`partition` exactly once, in order.

    `source` is a local path or a URI of the root's kinds (`s3://...`, read with the root's storage settings).
    """
    root = check_root(root)
    path = Location.of(source, root.io.settings if not root.is_local else None, what="source")
    found = path.io.info(path.uri)
    if found is None or found.is_dir:
        raise InvalidRequest(f"source {path} is not a file")
    kind = source_format(path, format)
    if not isinstance(batch_records, int) or isinstance(batch_records, bool) or batch_records < 1:
        raise InvalidRequest(f"batch_records must be a positive integer, not {batch_records!r}")
    try:
        return _load(root, topic, path, kind, partition, key_column, batch_records, load_id, progress)
    except (pa.ArrowException, UnicodeDecodeError) as error:
        raise InvalidRequest(f"source {path.name} cannot be read as {kind}: {error}") from error


def source_format(path: Location, format: str | None = None) -> str:
    """`format` if given, else the format the file's suffix names; InvalidRequest if neither tells."""
    suffix = "." + path.name.rsplit(".", 1)[-1] if "." in path.name else ""
    kind = format or FORMATS.get(suffix.lower())
    if kind not in ("parquet", "csv", "jsonl"):
        raise InvalidRequest(f"cannot tell the format of {path.name}; pass format= parquet, csv or jsonl")
    return kind


def _load(
    root: Location,
    topic: str,
    path: Location,
    kind: str,
    partition: int,
    key_column: str | None,
    batch_records: int,
    load_id: str | None,
    progress: bool,
) -> LoadResult:
    load_id = load_id or default_load_id(path)
    start_id, rows_id = _app_ids(load_id)
    log = open_partition(root, topic, partition)
    log.refresh()
    start = log.table.app_version(start_id)
    if start is None:
        start = log.log_end_offset()
    done = log.table.app_version(rows_id) or 0
    resumed_from = done
    total = count_rows(path, kind)
    appended = 0
    with tqdm(total=total, initial=done, unit="rec", unit_scale=True, disable=not progress, desc=f"load {topic}-{partition}") as bar:
        position = 0
        for payload in source_payloads(path, kind, key_column, batch_records):
            batch_end = position + payload.num_rows
            while done < batch_end:
                rows = payload.slice(done - position)
                try:
                    log.append(
                        rows,
                        BatchHeader(expected_offset=start + done),
                        app_versions={start_id: start, rows_id: done + rows.num_rows},
                    )
                except OffsetMismatch as mismatch:
                    done = _recover(log, start_id, rows_id, start, done, mismatch)
                    bar.n = done
                    bar.refresh()
                    continue
                appended += rows.num_rows
                done += rows.num_rows
                bar.update(rows.num_rows)
            position = batch_end
    return LoadResult(load_id, start, total, appended, resumed_from)


def _recover(log: PartitionLog, start_id: str, rows_id: str, start: int, done: int, mismatch: OffsetMismatch) -> int:
    """After OffsetMismatch: continue from another instance's progress, or stop on a foreign write."""
    log.refresh()
    recorded = log.table.app_version(rows_id) or 0
    if log.table.app_version(start_id) == start and recorded > done and log.log_end_offset() == start + recorded:
        return recorded
    raise OffsetMismatch(
        f"partition {log.topic}-{log.partition} was written by someone else during the load "
        f"(LEO {log.log_end_offset()}, load expected {start + done}); nothing more was appended",
        expected_offset=start + done,
        log_end_offset=log.log_end_offset(),
    ) from mismatch


def count_rows(path: Location, kind: str) -> int:
    if kind == "parquet":
        return path.io.parquet_metadata(path.uri).num_rows
    with open_source(path) as handle:
        if kind == "csv":
            return sum(batch.num_rows for batch in pacsv.open_csv(handle))
        return sum(1 for line in handle if line.strip())


def source_payloads(path: Location, kind: str, key_column: str | None, batch_records: int) -> Iterator[pa.Table]:
    """The source as payload tables of `batch_records` rows (the last may be shorter).

    Parquet and CSV rows become JSON objects; JSON lines are kept as they are.
    The key is `key_column`'s value as text, or null.
    """
    if kind == "jsonl":
        yield from _jsonl_payloads(path, key_column, batch_records)
        return
    with open_source(path) as handle:
        if kind == "parquet":
            batches = pq.ParquetFile(handle).iter_batches(batch_size=batch_records)
        else:
            batches = pacsv.open_csv(handle)
        yield from _row_payloads(path, batches, key_column, batch_records)


def _row_payloads(path: Location, batches, key_column: str | None, batch_records: int) -> Iterator[pa.Table]:
    pending: list[dict] = []
    for batch in batches:
        if key_column is not None and key_column not in batch.schema.names:
            raise InvalidRequest(f"key column {key_column!r} is not a column of {path.name}")
        pending.extend(batch.to_pylist())
        while len(pending) >= batch_records:
            yield _rows_payload(pending[:batch_records], key_column)
            pending = pending[batch_records:]
    if pending:
        yield _rows_payload(pending, key_column)


def _rows_payload(rows: list[dict], key_column: str | None) -> pa.Table:
    values = [json.dumps(row, default=str, ensure_ascii=False).encode() for row in rows]
    keys = [None if key_column is None or row[key_column] is None else str(row[key_column]).encode() for row in rows]
    return _payload(values, keys)


def _jsonl_payloads(path: Location, key_column: str | None, batch_records: int) -> Iterator[pa.Table]:
    values: list[bytes] = []
    keys: list[bytes | None] = []
    with open_source(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.strip()
            if not line:
                continue
            key = None
            if key_column is not None:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise InvalidRequest(f"{path.name}:{number} is not JSON: {error.msg}") from error
                if isinstance(record, dict) and record.get(key_column) is not None:
                    key = str(record[key_column]).encode()
            values.append(line)
            keys.append(key)
            if len(values) == batch_records:
                yield _payload(values, keys)
                values, keys = [], []
    if values:
        yield _payload(values, keys)


def _payload(values: list[bytes], keys: list[bytes | None]) -> pa.Table:
    count = len(values)
    return pa.Table.from_arrays(
        [
            pa.nulls(count, PAYLOAD_SCHEMA.field("timestamp").type),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.nulls(count, PAYLOAD_SCHEMA.field("headers").type),
        ],
        schema=PAYLOAD_SCHEMA,
    )
