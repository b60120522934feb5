"""The row layout of a partition table and the batch that an append carries."""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidArgument, InvalidRequest, MsgSizeTooLarge

logger = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
# Sequences are int32 and wrap to 0 after this (S3.1).
MAX_SEQUENCE = 2**31 - 1
MAX_EPOCH = 2**15 - 1

_TIMESTAMP = pa.timestamp("us", tz="UTC")
# The timestamp column holds microseconds in an int64: the millisecond timestamps it can hold, as Kafka's long of ms
# holds more (past these, ms * 1000 wraps to another instant, or does not fit a C long at all).
MAX_TIMESTAMP_MS = (2**63 - 1) // 1000
MIN_TIMESTAMP_MS = -(2**63 // 1000)
# json.dumps's own encoder, made once (as file_statistics encodes: the default separators).
_STATISTICS = json.JSONEncoder()

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

# What the producer supplies for each record.
PAYLOAD_SCHEMA = pa.schema(
    [
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
    ]
)

# A partition row: a Kafka record plus what Kafka keeps in the batch header.
PARTITION_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        *PAYLOAD_SCHEMA,
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("producer_epoch", pa.int16(), nullable=False),
        pa.field("sequence", pa.int32(), nullable=False),
        pa.field("is_transactional", pa.bool_(), nullable=False),
        pa.field("control", pa.string()),
    ]
)


class ControlType(enum.Enum):
    """The kind of a control row (a transaction marker)."""

    COMMIT = "COMMIT"
    ABORT = "ABORT"


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed. `duplicate` is True when it was a retry already in the log (S3.2)."""

    base_offset: int
    last_offset: int
    version: int
    duplicate: bool = False


@dataclass(frozen=True)
class BatchHeader:
    """What Kafka's record-batch header says about an append, plus KIP-27's expected offset."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    is_transactional: bool = False
    expected_offset: int | None = None

    def __post_init__(self) -> None:
        for name in ("producer_id", "producer_epoch", "base_sequence"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidRequest(f"{name} must be an integer, not {value!r}")
        if not isinstance(self.is_transactional, bool):
            raise InvalidRequest(f"is_transactional must be a bool, not {self.is_transactional!r}")
        if self.expected_offset is not None and (
            not isinstance(self.expected_offset, int) or isinstance(self.expected_offset, bool) or self.expected_offset < 0
        ):
            raise InvalidRequest(f"expected_offset must be a non-negative integer, not {self.expected_offset!r}")
        if self.producer_id < NO_PRODUCER_ID or self.producer_epoch < NO_PRODUCER_EPOCH:
            raise InvalidRequest(f"producer id/epoch ({self.producer_id}, {self.producer_epoch}) is negative")
        if self.producer_epoch > MAX_EPOCH:
            raise InvalidRequest(f"producer_epoch {self.producer_epoch} exceeds {MAX_EPOCH}")
        if not NO_SEQUENCE <= self.base_sequence <= MAX_SEQUENCE:
            raise InvalidRequest(f"base_sequence {self.base_sequence} is outside [-1, {MAX_SEQUENCE}]")
        if self.is_idempotent and (self.producer_epoch < 0 or self.base_sequence < 0):
            raise InvalidRequest("an idempotent batch needs a producer epoch and a base sequence")

    @property
    def is_idempotent(self) -> bool:
        return self.producer_id >= 0


def last_sequence(base_sequence: int, record_count: int) -> int:
    """The sequence of a batch's last record, wrapping at 2^31-1 (S3.1)."""
    return (base_sequence + record_count - 1) % (MAX_SEQUENCE + 1)


def next_sequence(sequence: int) -> int:
    return (sequence + 1) % (MAX_SEQUENCE + 1)


def payload_table(
    values: list[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    headers: list[list[tuple[str, bytes | None]] | None] | None = None,
    timestamps_ms: list[int] | None = None,
) -> pa.Table:
    """Build the payload columns of a batch from Python lists (a producer's buffer)."""
    count = len(values)
    if timestamps_ms is None:
        timestamps = pa.nulls(count, _TIMESTAMP)
    else:
        timestamps = pa.array(_timestamps_ms(timestamps_ms) * 1000).view(_TIMESTAMP)
    if headers is None or all(h is None for h in headers):
        header_column = pa.nulls(count, HEADER_TYPE)
    else:
        header_column = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers], HEADER_TYPE)
    return pa.Table.from_arrays(
        [
            timestamps,
            pa.array(keys if keys is not None else [None] * count, pa.binary()),
            pa.array(values, pa.binary()),
            header_column,
        ],
        schema=PAYLOAD_SCHEMA,
    )


