"""Validation results kept as rows: the internal log `__quality_results` (S11.2).

One partition, its table at `<root>/quality/results/0` (lakelog.log.topics maps
the folder). Each record is one validation: key = the validation id, value =
the result row as JSON (RESULTS_SCHEMA's fields). A row says which rows were
validated (topic, transactional.id or load unit, producer id and epoch, offset
ranges), against what (suite name, mode), and GX's verdict (success,
statistics, each failed expectation with a few unexpected values).

Being a log, a result can be appended INSIDE the writer's transaction
(`result_payload`): it then commits or aborts with the data it judged (S11.2),
and its marker is written by the transaction coordinator like any partition's.
`record_result` appends outside any transaction, visible at once: an enforce
failure (that data can never commit, so "failed" holds whatever happens next)
and view refreshes. Readers (`read_results`, `lakelog quality report`,
`quality_results` in `lakelog sql` and spark-sql) see the read_committed rows.
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

from lakelog.errors import CorruptRecord, UnknownTopicOrPartition
from lakelog.log.partition import READ_COMMITTED, PartitionLog
from lakelog.log.records import payload_table
from lakelog.log.topics import internal_log_path, open_internal_partition
from lakelog.quality.validate import ValidationResult
from lakelog.store import Location, Table

logger = logging.getLogger(__name__)

RESULTS_LOG = "__quality_results"
RESULTS_PARTITION = 0
SQL_NAME = "quality_results"
# Rows a read of the results log takes per fetch.
READ_RECORDS = 50_000

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
    """The folder of the results log's partition tables (`<root>/quality/results/`)."""
    return internal_log_path(root, RESULTS_LOG)


def open_results_log(root: str | Location) -> PartitionLog:
    """The results log's one partition, created on first use."""
    return open_internal_partition(root, RESULTS_LOG, RESULTS_PARTITION, 1)


def results_log_exists(root: str | Location) -> bool:
    return Table.exists(results_location(root) / str(RESULTS_PARTITION))


def new_validation_id() -> str:
    return uuid.uuid4().hex


