"""Validation results kept as rows: the Delta table `<root>/quality/results`, one append (one strict commit) each.

A row says which rows were validated (topic, transactional.id or load unit,
producer id and epoch, offset ranges), against what (suite name, mode), and
GX's verdict (success, statistics, each failed expectation with a few
unexpected values). `lakelog sql` and spark-sql see it as `quality_results`.

A row records a validation, not a commit: whether the validated data was
published is the transaction's outcome, found by (producer_id,
producer_epoch) in the partitions' markers (see notes/issue-13-quality.md).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CommitConflict, KafkaTimeout
from lakelog.quality.suites import QUALITY_DIR
from lakelog.quality.validate import ValidationResult
from lakelog.store import Location, Table, TableNotFoundError, check_root
from lakelog.store.retry import DEFAULT_POLICY

logger = logging.getLogger(__name__)

RESULTS_TABLE = "results"
SQL_NAME = "quality_results"
# Appends race only with other appends (no row depends on another): a lost race is tried again on the latest snapshot.
APPEND_TIMEOUT_S = 60.0

OFFSET_RANGE_TYPE = pa.struct(
    [pa.field("partition", pa.int32()), pa.field("first_offset", pa.int64()), pa.field("last_offset", pa.int64())]
)
RESULTS_SCHEMA = pa.schema(
    [
        pa.field("validation_id", pa.string(), nullable=False),
        pa.field("validated_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("transactional_id", pa.string()),
        pa.field("load_unit", pa.string()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int16()),
        pa.field("offset_ranges", pa.list_(OFFSET_RANGE_TYPE)),
        pa.field("suite_name", pa.string(), nullable=False),
        pa.field("mode", pa.string(), nullable=False),
        pa.field("success", pa.bool_(), nullable=False),
        pa.field("row_count", pa.int64(), nullable=False),
        pa.field("statistics", pa.string()),
        pa.field("failed_expectations", pa.string()),
    ]
)


@dataclass(frozen=True, order=True)
class OffsetRange:
    """The offsets a validated unit holds in one partition (first and last, inclusive)."""

    partition: int
    first_offset: int
    last_offset: int


def results_location(root: str | Location) -> Location:
    return check_root(root) / QUALITY_DIR / RESULTS_TABLE


def result_row(
    result: ValidationResult,
    *,
    validation_id: str | None = None,
    transactional_id: str | None = None,
    load_unit: str | None = None,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    offset_ranges: Iterable[OffsetRange] = (),
    now_ms: int | None = None,
) -> pa.Table:
    """The result as one row of RESULTS_SCHEMA (a gate that appends it inside its own commit builds it here)."""
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    row = {
        "validation_id": validation_id or uuid.uuid4().hex,
        "validated_at": now_ms * 1000,
        "topic": result.topic,
        "transactional_id": transactional_id,
        "load_unit": load_unit,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "offset_ranges": [
            {"partition": item.partition, "first_offset": item.first_offset, "last_offset": item.last_offset}
            for item in offset_ranges
        ],
        "suite_name": result.suite_name,
        "mode": result.mode,
        "success": result.success,
        "row_count": result.row_count,
        "statistics": json.dumps(result.statistics, sort_keys=True, default=str),
        "failed_expectations": result.failures_json(),
    }
    return pa.Table.from_pylist([row], schema=RESULTS_SCHEMA)


def record_result(root: str | Location, result: ValidationResult, **row: Any) -> str:
    """Append the result's row to `<root>/quality/results` (created on first use); returns its validation id.

    `row` takes result_row's keywords. Each append is one strict commit on the
    snapshot it follows; a lost race with another append is tried again on the
    latest snapshot (appends of independent rows decide nothing on each other).
    """
    rows = result_row(result, **row)
    location = results_location(root)
    table = _open_or_create(location)
    # The one retry policy (KIP-580, lakelog.store.retry): a lost race waits its jittered backoff, then appends on
    # the latest snapshot, until the deadline; then KafkaTimeout.
    backoff = DEFAULT_POLICY.start(APPEND_TIMEOUT_S)
    while True:
        try:
            version = table.append(rows, metadata={"lakelog.operation": "quality-result"})
            break
        except CommitConflict:
            if not backoff.wait():
                raise KafkaTimeout(
                    f"recording a validation result in {location.uri} lost its commit race for {APPEND_TIMEOUT_S:g} s"
                ) from None
            table.refresh()
    validation_id = rows.column("validation_id")[0].as_py()
    logger.info("recorded validation %s of topic %s (success=%s) as version %d of %s",
                validation_id, result.topic, result.success, version, location.uri)
    return validation_id


def read_results(root: str | Location, *, topic: str | None = None, limit: int | None = None) -> pa.Table:
    """The results (of `topic`, if given), latest first; empty if nothing was ever validated."""
    try:
        table = Table.open(results_location(root))
    except TableNotFoundError:
        return RESULTS_SCHEMA.empty_table()
    chunks = [table.read_data_file(entry) for entry in table.data_files()]
    rows = pa.concat_tables(chunks) if chunks else RESULTS_SCHEMA.empty_table()
    if topic is not None:
        rows = rows.filter(pc.equal(rows.column("topic"), topic))
    rows = rows.sort_by([("validated_at", "descending"), ("validation_id", "ascending")])
    return rows.slice(0, limit) if limit is not None else rows


def outcome(root: str | Location, row: dict[str, Any]) -> str:
    """Whether a result row's validated rows were published: the join with their transaction's outcome.

    "committed", "aborted" or "open" for a transactional unit with offset ranges,
    read in its first partition (S4.8: a transaction's outcome is the same in all
    of them): open while the producer's transaction that holds the first offset
    is open (S5.1), aborted if the aborted-transaction index covers it (S5.3),
    committed once it is below the high watermark otherwise; "not written" if no
    row reached that offset; "-" when the row names no transactional offsets.
    """
    from lakelog.errors import UnknownTopicOrPartition
    from lakelog.log import open_partition

    ranges = row.get("offset_ranges") or []
    producer_id = row.get("producer_id")
    if not ranges or producer_id is None or producer_id < 0:
        return "-"
    first = ranges[0]
    try:
        log = open_partition(root, row["topic"], first["partition"])
    except UnknownTopicOrPartition:
        return "not written"
    offset = first["first_offset"]
    if offset >= log.high_watermark():
        return "not written"
    opened_at = log.open_transactions().get(producer_id)
    if opened_at is not None and opened_at <= offset:
        return "open"
    if any(item.producer_id == producer_id and item.first_offset <= offset < item.marker_offset
           for item in log.aborted_transactions(offset, offset + 1)):
        return "aborted"
    return "committed"


def failed_expectations(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A result row's failed expectations, decoded."""
    return json.loads(row.get("failed_expectations") or "[]")


def _open_or_create(location: Location) -> Table:
    try:
        return Table.open(location)
    except TableNotFoundError:
        table, _ = Table.create(location, RESULTS_SCHEMA, {})
        return table


def offset_ranges_of(rows: pa.Table) -> Sequence[OffsetRange]:
    """Offset ranges per partition of rows in the Kafka source's columns."""
    if rows.num_rows == 0 or "offset" not in rows.column_names or "partition" not in rows.column_names:
        return []
    grouped = rows.group_by("partition").aggregate([("offset", "min"), ("offset", "max")]).to_pylist()
    return sorted(OffsetRange(item["partition"], item["offset_min"], item["offset_max"]) for item in grouped)


__all__ = [
    "OffsetRange",
    "RESULTS_SCHEMA",
    "SQL_NAME",
    "failed_expectations",
    "offset_ranges_of",
    "outcome",
    "read_results",
    "record_result",
    "result_row",
    "results_location",
]
