"""The transaction coordinator (S4): the state machine, the metadata and its row codec, the pure handlers; the
coordinator on the tables is `lakelog.coordinator.transaction.coordinator`."""

from lakelog.coordinator.runtime.hashing import java_string_hash
from lakelog.coordinator.runtime.outcome import Outcome
from lakelog.coordinator.transaction.handlers import (
    TxnOutcome,
    add_partitions,
    check_transaction_timeout,
    complete_transaction,
    end_transaction,
    init_producer_id,
    sweep,
    verify_partitions,
)
from lakelog.coordinator.transaction.metadata import (
    ROW_TYPES,
    TRANSACTION_RECORD,
    TransactionMetadata,
    partition_for_transactional_id,
    replay,
    snapshot_of,
    state_after,
    state_from_snapshot,
)
from lakelog.coordinator.transaction.results import (
    AddPartitionsResult,
    EndTransactionResult,
    InitProducerIdResult,
    SweepAction,
    TransactionMarkers,
    markers_for,
)
from lakelog.coordinator.transaction.state import (
    CONTROL_OF,
    IDLE,
    NO_TIMESTAMP,
    TransactionConfig,
    TxnState,
    is_epoch_exhausted,
)
from lakelog.typedef import TopicPartitionKey

__all__ = [
    "AddPartitionsResult",
    "CONTROL_OF",
    "EndTransactionResult",
    "IDLE",
    "InitProducerIdResult",
    "NO_TIMESTAMP",
    "Outcome",
    "ROW_TYPES",
    "SweepAction",
    "TRANSACTION_RECORD",
    "TopicPartitionKey",
    "TransactionConfig",
    "TransactionMarkers",
    "TransactionMetadata",
    "TxnOutcome",
    "TxnState",
    "add_partitions",
    "check_transaction_timeout",
    "complete_transaction",
    "end_transaction",
    "init_producer_id",
    "is_epoch_exhausted",
    "java_string_hash",
    "markers_for",
    "partition_for_transactional_id",
    "replay",
    "snapshot_of",
    "state_after",
    "state_from_snapshot",
    "sweep",
    "verify_partitions",
]