def result_fields(
    result: ValidationResult,
    *,
    validation_id: str | None = None,
    transactional_id: str | None = None,
    load_unit: str | None = None,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    offset_ranges: Iterable[OffsetRange] = (),
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The result as one row (a dict of RESULTS_SCHEMA's fields, JSON-ready)."""
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return {
        "validation_id": validation_id or new_validation_id(),
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


def result_row(result: ValidationResult, **row: Any) -> pa.Table:
    """The result as one row of RESULTS_SCHEMA (result_fields' keywords)."""
    return pa.Table.from_pylist([result_fields(result, **row)], schema=RESULTS_SCHEMA)


def result_payload(result: ValidationResult, *, validation_id: str, **row: Any) -> pa.Table:
    """The result as one record of the results log (payload columns: key = validation id, value = the row as
    JSON), for a gate to append INSIDE its transaction, so that it commits or aborts with the data (S11.2)."""
    fields = result_fields(result, validation_id=validation_id, **row)
    return payload_table(
        [json.dumps(fields, sort_keys=True, default=str).encode()],
        keys=[validation_id.encode()],
        timestamps_ms=[fields["validated_at"] // 1000],
    )


def record_result(root: str | Location, result: ValidationResult, **row: Any) -> str:
    """Append the result to the results log outside any transaction, visible at once; returns its validation id.

    For a verdict that holds whatever the writer's transaction does next: an
    enforce failure, recorded before the abort (that data can never commit).
    `row` takes result_fields' keywords.
    """
    validation_id = row.pop("validation_id", None) or new_validation_id()
    payload = result_payload(result, validation_id=validation_id, **row)
    log = open_results_log(root)
    appended = log.append(payload)
    logger.info(
        "recorded validation %s of topic %s (success=%s) at offset %d of %s",
        validation_id,
        result.topic,
        result.success,
        appended.base_offset,
        RESULTS_LOG,
    )
    return validation_id


def read_results(root: str | Location, *, topic: str | None = None, limit: int | None = None) -> pa.Table:
    """The read_committed results (of `topic`, if given), latest first, in RESULTS_SCHEMA; empty if none.

    A result appended in a transaction shows once that transaction commits, never
    if it aborts (S11.2); like any read_committed read, rows after a transaction
    still open wait for its end (S5.1).
    """
    if not results_log_exists(root):
        return RESULTS_SCHEMA.empty_table()
    log = open_results_log(root)
    rows: list[dict[str, Any]] = []
    offset = log.log_start_offset()
    end = log.last_stable_offset()
    while offset < end:
        fetched = log.fetch(offset, max_records=READ_RECORDS, max_bytes=1 << 26, isolation_level=READ_COMMITTED)
        rows.extend(_decode(value) for value in fetched.rows.column("value").to_pylist())
        if fetched.next_offset <= offset:
            break
        offset = fetched.next_offset
    table = pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA) if rows else RESULTS_SCHEMA.empty_table()
    if topic is not None:
        table = table.filter(pc.equal(table.column("topic"), topic))
    table = table.sort_by([("validated_at", "descending"), ("validation_id", "ascending")])
    return table.slice(0, limit) if limit is not None else table


def _decode(value: bytes | None) -> dict[str, Any]:
    try:
        row = json.loads(value or b"")
        if not isinstance(row, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError) as error:
        raise CorruptRecord(f"a {RESULTS_LOG} record is not a JSON result row: {error}", reason="not a result") from None
    return row


def outcome(root: str | Location, row: dict[str, Any]) -> str:
    """Whether a result row's validated rows were published: the join with their transaction's outcome.

    "committed", "aborted" or "open" for a transactional unit with offset ranges,
    read in its first partition (S4.8: a transaction's outcome is the same in all
    of them): open while the producer's transaction that holds the first offset
    is open (S5.1), aborted if the aborted-transaction index covers it (S5.3),
    committed once it is below the high watermark otherwise; "not written" if no
    row reached that offset; "refused" for an enforce failure that names no offsets (a batch
    an idempotent producer's gate refused: nothing was written); "-" when the row names no
    transactional offsets.
    The ranges of a failed dead-letter unit are in `<topic>.dlq`, where its rows went.
    """
    from lakelog.log import open_partition
    from lakelog.quality.dead_letter import dlq_topic

    ranges = row.get("offset_ranges") or []
    producer_id = row.get("producer_id")
    if not ranges and not row.get("success") and row.get("mode") == "enforce":
        return "refused"
    if not ranges or producer_id is None or producer_id < 0:
        return "-"
    first = ranges[0]
    topic = dlq_topic(row["topic"]) if row.get("mode") == "dead-letter" and not row.get("success") else row["topic"]
    try:
        log = open_partition(root, topic, first["partition"])
    except UnknownTopicOrPartition:
        return "not written"
    offset = first["first_offset"]
    if offset >= log.high_watermark():
        return "not written"
    opened_at = log.open_transactions().get(producer_id)
    if opened_at is not None and opened_at <= offset:
        return "open"
    if any(
        item.producer_id == producer_id and item.first_offset <= offset < item.marker_offset
        for item in log.aborted_transactions(offset, offset + 1)
    ):
        return "aborted"
    return "committed"


def failed_expectations(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A result row's failed expectations, decoded."""
    return json.loads(row.get("failed_expectations") or "[]")


def offset_ranges_of(rows: pa.Table) -> Sequence[OffsetRange]:
    """Offset ranges per partition of rows in the Kafka source's columns."""
    if rows.num_rows == 0 or "offset" not in rows.column_names or "partition" not in rows.column_names:
        return []
    grouped = rows.group_by("partition").aggregate([("offset", "min"), ("offset", "max")]).to_pylist()
    return sorted(OffsetRange(item["partition"], item["offset_min"], item["offset_max"]) for item in grouped)


__all__ = [
    "OffsetRange",
    "RESULTS_LOG",
    "RESULTS_SCHEMA",
    "SQL_NAME",
    "failed_expectations",
    "new_validation_id",
    "offset_ranges_of",
    "open_results_log",
    "outcome",
    "read_results",
    "record_result",
    "result_fields",
    "result_payload",
    "result_row",
    "results_location",
    "results_log_exists",
]
