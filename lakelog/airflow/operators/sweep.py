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
import time
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
        from lakelog.jobs.maintenance import Sweeper

        report: dict[str, Any] = {}
        with task_errors("sweep"):
            sweeper = Sweeper(LakelogHook(self.lakelog_conn_id).location())
            started_ms = int(time.time() * 1000)
            if self.transactions:
                report["transactions"] = asdict(sweeper.transactions())
                self.log.info("transaction sweep: %s", report["transactions"])
            if self.groups:
                report["groups_removed"] = [list(pair) for pair in sweeper.groups()]
                self.log.info("group sweep: removed members %s", report["groups_removed"])
            if self.log_cleaner:
                report["log_cleaner"] = [asdict(done) for done in sweeper.log_cleaner()]
                self.log.info("log cleaner: %s", report["log_cleaner"])
                report["internal_compaction"] = [asdict(done) for done in sweeper.internal_compaction()]
                self.log.info("internal log compaction: %s", report["internal_compaction"])
                report["sink_records"] = [asdict(done) for done in sweeper.sink_records()]
                self.log.info("sink records: %s", report["sink_records"])
            steps = [step for step, ran in (("transactions", self.transactions), ("groups", self.groups)) if ran]
            steps += ["log-cleaner", "internal-compaction", "sink-records"] if self.log_cleaner else []
            sweeper.record(started_ms, steps, report)
        return report


__all__ = ["LakelogSweepOperator"]
