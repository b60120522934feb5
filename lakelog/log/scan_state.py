"""The transaction state a scan plan decides on (S5.1, S5.3), kept between the plans of one process.

A scan plan (lakelog.log.scan) needs, for each partition, the LSO and the
aborted transactions of the snapshot it pins. Both come from the partition's
`TransactionIndex`, a fold of the header columns of every row up to the LEO. A
`PartitionLog` handle folds it again from its floor (or from the newest sidecar
snapshot) each time it is opened, and a plan opens new handles every time: on
S3 that fold (three or four requests per data file) was most of a plan's time.

So the indexes are kept here, one per partition table (by URI and Delta table
id: a table created again in the same place starts afresh), and each plan only
folds the rows appended since the last one. This is a cache of state derived
from the table's rows, as the sidecar snapshots are: rows below an index's
position never change, and those that retention or delete_records remove from
the start (S9.1) are trimmed away by `catch_up` (no transaction is open across
the floor, S9.2). An index is only used for a snapshot whose LEO is at or past
its position and whose first file starts at or past its floor, so it never holds
anything the snapshot does not (a plan that raced a newer one folds afresh).
Plans of one table take its index in turn.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from lakelog.errors import CorruptRecord
from lakelog.log.partition import PartitionLog
from lakelog.log.partition_file import partition_files
from lakelog.log.plan_handles import KEPT_HANDLES
from lakelog.log.transactions import AbortedTransaction, TransactionIndex

logger = logging.getLogger(__name__)

# Partition tables whose index is kept; the least recently planned one is dropped past this (as many as the plans'
# kept handles: a topic of more partitions than indexes kept would fold every partition afresh at every plan).
KEPT_INDEXES = KEPT_HANDLES


class _Kept:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.index = TransactionIndex()


_indexes: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
_indexes_lock = threading.Lock()


def _kept(log: PartitionLog) -> _Kept:
    key = (log.table.uri, log.table.table_id)
    with _indexes_lock:
        kept = _indexes.get(key)
        if kept is None:
            kept = _indexes[key] = _Kept()
            while len(_indexes) > KEPT_INDEXES:
                _indexes.popitem(last=False)
        else:
            _indexes.move_to_end(key)
        return kept


def transaction_state(log: PartitionLog) -> tuple[int, list[AbortedTransaction]]:
    """(LSO, every aborted transaction in marker order) of the snapshot `log` holds after this call.

    The snapshot may be reloaded once, if a data file the fold needs was removed
    after it (compaction, retention): read the log's other offsets after this
    call, never before.
    """
    for attempt in range(2):
        kept = _kept(log)
        with kept.lock:
            index = kept.index
            files = partition_files(log.table)
            floor = files[0].min_offset if files else log.log_end_offset()
            if index.position > log.log_end_offset() or index.floor > floor:
                index = TransactionIndex()  # the kept one is ahead of this snapshot: fold afresh, keep the kept
            try:
                index.catch_up(log.table, log.log_end_offset())
            except CorruptRecord:
                # A file was removed after our snapshot: the kept index is still good up to its position.
                if attempt or not log.refresh():
                    raise
                logger.info(
                    "%s: a file the scan plan needed was removed after its snapshot; planning again on v%d",
                    log.table.uri,
                    log.table.version,
                )
                continue
            return index.last_stable_offset(), index.aborted_transactions(0, log.log_end_offset())
    raise AssertionError("unreachable")


def forget() -> None:
    """Drop every kept index (the next plan of each table folds from its floor or sidecar snapshot)."""
    with _indexes_lock:
        _indexes.clear()


__all__ = ["KEPT_INDEXES", "forget", "transaction_state"]
