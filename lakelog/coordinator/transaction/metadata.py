"""One transactional.id's metadata, which is also its `__transaction_state` record: the row codec and the replay."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.runtime.hashing import partition_for_key
from lakelog.coordinator.runtime.outcome import Outcome
from lakelog.coordinator.runtime.record_codec import VERSION_FIELD, RecordCodec
from lakelog.coordinator.transaction.state import TxnState
from lakelog.errors import (
    CorruptRecord,
)
from lakelog.log.records import NO_PRODUCER_ID
from lakelog.typedef import TopicPartitionKey

# Column name -> Arrow type name of a `__transaction_state` row (what `to_row` yields).
ROW_TYPES: dict[str, str] = {
    "transactional_id": "string",
    "producer_id": "int64",
    "previous_producer_id": "int64",
    "next_producer_id": "int64",
    "producer_epoch": "int16",
    "last_producer_epoch": "int16",
    "transaction_timeout_ms": "int32",
    "state": "string",
    "partitions": "list<string>",
    "txn_start_ms": "int64",
    "txn_last_update_ms": "int64",
    VERSION_FIELD: "int32",
}
# The version of the rows `to_row` writes; `from_row` reads every one up to it (lakelog.coordinator.runtime.record_codec).
TRANSACTION_RECORD: RecordCodec[Any] = RecordCodec("__transaction_state", version=1)


@dataclass(frozen=True)
class TransactionMetadata:
    """The coordinator's state of one transactional.id; also one `__transaction_state` record.

    `last_producer_epoch` is the client's epoch before the last bump it asked for
    (an end of transaction), so a retry is recognised; -1 after init or fencing.
    `previous_producer_id` is the producer id before the last rotation (-1 if none);
    `next_producer_id` is the id a PREPARE_* record rotates to at completion (-1 if none).
    """

    transactional_id: str
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartitionKey]
    txn_start_ms: int
    txn_last_update_ms: int
    next_producer_id: int = NO_PRODUCER_ID

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, frozenset):
            object.__setattr__(self, "partitions", frozenset(self.partitions))

    def to_row(self) -> dict[str, Any]:
        """This record as a flat dict of plain values; partitions as sorted "topic:partition" strings."""
        return TRANSACTION_RECORD.stamp(
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "previous_producer_id": self.previous_producer_id,
                "next_producer_id": self.next_producer_id,
                "producer_epoch": self.producer_epoch,
                "last_producer_epoch": self.last_producer_epoch,
                "transaction_timeout_ms": self.transaction_timeout_ms,
                "state": self.state.value,
                "partitions": [f"{topic}:{partition}" for topic, partition in sorted(self.partitions)],
                "txn_start_ms": self.txn_start_ms,
                "txn_last_update_ms": self.txn_last_update_ms,
            }
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TransactionMetadata:
        """The record `to_row` wrote (any version up to ours); raises CorruptRecord if the row is not one."""
        TRANSACTION_RECORD.version_of(row)
        try:
            integers = {
                name: _plain_int(row[name])
                for name in (
                    "producer_id",
                    "previous_producer_id",
                    "next_producer_id",
                    "producer_epoch",
                    "last_producer_epoch",
                    "transaction_timeout_ms",
                    "txn_start_ms",
                    "txn_last_update_ms",
                )
            }
            transactional_id = row["transactional_id"]
            if not isinstance(transactional_id, str) or not transactional_id:
                raise ValueError(f"transactional_id {transactional_id!r} is not a non-empty string")
            return cls(
                transactional_id=transactional_id,
                state=TxnState(row["state"]),
                partitions=frozenset(_parse_partition(text) for text in _as_list(row["partitions"])),
                **integers,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptRecord(f"not a __transaction_state row: {error}", row=dict(row)) from error


def _plain_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer")
    if not isinstance(value, int):
        # numpy / Arrow scalars arrive as ints with __index__; floats and strings do not.
        if not hasattr(value, "__index__"):
            raise TypeError(f"{value!r} is not an integer")
        value = value.__index__()
    return int(value)


def _as_list(value: Any) -> list[Any]:
    # Arrow gives a list or None, pandas a numpy array: no truthiness test on those.
    return [] if value is None else list(value)


def _parse_partition(text: str) -> TopicPartitionKey:
    if isinstance(text, Mapping):
        return _partition_key(text["topic"], text["partition"])
    topic, separator, partition = str(text).rpartition(":")
    if not separator or not topic:
        raise ValueError(f"partition {text!r} is not 'topic:partition'")
    return _partition_key(topic, int(partition))


def _partition_key(topic: Any, partition: Any) -> TopicPartitionKey:
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic {topic!r} is not a non-empty string")
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise ValueError(f"partition {partition!r} of topic {topic!r} is not a non-negative integer")
    return topic, partition


def replay(state_by_id: dict[str, TransactionMetadata], record: TransactionMetadata) -> dict[str, TransactionMetadata]:
    """Apply one record to `state_by_id` in place and return it: last record wins, DEAD removes the id."""
    if record.state is TxnState.DEAD:
        state_by_id.pop(record.transactional_id, None)
    else:
        state_by_id[record.transactional_id] = record
    return state_by_id


def snapshot_of(state_by_id: Mapping[str, TransactionMetadata]) -> list[dict[str, Any]]:
    """The state as JSON-able rows: the last record of every live id (what compaction would keep)."""
    return [state_by_id[transactional_id].to_row() for transactional_id in sorted(state_by_id)]


def state_from_snapshot(rows: list[Mapping[str, Any]]) -> dict[str, TransactionMetadata]:
    """The state `snapshot_of` dumped; CorruptRecord if a row is not a record."""
    state: dict[str, TransactionMetadata] = {}
    for row in rows:
        replay(state, TransactionMetadata.from_row(row))
    return state


def partition_for_transactional_id(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state/<n>` of an id: Kafka's `Utils.abs(id.hashCode) % n`."""
    return partition_for_key(transactional_id, num_partitions)


def state_after(outcome: Outcome[TransactionMetadata, Any], current: TransactionMetadata | None) -> TransactionMetadata | None:
    """The id's metadata once `outcome.records` are appended (None if it became DEAD)."""
    if not outcome.records:
        return current
    last = outcome.records[-1]
    return None if last.state is TxnState.DEAD else last