def _timestamps_ms(timestamps_ms: list[int]) -> np.ndarray:
    """The timestamps as an int64 array; InvalidArgument for one the column cannot hold in microseconds."""
    try:
        array = np.asarray(timestamps_ms, dtype="int64")
    except OverflowError:
        array = None
    if array is None or (array.size and (array.max() > MAX_TIMESTAMP_MS or array.min() < MIN_TIMESTAMP_MS)):
        raise InvalidArgument(f"a timestamp is outside [{MIN_TIMESTAMP_MS}, {MAX_TIMESTAMP_MS}] ms, what the log can hold")
    return array


def record_sizes(payload: pa.Table) -> np.ndarray:
    """Each record's size as max.message.bytes counts it: key, value, and every header's name (UTF-8) and value.

    No framing is added: a row has none of Kafka's wire varints, and the producer counts a message the same way
    (lakelog.client.producer.limits), so the two limits agree to the byte."""
    count = payload.num_rows
    sizes = np.zeros(count, dtype="int64")
    for name in ("key", "value"):
        column = payload.column(name)
        if column.null_count < count:
            sizes += pc.fill_null(pc.binary_length(column), 0).to_numpy()
    headers = payload.column("headers").combine_chunks()
    if headers.null_count < count:
        # Each row's headers are a run of the pairs between its list offsets: a prefix sum, no pass per row.
        pairs = headers.values
        lengths = pc.fill_null(pc.binary_length(pairs.field("key")), 0).to_numpy()
        lengths = lengths + pc.fill_null(pc.binary_length(pairs.field("value")), 0).to_numpy()
        total = np.concatenate(([0], np.cumsum(lengths, dtype="int64")))
        offsets = headers.offsets.to_numpy()
        per_row = total[offsets[1:]] - total[offsets[:-1]]
        if headers.null_count:
            per_row[pc.is_null(headers).to_numpy(zero_copy_only=False)] = 0  # a null list's offsets may span pairs
        sizes += per_row
    return sizes


def check_record_sizes(payload: pa.Table, max_bytes: int, where: str) -> None:
    """MsgSizeTooLarge if a record of a conformed payload is larger than `max_bytes` (a topic's max.message.bytes).

    Each record is held to the limit, not the batch: Kafka's broker checks a record batch, but a producer's batch
    there is what its batch.size made it, and a record alone can be its own batch; a lakelog batch is one append of
    any size (up to a whole day's rows), so the record a produce() call made is what the limit can mean."""
    if payload.get_total_buffer_size() <= max_bytes:
        return  # no record is larger than every buffer the batch holds (0.4 us; `nbytes` costs 20): no per-record pass
    sizes = record_sizes(payload)
    index = int(np.argmax(sizes))
    size = int(sizes[index])
    if size > max_bytes:
        raise MsgSizeTooLarge(
            f"{where}: record {index} of the batch is {size} bytes, more than the topic's max.message.bytes {max_bytes}",
            size=size,
            max_bytes=max_bytes,
            index=index,
        )


