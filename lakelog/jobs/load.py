"""Bulk load a file into a topic-partition exactly once, with expected offsets (S2.4, KIP-27).

Source row `i` of a load is appended at offset `start + i`, where `start` is the
partition's LEO when the load first began. Every batch is a conditional append
whose last row carries the load's dedupe record as the header `lakelog.load`:
the load id, its start offset and how many source rows it has appended with
that batch. A loader killed at any point and started again finds the newest
such row (scanning the newest files whose statistics say they hold rows
written without a producer id, as loads write them) and carries on from the
next row; a second instance of the same load racing the first gets
`OffsetMismatch`, reads the record again and skips what the other appended.
Only a foreign writer in the partition stops the load.

A topic with a quality suite is loaded as one transaction instead,
so its whole file is judged before anything is published (S11.1-S11.3): the
transactional id `lakelog.load.<load id>`, batch 0, through
TransactionalBatchWriter's gate. A failing enforce suite raises
PolicyViolation with nothing published, a dead-letter one sends the rows to
`<topic>.dlq`; a run again of a committed load appends nothing (S10.2), one
of a refused load validates again.

The record lives exactly as long as the rows it protects (S9.4): when retention
or delete-records removes the load's last batch, the record goes with it and
the partition's state holds nothing per load. Tables written before kept the
record as Delta `txn` ids (`lakelog.load.<id>.start/.rows`, never dropped): they
are still read, never written.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from tqdm import tqdm

from lakelog import config
from lakelog.client.partitioner import partition_for
from lakelog.errors import InvalidRequest, OffsetMismatch
from lakelog.log import BatchHeader, PartitionLog, open_partition, topic_config
from lakelog.log.partition_file import partition_files
from lakelog.log.records import NO_PRODUCER_ID, PAYLOAD_SCHEMA
from lakelog.quality.dead_letter import dlq_topic
from lakelog.quality.gate import gated_suites
from lakelog.store import Location, open_root

logger = logging.getLogger(__name__)

FORMATS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}
# The header of a load batch's last row: its load's dedupe record, {"load": id, "start": offset, "rows": n}.
LOAD_HEADER = "lakelog.load"
# A gated load is one transaction of this transactional id + the load id (batch 0 in __sink_batches).
GATED_LOAD_PREFIX = "lakelog.load."


@dataclass(frozen=True)
class LoadResult:
    """How a load ended: the offsets its rows occupy and what this run appended."""

    load_id: str
    start_offset: int
    total_rows: int
    appended_by_this_run: int
    resumed_from_row: int
    # A gated load: the rows its dead-letter suite sent to `<topic>.dlq` (start_offset is then there), and the
    # validation recorded with its commit.
    dead_lettered: int = 0
    validation_id: str | None = None

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


def _legacy_app_ids(load_id: str) -> tuple[str, str]:
    """The `txn` ids that held a load's record in tables written before it moved into the rows (read only)."""
    return f"lakelog.load.{load_id}.start", f"lakelog.load.{load_id}.rows"


@dataclass(frozen=True)
class LoadRecord:
    """A load's dedupe record: where its rows start, how many source rows it has appended, and for a load spread by
    key the partition count it began with (its spread keeps it to the end)."""

    start: int
    rows: int
    partitions: int | None = None


def load_record(log: PartitionLog, load_id: str) -> LoadRecord | None:
    """The newest record of `load_id` on the snapshot in hand, or None if the partition holds none.

    From the header of the load's newest batch at or above the log start; for a
    table with no such row, the `txn` ids older loaders wrote.
    """
    log_start = log.log_start_offset()
    for entry in reversed(partition_files(log.table)):
        if entry.max_offset < log_start:
            break
        if entry.min_producer_id is not None and entry.min_producer_id > NO_PRODUCER_ID:
            continue  # every row has a producer id: no load wrote here
        found = _record_in(log.table.read_file(entry, ["offset", "headers", "producer_id"]), load_id, log_start)
        if found is not None:
            return found
    start_id, rows_id = _legacy_app_ids(load_id)
    start = log.table.app_version(start_id)
    return None if start is None else LoadRecord(start, log.table.app_version(rows_id) or 0)


