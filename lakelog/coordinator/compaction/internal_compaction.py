"""Compaction of the internal logs by their record keys (S9.3), one pass as the sweep runs it (S8.2).

`__consumer_offsets` keeps the latest offset per (group, topic, partition) and
the latest record per group, member and assignment; `__transaction_state` the
latest record per transactional.id; `__schemas` the rows of the versions held, the row that gave each schema
its id, and the latest level per subject (lakelog.coordinator.compaction.record_keys). Each
partition is compacted through its coordinator's own `CoordinatorLog`, so the
rows are decoded and replayed exactly as the coordinator does, and a plan that
would change the replayed state is not committed. A cold coordinator then
replays the live state, not the history: its load cost follows the number of
groups, members, offsets and ids, not how long the root has run. A partition
holding a row that does not decode is left as it is and reported with the
CorruptRecord naming the row's table and offset: compaction never drops or
rewrites a row it cannot read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lakelog.coordinator.compaction.record_keys import live_group_offsets, live_transaction_offsets
from lakelog.coordinator.group.coordinator import CONSUMER_OFFSETS_LOG, GroupCoordinator
from lakelog.coordinator.schemas.registry import SCHEMAS_LOG, SchemaRegistry
from lakelog.coordinator.schemas.state import live_schema_offsets
from lakelog.coordinator.schemas.types import SchemaRegistryError
from lakelog.coordinator.transaction.coordinator import TRANSACTION_STATE_LOG, TransactionCoordinator
from lakelog.errors import KafkaException
from lakelog.log.compaction import CompactionResult
from lakelog.log.topics import existing_internal_partitions
from lakelog.store import Location

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalCompaction:
    """What one pass did to one internal partition: its compaction, or the error it met."""

    log_name: str
    partition: int
    compaction: CompactionResult | None = None
    error: str | None = None


def compact_internal_logs(root: str | Location) -> list[InternalCompaction]:
    """Compact every partition of `__consumer_offsets`, `__transaction_state` and `__schemas`; the ones changed or failed.

    Idempotent and safe beside coordinators and other sweeps: each compaction is
    one strict commit decided on the snapshot it follows, and an appender that
    loses its race to it decides again at the same log end offset. An error on
    one partition is reported (and logged) and the pass carries on.
    """
    report: list[InternalCompaction] = []
    groups = GroupCoordinator(root)
    transactions = TransactionCoordinator(root)
    for log_name, coordinator, live in (
        (CONSUMER_OFFSETS_LOG, groups, live_group_offsets),
        (TRANSACTION_STATE_LOG, transactions, live_transaction_offsets),
    ):
        for partition in existing_internal_partitions(root, log_name):
            try:
                # The coordinator's own log: its decode, replay and codec are what the plan is checked on.
                done = coordinator._log(partition).compact(live)
            except KafkaException as error:
                logger.warning("internal log compaction: %s-%d skipped: %s", log_name, partition, error)
                report.append(InternalCompaction(log_name, partition, error=str(error)))
                continue
            if done is not None:
                report.append(InternalCompaction(log_name, partition, done))
    if existing_internal_partitions(root, SCHEMAS_LOG):
        try:
            done = SchemaRegistry(root).log.compact(live_schema_offsets)
        except (KafkaException, SchemaRegistryError) as error:
            logger.warning("internal log compaction: %s-0 skipped: %s", SCHEMAS_LOG, error)
            report.append(InternalCompaction(SCHEMAS_LOG, 0, error=str(error)))
        else:
            if done is not None:
                report.append(InternalCompaction(SCHEMAS_LOG, 0, done))
    return report


__all__ = ["InternalCompaction", "compact_internal_logs"]
