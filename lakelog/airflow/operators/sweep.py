"""LakelogSweepOperator: one pass of the coordinator sweep over a root (S4.7, S6.5, S8.2).

Aborts transactions past their `transaction.timeout.ms`, finishes decided ones
whose producer died before every marker was written, expires idle
transactional ids, and removes group members past their session or rebalance
timeout; then cleans every topic's log: compaction by key and retention (S9.1,
S9.3). Idempotent and safe beside clients and other sweeps: overlapping or
retried runs do no harm.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from airflow.sdk import BaseOperator

from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID, LakelogHook
from lakelog.airflow.operators._errors import task_errors

logger = logging.getLogger(__name__)


class LakelogSweepOperator(BaseOperator):
    """Run the transaction and group sweeps of the connection's root; returns what each did.

    :param transactions: sweep the transaction coordinator's state (default True).
    :param groups: sweep consumer groups' members (default True).
    :param log_cleaner: apply each topic's cleanup.policy: retention, compaction; compact the
        internal logs by their record keys; tombstone batch records whose rows are gone (default True).
    """

    template_fields: Sequence[str] = ()
    ui_color = "#e8e0f7"

    def __init__(
        self,
        *,
        lakelog_conn_id: str = DEFAULT_CONN_ID,
        transactions: bool = True,
        groups: bool = True,
        log_cleaner: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lakelog_conn_id = lakelog_conn_id
        self.transactions = transactions
        self.groups = groups
        self.log_cleaner = log_cleaner

    def execute(self, context: Any) -> dict[str, Any]:
        from lakelog.coordinator.group.coordinator import GroupCoordinator
        from lakelog.coordinator.transaction.coordinator import TransactionCoordinator

        report: dict[str, Any] = {}
        with task_errors("sweep"):
            root = LakelogHook(self.lakelog_conn_id).location()
            if self.transactions:
                report["transactions"] = asdict(TransactionCoordinator(root).sweep())
                self.log.info("transaction sweep: %s", report["transactions"])
            if self.groups:
                report["groups_removed"] = [list(pair) for pair in GroupCoordinator(root).sweep()]
                self.log.info("group sweep: removed members %s", report["groups_removed"])
            if self.log_cleaner:
                from lakelog.log.partition import wall_clock_ms
                from lakelog.log.retention import clean_topics

                report["log_cleaner"] = [asdict(done) for done in clean_topics(root, wall_clock_ms())]
                self.log.info("log cleaner: %s", report["log_cleaner"])
                from lakelog.coordinator.compaction.internal_compaction import compact_internal_logs

                report["internal_compaction"] = [asdict(done) for done in compact_internal_logs(root)]
                self.log.info("internal log compaction: %s", report["internal_compaction"])
                from lakelog.jobs.sink_records import sweep_sink_records

                report["sink_records"] = [asdict(done) for done in sweep_sink_records(root, wall_clock_ms())]
                self.log.info("sink records: %s", report["sink_records"])
        return report


__all__ = ["LakelogSweepOperator"]
