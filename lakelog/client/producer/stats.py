"""A Producer's part of librdkafka's statistics (lakelog.client.statistics): messages queued, per partition the
messages delivered and the last offset written, and `eos`: the producer id, epoch and transaction state."""

from __future__ import annotations

from typing import Any

from lakelog.client.producer.reports import DeliveryReports
from lakelog.client.producer.transactions import TransactionManager, TransactionState
from lakelog.client.statistics import partition_stats, topics_stats

# librdkafka's txn_state names for the producer's transaction states.
TXN_STATES = {
    TransactionState.UNINITIALIZED: "Init",
    TransactionState.READY: "Ready",
    TransactionState.IN_TRANSACTION: "InTransaction",
    TransactionState.ABORTABLE_ERROR: "AbortableError",
    TransactionState.FATAL_ERROR: "FatalError",
}


def producer_stats(queued: int, reports: DeliveryReports, transactions: TransactionManager) -> dict[str, Any]:
    partitions = {
        tp: partition_stats(tp[1], txmsgs=count, txbytes=size, msgs=count, hi_offset=last + 1)
        for tp, (count, size, last) in reports.delivered.items()
    }
    return {
        "msg_cnt": queued,
        "topics": topics_stats(partitions),
        "txmsgs": sum(counts[0] for counts in reports.delivered.values()),
        "txmsg_bytes": sum(counts[1] for counts in reports.delivered.values()),
        "eos": {
            "idemp_state": "Assigned" if transactions.producer_id is not None else "Init",
            "idemp_stateage": 0,
            "txn_state": TXN_STATES[transactions.state],
            "txn_stateage": 0,
            "txn_may_enq": transactions.state is TransactionState.IN_TRANSACTION,
            "producer_id": -1 if transactions.producer_id is None else transactions.producer_id,
            "producer_epoch": transactions.producer_epoch if transactions.producer_id is not None else -1,
            "epoch_cnt": 0,
        },
    }


__all__ = ["producer_stats"]
