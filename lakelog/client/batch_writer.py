"""Exactly-once bulk writes: a whole batch of Arrow rows over many partitions as one transaction.

What a Spark job's write needs (pyspark_lakelog's sink): rows already grouped
per partition, appended as transactional batches by one producer id and
committed, or aborted, together (S4.5, S4.8), in the coordinator's own steps:
`init_producer_id`, `add_partitions`, appends with `(producer id, epoch,
sequence, is_transactional)` headers, `end_transaction`.

A retried job is recognised by its `batch_id` (an integer that grows from one
batch to the next of a `transactional.id`, like Delta's `txnVersion` or a
Structured Streaming batch id). The transaction that writes batch N also
appends one row to `__sink_batches` (an internal log hashed by transactional
id), so the batch's record commits or aborts with its data. That row's commit
records three `txn` versions: the batch id, the row's offset (fixed in advance
by KIP-27's expected offset) and the last batch id committed before it (plus one). After
`init_producer_id` (which finishes any earlier attempt: S4.2), the last
committed batch is the recorded one if its row committed, else the one
recorded before it; a batch at or below it is skipped, writing nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from lakelog import config
from lakelog.coordinator.transaction import partition_for_transactional_id
from lakelog.coordinator.transaction_coordinator import TransactionCoordinator
from lakelog.errors import (
    ConcurrentTransactions,
    CorruptRecord,
    InvalidRequest,
    KafkaException,
    KafkaStorageError,
    OffsetMismatch,
)
from lakelog.log import READ_UNCOMMITTED, BatchHeader, PartitionLog, open_partition, payload_table
from lakelog.log.records import next_sequence
from lakelog.log.topics import open_internal_partition
from lakelog.store import check_root

SINK_BATCHES_LOG = "__sink_batches"
SINK_BATCHES_PARTITIONS = 8
# The `txn` app ids that record a transactional id's last batch in its __sink_batches partition.
_APP_PREFIX = "lakelog.sink."

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class BatchWriteResult:
    """What `write` did: `skipped` if the batch was committed before (a retry); records written per partition."""

    batch_id: int | None
    skipped: bool
    last_committed_batch: int | None
    records: Mapping[TopicPartitionKey, int]
    producer_id: int
    producer_epoch: int


class TransactionalBatchWriter:
    """Writes batches of rows to many partitions, each batch as one transaction of `transactional_id`."""

    def __init__(self, root: str, transactional_id: str, *, transaction_timeout_ms: int | None = None) -> None:
        self.root = check_root(root)
        if not isinstance(transactional_id, str) or not transactional_id:
            raise InvalidRequest(f"transactional.id must be a non-empty string, not {transactional_id!r}")
        self.transactional_id = transactional_id
        defaults = config.load("producer", {"lakelog.root": self.root})
        self.transaction_timeout_ms = transaction_timeout_ms or defaults["transaction.timeout.ms"]
        self._logs: dict[TopicPartitionKey, PartitionLog] = {}
        self._coordinator = TransactionCoordinator(self.root, partition_logs=lambda *tp: self._logs.get(tp))

    def write(
        self, batches: Mapping[TopicPartitionKey, Iterable[pa.Table]], batch_id: int | None = None
    ) -> BatchWriteResult:
        """Append each partition's payload tables (PAYLOAD_SCHEMA columns) and commit them all at once.

        Without `batch_id` every call writes. With it, a batch at or below the
        last committed one of this transactional id is skipped. Fences earlier
        instances of the id (S4.1). On any error the transaction is aborted and
        the error raised; if the process dies instead, the next write (or the
        coordinator sweep) aborts it.
        """
        if batch_id is not None and (not isinstance(batch_id, int) or isinstance(batch_id, bool) or batch_id < 0):
            raise InvalidRequest(f"batch.id must be a non-negative integer, not {batch_id!r}")
        identity = self._coordinator.init_producer_id(self.transactional_id, self.transaction_timeout_ms)
        producer_id, producer_epoch = identity.producer_id, identity.producer_epoch
        last_committed = self.last_committed_batch() if batch_id is not None else None
        if batch_id is not None and last_committed is not None and batch_id <= last_committed:
            return BatchWriteResult(batch_id, True, last_committed, {}, producer_id, producer_epoch)
        targets = sorted(batches)
        partitions = list(targets)
        if batch_id is not None:
            partitions.append(self._batches_partition_key())
        records: dict[TopicPartitionKey, int] = {}
        if not partitions:
            return BatchWriteResult(batch_id, False, last_committed, records, producer_id, producer_epoch)
        for tp in targets:
            self._log(tp)
        self._coordinator.add_partitions(self.transactional_id, producer_id, producer_epoch, partitions)
        try:
            for tp in targets:
                sequence = 0
                records[tp] = 0
                for payload in batches[tp]:
                    if payload.num_rows == 0:
                        continue
                    header = BatchHeader(producer_id, producer_epoch, sequence, is_transactional=True)
                    _append_with_retries(self._log(tp), payload, header)
                    sequence = next_sequence(sequence + payload.num_rows - 1)
                    records[tp] += payload.num_rows
            if batch_id is not None:
                self._record_batch(batch_id, last_committed, producer_id, producer_epoch, records)
        except BaseException:
            try:
                self._coordinator.end_transaction(self.transactional_id, producer_id, producer_epoch, commit=False)
            except KafkaException:
                pass  # fenced or unreachable: whoever comes next aborts it (S4.2, S4.7)
            raise
        ended = self._coordinator.end_transaction(self.transactional_id, producer_id, producer_epoch, commit=True)
        return BatchWriteResult(batch_id, False, last_committed, records, ended.producer_id, ended.producer_epoch)

    def last_committed_batch(self) -> int | None:
        """The highest batch id of this transactional id whose transaction committed, or None.

        Call after `init_producer_id`, so no earlier attempt is still open.
        """
        log = self._batches_log()
        log.refresh()
        app = self._app_ids()
        recorded = log.table.app_version(app["batch"])
        if recorded is None:
            return None
        offset = log.table.app_version(app["offset"])
        # Stored plus one: 0 says no batch had committed before.
        before = (log.table.app_version(app["before"]) or 0) - 1
        rows = log.fetch(offset, max_records=1, isolation_level=READ_UNCOMMITTED).rows
        if rows.num_rows != 1 or rows.column("key")[0].as_py() != self.transactional_id.encode():
            raise CorruptRecord(
                f"{SINK_BATCHES_LOG}-{log.partition}: offset {offset} is not the batch record of {self.transactional_id!r}"
            )
        producer_id = rows.column("producer_id")[0].as_py()
        open_first = log.open_transactions().get(producer_id)
        if open_first is not None and open_first <= offset:
            raise ConcurrentTransactions(
                f"the transaction that wrote batch {recorded} of {self.transactional_id!r} is still open; retry"
            )
        aborted = any(
            txn.producer_id == producer_id and txn.first_offset <= offset < txn.marker_offset
            for txn in log.aborted_transactions(offset, offset + 1)
        )
        if not aborted:
            return recorded
        return before if before >= 0 else None

    # -- internals --------------------------------------------------------------------

    def _record_batch(
        self,
        batch_id: int,
        last_committed: int | None,
        producer_id: int,
        producer_epoch: int,
        records: Mapping[TopicPartitionKey, int],
    ) -> None:
        log = self._batches_log()
        app = self._app_ids()
        description = ",".join(f"{topic}:{partition}={count}" for (topic, partition), count in sorted(records.items()))
        payload = payload_table(
            [f"batch {batch_id}: {description}".encode()], keys=[self.transactional_id.encode()]
        )
        deadline = time.monotonic() + 60
        while True:
            expected = log.log_end_offset()
            header = BatchHeader(producer_id, producer_epoch, 0, is_transactional=True, expected_offset=expected)
            versions = {
                app["batch"]: batch_id,
                app["offset"]: expected,
                app["before"]: 0 if last_committed is None else last_committed + 1,
            }
            try:
                log.append(payload, header, app_versions=versions)
                return
            except OffsetMismatch:
                # Another id's record took the offset first: nothing was written, decide again.
                if time.monotonic() > deadline:
                    raise
                log.refresh()

    def _app_ids(self) -> dict[str, str]:
        prefix = f"{_APP_PREFIX}{self.transactional_id}."
        return {name: prefix + name for name in ("batch", "offset", "before")}

    def _batches_partition_key(self) -> TopicPartitionKey:
        count = open_internal_partition(self.root, SINK_BATCHES_LOG, 0, SINK_BATCHES_PARTITIONS).config.num_partitions
        return (SINK_BATCHES_LOG, partition_for_transactional_id(self.transactional_id, count))

    def _batches_log(self) -> PartitionLog:
        key = self._batches_partition_key()
        if key not in self._logs:
            self._logs[key] = open_internal_partition(self.root, SINK_BATCHES_LOG, key[1], SINK_BATCHES_PARTITIONS)
        return self._logs[key]

    def _log(self, tp: TopicPartitionKey) -> PartitionLog:
        if tp not in self._logs:
            self._logs[tp] = open_partition(self.root, *tp)
        return self._logs[tp]


def _append_with_retries(log: PartitionLog, payload: pa.Table, header: BatchHeader, attempts: int = 5) -> None:
    """Append; a storage failure is retried with the same sequence, so a batch that did land is a duplicate (S3.2)."""
    for attempt in range(attempts):
        try:
            log.append(payload, header)
            return
        except KafkaStorageError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.1 * (attempt + 1))


__all__ = ["BatchWriteResult", "SINK_BATCHES_LOG", "TransactionalBatchWriter"]