def _record_in(rows: pa.Table, load_id: str, log_start: int) -> LoadRecord | None:
    """The newest record of `load_id` among a file's rows: a load header on the last row of the batch it names."""
    loaded = pc.equal(rows.column("producer_id"), NO_PRODUCER_ID)
    rows = rows.filter(pc.and_(pc.is_valid(rows.column("headers")), loaded))
    for offset, headers in zip(
        reversed(rows.column("offset").to_pylist()), reversed(rows.column("headers").to_pylist()), strict=True
    ):
        if offset < log_start:
            return None
        for header in headers:
            if header["key"] != LOAD_HEADER:
                continue
            try:
                record = json.loads(header["value"] or b"")
                spread = record.get("partitions")
                found = LoadRecord(int(record["start"]), int(record["rows"]), None if spread is None else int(spread))
            except (ValueError, TypeError, KeyError):
                continue  # not a record this loader wrote
            # A header copied onto another row (a consumer re-producing records) does not sit where it says.
            if record.get("load") == load_id and offset == found.start + found.rows - 1:
                return found
    return None


def _with_record(rows: pa.Table, load_id: str, start: int, done: int, partitions: int | None = None) -> pa.Table:
    """`rows` with the load's record, after `done` source rows, as the header of the last row (and, for a load
    spread by key, the partition count its spread uses)."""
    fields: dict[str, object] = {"load": load_id, "start": start, "rows": done}
    if partitions is not None:
        fields["partitions"] = partitions
    value = json.dumps(fields, sort_keys=True).encode()
    headers = [None] * (rows.num_rows - 1) + [[{"key": LOAD_HEADER, "value": value}]]
    index = rows.schema.get_field_index("headers")
    return rows.set_column(index, rows.schema.field(index), pa.array(headers, rows.schema.field(index).type))


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
    root, path, kind = _checked_source(root, source, format, batch_records)
    try:
        if gated_suites(root, [topic]):
            return _load_gated(root, topic, path, kind, partition, key_column, batch_records, load_id, progress)
        return _load(root, topic, path, kind, partition, key_column, batch_records, load_id, progress)
    except (pa.ArrowException, UnicodeDecodeError) as error:
        raise InvalidRequest(f"source {path.name} cannot be read as {kind}: {error}") from error


def _checked_source(
    root: str | Location, source: str | os.PathLike | Location, format: str | None, batch_records: int
) -> tuple[Location, Location, str]:
    """The root, the source file (read with the root's storage settings) and its format; InvalidRequest for a source
    that is not a file, an unknown format or a batch size that is not a positive integer, before anything is written."""
    root = open_root(root)
    path = Location.of(source, root.io.settings if not root.is_local else None, what="source")
    found = path.io.info(path.uri)
    if found is None or found.is_dir:
        raise InvalidRequest(f"source {path} is not a file")
    kind = source_format(path, format)
    if not isinstance(batch_records, int) or isinstance(batch_records, bool) or batch_records < 1:
        raise InvalidRequest(f"batch_records must be a positive integer, not {batch_records!r}")
    return root, path, kind


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
    appender = PartitionAppender(open_partition(root, topic, partition), load_id)
    total = count_rows(path, kind)
    appender.say_where(total, path)
    with tqdm(
        total=total, initial=appender.done, unit="rec", unit_scale=True, disable=not progress, desc=f"load {topic}-{partition}"
    ) as bar:
        for payload in source_payloads(path, kind, key_column, batch_records):
            appender.feed(payload, bar)
    appender.say_done()
    return appender.result(total)


