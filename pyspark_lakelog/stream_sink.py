"""`df.writeStream.format("lakelog")`: each micro-batch written exactly once, as one lakelog transaction.

The executors stage a micro-batch's rows as batch writes stage them
(`TopicWriter.write`: Parquet files per topic-partition under the root's
`_spark_staging/`); `commit(messages, batchId)`, which Spark runs once per
micro-batch on the driver, appends them all as one transaction of the
query's `transactional.id` with Spark's batch id as the batch writer's
`batch.id` (lakelog.jobs.batch_writer). The batch id is recorded in the
transaction itself (`__sink_batches`), so:

- a micro-batch Spark runs again after a crash (its offsets logged, its commit
  not) is skipped if its transaction had committed, and written if it had not
  (an open one is aborted first: `init_producer_id` fences it, S4.1, S4.7);
- a second run of the same query (same checkpoint, so the same derived id) fences
  the first: the older run's next append or commit fails with ProducerFenced and
  its open transaction is aborted, so each batch lands once, whichever run wins.

Topics with a quality suite are gated exactly as batch writes are (S11.1-S11.3):
an enforce failure aborts the micro-batch's transaction and fails the query
with PolicyViolation (the batch is not committed, so a restart validates it again).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pyspark_lakelog.options import WriteOptions
from pyspark_lakelog.source import TopicWriter

logger = logging.getLogger(__name__)


class TopicStreamWriter(DataSourceStreamArrowWriter):
    """Stages each micro-batch's rows on the executors; commits them as one transaction keyed by the batch id."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        # The batch sink's checks (a value column, a topic) and its staging, shared by every micro-batch of this run.
        self.stager = TopicWriter(options, schema)
        self.options = options

    @property
    def transactional_id(self) -> str:
        return self.options.transactional_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self.stager.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """One transaction for the batch's staged files, recorded as batch `batchId`; a batch committed before writes nothing."""
        batch = copy.copy(self.stager)
        batch.options = dataclasses.replace(self.options, batch_id=batchId)
        batch.commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.warning("lakelog: micro-batch %s of %s failed; nothing of it was committed", batchId, self.transactional_id)
        self.stager.abort(messages)  # deletes the staging folder


__all__ = ["TopicStreamWriter"]
