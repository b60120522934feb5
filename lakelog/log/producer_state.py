"""Per-partition producer state and the idempotence check (S3, S9.4), as pure functions.

A partition's entry for producer id P at a snapshot is a function of the
snapshot's rows alone: P's last row below the LEO (its last batch, or the
marker that ended its transaction) gives the epoch, the last sequence
(NO_SEQUENCE after a marker), the timestamp and the offset, and whether a
transaction of P is open: its last row is a transactional data row (the
transaction index agrees for every producer that does not mix transactional
and plain batches, which Kafka refuses). Nothing per producer is written
to the Delta log, so the log's `txn` actions stay bounded whatever the number
of producers (S9.4); any process recovers the same entries from the rows, after
checkpoints too (S3.5). `fold` computes them; lakelog.log.producer_index keeps
them up to date for one table.

Kafka takes a batch's max timestamp as the producer's last timestamp, so a
producer that sends old CreateTimes (a backfill of event times) expires at once
and its next batch is UNKNOWN_PRODUCER_ID (KAFKA-6817). Here the last timestamp
is the later of P's last row's timestamp and the append time of the file that
holds it (its add action's modificationTime, the log's clock at the append): a
producer is idle from when it last wrote, whatever its records' times.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequence, ProducerFenced, UnknownProducerId
from lakelog.log.partition_file import PartitionFile
from lakelog.log.records import NO_SEQUENCE, BatchHeader, last_sequence, next_sequence

logger = logging.getLogger(__name__)

# The columns an entry is derived from.
STATE_COLUMNS = ["offset", "timestamp", "producer_id", "producer_epoch", "sequence", "is_transactional", "control"]


@dataclass(frozen=True)
class ProducerEntry:
    """What a partition knows of one producer id: from its last row at `last_offset`."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    last_offset: int = -1
    # Kafka never expires a producer in the middle of a transaction.
    transaction_open: bool = False

    def is_expired(self, now_ms: int, expiration_ms: int) -> bool:
        """S9.4: idle longer than producer.id.expiration.ms, with no open transaction."""
        return not self.transaction_open and now_ms - self.last_timestamp_ms > expiration_ms