class PartitionAppender:
    """One partition's share of a load, resumable row by row (S2.4): source row `i` of the share goes to offset
    `start + i` by a conditional append whose last row carries the load's record; `feed` the share's rows in order,
    from the first, and it appends those not yet appended (by this run, a killed one or a racing instance)."""

    def __init__(self, log: PartitionLog, load_id: str) -> None:
        log.refresh()
        self.log, self.load_id = log, load_id
        self.partitions: int | None = None  # written into the records of a load spread by key
        self.record = record = load_record(log, load_id)
        self.resumed = record is not None
        self.start = log.log_end_offset() if record is None else record.start
        self.done = self.resumed_from = 0 if record is None else record.rows
        self.position = self.appended = 0

    def say_where(self, total: int | None, path: Location) -> None:
        where = f"{self.log.topic}-{self.log.partition}"
        if not self.resumed:
            what = f"{total} record(s)" if total is not None else "its share"
            logger.info("load %s: %s of %s into %s from offset %d", self.load_id, what, path.uri, where, self.start)
        else:
            at = self.start + self.done
            logger.info("load %s: resuming at record %d of %s (offset %d of %s)", self.load_id, self.done, total, at, where)

    def feed(self, payload: pa.Table, bar: tqdm) -> None:
        """The share's next rows: those past what is appended already go to the partition."""
        batch_end = self.position + payload.num_rows
        while self.done < batch_end:
            rows = payload.slice(self.done - self.position)
            try:
                self.log.append(
                    _with_record(rows, self.load_id, self.start, self.done + rows.num_rows, self.partitions),
                    BatchHeader(expected_offset=self.start + self.done),
                )
            except OffsetMismatch as mismatch:
                before, self.done = self.done, _recover(self.log, self.load_id, self.start, self.done, mismatch)
                logger.info("load %s: another instance appended up to record %d; continuing from there", self.load_id, self.done)
                bar.update(self.done - before)
                continue
            self.appended += rows.num_rows
            self.done += rows.num_rows
            bar.update(rows.num_rows)
        self.position = batch_end

    def say_done(self) -> None:
        where, last = f"{self.log.topic}-{self.log.partition}", self.start + self.position - 1
        logger.info(
            "load %s: done, offsets %d-%d of %s (%d appended by this run)", self.load_id, self.start, last, where, self.appended
        )

    def result(self, total: int) -> LoadResult:
        return LoadResult(self.load_id, self.start, total, self.appended, self.resumed_from)


def load_keyed(
    root: str | Location,
    topic: str,
    source: str | os.PathLike | Location,
    *,
    key_column: str,
    format: str | None = None,
    batch_records: int = 10_000,
    load_id: str | None = None,
    progress: bool = True,
) -> dict[int, LoadResult]:
    """Append every row of `source` to `topic` exactly once, spread over its partitions by `key_column` as the
    Producer's partitioner spreads keys; each partition's share is resumable row by row, as `load` is (a run again
    after a kill carries on where each partition stopped). Each partition's share is visible as it lands, as a
    `load` is; a topic with a quality suite is loaded as one judged transaction by `load_unit` instead."""
    root, path, kind = _checked_source(root, source, format, batch_records)
    load_id = load_id or default_load_id(path)
    partitions = topic_config(root, topic).num_partitions
    partitioner = config.load("producer", {"lakelog.root": root.uri})["partitioner"]
    appenders = {p: PartitionAppender(open_partition(root, topic, p), load_id) for p in range(partitions)}
    # A load resumed after partitions were added keeps the spread it began with (S2.4: every row once).
    begun = {a.record.partitions for a in appenders.values() if a.record is not None and a.record.partitions is not None}
    if len(begun) > 1:
        raise InvalidRequest(
            f"load {load_id} of {topic}: its partitions' records name different partition counts {sorted(begun)}"
        )
    if begun and (spread := begun.pop()) != partitions:
        logger.info(
            "load %s: began over %d partitions of %s (now %d); its rows keep that spread", load_id, spread, topic, partitions
        )
        partitions, appenders = spread, {p: appenders[p] for p in range(spread)}
    for appender in appenders.values():
        appender.partitions = partitions
    total = count_rows(path, kind)
    for appender in appenders.values():
        appender.say_where(None, path)
    done = sum(appender.done for appender in appenders.values())
    try:
        with tqdm(total=total, initial=done, unit="rec", unit_scale=True, disable=not progress, desc=f"load {topic}") as bar:
            for payload in source_payloads(path, kind, key_column, batch_records):
                for partition, share in spread_by_key(payload, partitions, partitioner):
                    appenders[partition].feed(share, bar)
    except (pa.ArrowException, UnicodeDecodeError) as error:
        raise InvalidRequest(f"source {path.name} cannot be read as {kind}: {error}") from error
    for appender in appenders.values():
        appender.say_done()
    return {partition: appender.result(appender.position) for partition, appender in appenders.items()}