def conform_payload(payload: pa.Table) -> pa.Table:
    """Check and cast a caller's payload to PAYLOAD_SCHEMA; missing columns become nulls."""
    if not isinstance(payload, pa.Table):
        raise InvalidRequest(f"a batch payload must be a pyarrow.Table, not {type(payload).__name__}")
    if payload.schema.equals(PAYLOAD_SCHEMA):
        return payload  # conformed already (payload_table's, or a caller's prepared batch): every cast would be a no-op
    unknown = set(payload.column_names) - set(PAYLOAD_SCHEMA.names)
    if unknown:
        raise InvalidRequest(f"a batch payload may hold only {PAYLOAD_SCHEMA.names}; got {sorted(unknown)}")
    columns = []
    for field in PAYLOAD_SCHEMA:
        if field.name in payload.column_names:
            try:
                columns.append(payload.column(field.name).cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise InvalidRequest(f"payload column {field.name} cannot be read as {field.type}: {error}") from error
        else:
            columns.append(pa.nulls(payload.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=PAYLOAD_SCHEMA)


def stamp(
    payload: pa.Table,
    base_offset: int,
    header: BatchHeader,
    now_us: int,
    control: ControlType | None = None,
) -> pa.Table:
    """Add offsets and the batch header to a conformed payload: the rows to commit."""
    count = payload.num_rows
    timestamps = payload.column("timestamp")
    if timestamps.null_count == count:
        timestamps = pa.array(np.full(count, now_us, dtype="int64")).view(_TIMESTAMP)  # a view: no conversion
    elif timestamps.null_count:
        # fill_null stays in Arrow; if_else re-wrapped in a chunked array went through Python per row
        # (213-400 ms per 100k-row batch, bench/append_throughput).
        timestamps = pc.fill_null(timestamps, pa.scalar(now_us, _TIMESTAMP))
    if header.base_sequence >= 0 and control is None:
        sequences = np.arange(header.base_sequence, header.base_sequence + count, dtype="int64")
        if header.base_sequence + count - 1 > MAX_SEQUENCE:
            sequences %= MAX_SEQUENCE + 1  # the batch wraps (S3.1)
    else:
        sequences = np.full(count, NO_SEQUENCE, dtype="int64")
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(base_offset, base_offset + count, dtype="int64")),
            timestamps,
            payload.column("key"),
            payload.column("value"),
            payload.column("headers"),
            pa.array(np.full(count, header.producer_id, dtype="int64")),
            pa.array(np.full(count, header.producer_epoch, dtype="int16")),
            pa.array(sequences.astype("int32")),
            pa.array(np.full(count, header.is_transactional, dtype="bool")),
            pa.nulls(count, pa.string()) if control is None else pa.array([control.value] * count, pa.string()),
        ],
        schema=PARTITION_SCHEMA,
    )


def stamped_statistics(payload: pa.Table, base_offset: int, header: BatchHeader, control: ControlType | None = None) -> str:
    """The Delta statistics of `stamp(payload, base_offset, header, ...)`'s rows, from what stamping put there.

    Equal to `file_statistics` of those rows (a unit test holds them together), without a pass over
    them: the offsets are dense from `base_offset`, the header's columns are constants, the sequences run
    from the base sequence (wrapping at 2^31-1, S3.1), and only the payload's key and value may be null.
    """
    count = payload.num_rows
    last = base_offset + count - 1
    if header.base_sequence >= 0 and control is None:
        first_sequence, last_sequence = header.base_sequence, header.base_sequence + count - 1
        if last_sequence > MAX_SEQUENCE:
            first_sequence, last_sequence = 0, MAX_SEQUENCE
    else:
        first_sequence = last_sequence = NO_SEQUENCE
    pid, epoch = header.producer_id, header.producer_epoch
    return _STATISTICS.encode(
        {
            "numRecords": count,
            "minValues": {"offset": base_offset, "producer_id": pid, "producer_epoch": epoch, "sequence": first_sequence},
            "maxValues": {"offset": last, "producer_id": pid, "producer_epoch": epoch, "sequence": last_sequence},
            "nullCount": {
                "offset": 0,
                "timestamp": 0,
                "key": payload.column("key").null_count,
                "value": payload.column("value").null_count,
                "producer_id": 0,
                "producer_epoch": 0,
                "sequence": 0,
                "is_transactional": 0,
                "control": count if control is None else 0,
            },
        }
    )