def fold(rows: pa.Table, append_time_ms: int = 0) -> dict[int, ProducerEntry]:
    """The entries that `rows` (STATE_COLUMNS, in offset order) leave to the producers that have rows in them.

    Rows that follow others only replace the entries of their own producers, so
    folding the rows in any number of steps gives the entries of one fold.
    `append_time_ms` is when the rows were appended (their file's append time):
    no entry's last timestamp is earlier.
    """
    if rows.num_rows == 0:
        return {}
    producer_ids = rows.column("producer_id").to_numpy()
    picked = np.flatnonzero(producer_ids >= 0)
    if not picked.size:
        return {}
    last = _last_per_producer(producer_ids, picked)
    index = np.fromiter(last.values(), dtype=np.int64, count=len(last))
    taken = rows.take(pa.array(index))
    timestamps = np.maximum(taken.column("timestamp").cast(pa.int64()).fill_null(0).to_numpy() // 1000, append_time_ms)
    offsets = taken.column("offset").to_numpy()
    epochs = taken.column("producer_epoch").to_numpy()
    sequences = taken.column("sequence").to_numpy()
    is_marker = taken.column("control").is_valid().to_numpy(zero_copy_only=False)
    is_transactional = taken.column("is_transactional").to_numpy(zero_copy_only=False)
    return {
        producer_id: ProducerEntry(
            producer_id=producer_id,
            producer_epoch=int(epochs[i]),
            last_sequence=NO_SEQUENCE if is_marker[i] else int(sequences[i]),
            last_timestamp_ms=int(timestamps[i]),
            last_offset=int(offsets[i]),
            transaction_open=bool(is_transactional[i] and not is_marker[i]),
        )
        for i, producer_id in enumerate(last)
    }


def batch_entry(
    header: BatchHeader, first_offset: int, count: int, last_timestamp_ms: int, append_time_ms: int, control: bool
) -> ProducerEntry | None:
    """What `fold` gives the batch's producer for the `count` rows `stamp` made of it from `first_offset` on, without
    a pass over them; None for a batch without a producer id (fold gives no entry).

    `last_timestamp_ms` is its last row's timestamp; `control`: the batch is a marker. A unit test holds it equal to `fold`.
    """
    if not header.is_idempotent:
        return None
    return ProducerEntry(
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        last_sequence=NO_SEQUENCE if control else last_sequence(header.base_sequence, count),
        last_timestamp_ms=max(last_timestamp_ms, append_time_ms),
        last_offset=first_offset + count - 1,
        transaction_open=header.is_transactional and not control,
    )


# The add-action tag of a file appended as one batch: the entry `fold` gives its producer (`entry_tag`).
PRODUCER_TAG = "lakelog.producer"


def entry_tag(entry: ProducerEntry) -> str:
    """The PRODUCER_TAG of a file holding one batch, which leaves `entry` (batch_entry) to its producer."""
    return (
        f"{entry.producer_id},{entry.producer_epoch},{entry.last_sequence},{entry.last_timestamp_ms},"
        f"{entry.last_offset},{int(entry.transaction_open)}"
    )


def tagged_entries(file: PartitionFile) -> dict[int, ProducerEntry] | None:
    """What `fold` gives for all of `file`'s rows (with its append time), from its add action alone; None when
    only its rows can tell.

    A file whose statistics hold no producer id leaves no entry. A file of one batch carries its entry in
    PRODUCER_TAG, which is taken when it agrees with the statistics (one producer id, the file's last offset).
    """
    if file.max_producer_id < 0:
        return {}
    text = file.tag(PRODUCER_TAG)
    if text is None:
        return None
    try:
        producer_id, epoch, sequence, timestamp_ms, offset, open_ = (int(part) for part in text.split(","))
    except ValueError:
        producer_id = offset = open_ = -1
    if not (producer_id == file.min_producer_id == file.max_producer_id and offset == file.max_offset and open_ in (0, 1)):
        # Not lakelog's tag of this file (or damaged): the file's rows are read instead.
        logger.debug("%s: %s=%r disagrees with the file's statistics; its rows are read", file.path, PRODUCER_TAG, text)
        return None
    entry = ProducerEntry(producer_id, epoch, sequence, max(timestamp_ms, file.modification_time_ms), offset, bool(open_))
    return {producer_id: entry}


def _last_per_producer(producer_ids: np.ndarray, picked: np.ndarray) -> dict[int, int]:
    """Producer id -> index of its last row among the `picked` row indices (sorted)."""
    reverse = producer_ids[picked][::-1]
    unique, first_in_reverse = np.unique(reverse, return_index=True)
    where = picked[picked.size - 1 - first_in_reverse]
    return dict(zip(unique.tolist(), where.tolist(), strict=True))


class Verdict(enum.Enum):
    APPEND = "append"
    # Not the next sequence: either a retry of a batch already in the log, or a gap.
    MAYBE_DUPLICATE = "maybe_duplicate"


def check_batch(
    entry: ProducerEntry | None,
    header: BatchHeader,
    record_count: int,
    now_ms: int,
    expiration_ms: int,
) -> Verdict:
    """Decide an idempotent batch against the partition's entry for its producer id.

    Raises InvalidProducerEpoch / ProducerFenced (stale epoch, S3.4),
    OutOfOrderSequence (gap, or a new epoch not starting at 0, S3.3/S3.4) or
    UnknownProducerId (no live entry and the batch does not start at 0, S9.4).
    """
    pid, epoch, base = header.producer_id, header.producer_epoch, header.base_sequence
    if entry is not None and entry.is_expired(now_ms, expiration_ms):
        entry = None
    if entry is None:
        if base != 0:
            raise UnknownProducerId(
                f"partition has no state for producer id {pid} and its batch starts at sequence {base}, not 0",
                producer_id=pid,
            )
        return Verdict.APPEND
    if epoch < entry.producer_epoch:
        error = ProducerFenced if header.is_transactional else InvalidProducerEpoch
        raise error(
            f"producer id {pid} epoch {epoch} is older than the partition's epoch {entry.producer_epoch}",
            producer_id=pid,
            producer_epoch=entry.producer_epoch,
        )
    if epoch > entry.producer_epoch or entry.last_sequence == NO_SEQUENCE:
        if base != 0:
            raise OutOfOrderSequence(
                f"producer id {pid} epoch {epoch} must start at sequence 0, not {base}",
                producer_id=pid,
                expected_sequence=0,
            )
        return Verdict.APPEND
    if base == next_sequence(entry.last_sequence):
        return Verdict.APPEND
    return Verdict.MAYBE_DUPLICATE


def out_of_order(entry: ProducerEntry, header: BatchHeader) -> OutOfOrderSequence:
    expected = next_sequence(entry.last_sequence)
    return OutOfOrderSequence(
        f"producer id {header.producer_id} sent sequence {header.base_sequence}; the partition expects {expected}",
        producer_id=header.producer_id,
        expected_sequence=expected,
    )