def spread_by_key(payload: pa.Table, partitions: int, partitioner: str) -> Iterator[tuple[int, pa.Table]]:
    """The payload's rows by partition, chosen as the Producer chooses (its `partitioner`), order kept."""
    if partitions == 1:
        yield 0, payload
        return
    keys = payload.column("key").to_pylist()
    chosen = np.fromiter((partition_for(key, partitions, partitioner) for key in keys), dtype=np.int32, count=len(keys))
    for partition in np.unique(chosen):
        yield int(partition), payload.filter(pa.array(chosen == partition))


def _load_gated(
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
    """A load into a gated topic: the whole file as one transaction, judged before its commit (S11.1-S11.3, S10.2)."""
    from lakelog.jobs.batch_writer import TransactionalBatchWriter

    load_id = load_id or default_load_id(path)
    open_partition(root, topic, partition)  # UnknownTopicOrPartition before anything is written (S8.3)
    writer = TransactionalBatchWriter(root, GATED_LOAD_PREFIX + load_id)
    target = (topic, partition)
    dlq = dlq_topic(topic)

    def rows() -> Iterator[tuple[tuple[str, int], pa.Table]]:
        total = count_rows(path, kind) if progress else None
        with tqdm(total=total, unit="rec", unit_scale=True, disable=not progress, desc=f"load {topic}-{partition}") as bar:
            for payload in source_payloads(path, kind, key_column, batch_records):
                yield target, payload
                bar.update(payload.num_rows)

    note = {"load": load_id, "topic": topic, "partition": partition, "source": path.uri}
    logger.info("load %s: %s into gated %s-%d as one transaction", load_id, path.uri, topic, partition)
    result = writer.write_stream([target], rows(), 0, note=note, unit=load_id)
    landed = {tp: span for tp, span in result.offsets.items() if tp[0] in (topic, dlq)}
    total = sum(count for tp, count in result.records.items() if tp[0] in (topic, dlq))
    dead_lettered = sum(count for tp, count in result.records.items() if tp[0] == dlq)
    start = min((first for first, _ in landed.values()), default=-1)
    if result.skipped:
        logger.warning("load %s was committed before (%d rows); this run appends nothing", load_id, total)
        return LoadResult(load_id, start, total, 0, total, dead_lettered)
    if dead_lettered:
        logger.warning("load %s: its %d rows failed the suite of %s and went to %s", load_id, dead_lettered, topic, dlq)
    logger.info("load %s: done, %d rows committed in one transaction", load_id, total)
    return LoadResult(load_id, start, total, total, 0, dead_lettered, result.validations.get(topic))


def _recover(log: PartitionLog, load_id: str, start: int, done: int, mismatch: OffsetMismatch) -> int:
    """After OffsetMismatch (decided on the latest snapshot): continue from another instance's progress, or stop
    on a foreign write."""
    record = load_record(log, load_id)
    if record is not None and record.start == start and record.rows > done and log.log_end_offset() == start + record.rows:
        return record.rows
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


def _row_payloads(
    path: Location, batches: Iterable[pa.RecordBatch], key_column: str | None, batch_records: int
) -> Iterator[pa.Table]:
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
