"""LakelogLoadOperator: load one unit of source files into a topic exactly once, whatever Airflow repeats.

A unit is the data a task instance covers: (dag_id, task_id, map_index, and
the run's partition key, else its data interval), never the attempt and never
`logical_date` alone, which Airflow 3 leaves None for manual and asset runs.
The rows and the unit's record commit in one transaction
(`lakelog.jobs.unit_load`), so:

- a retry after a failure that had written half the rows aborts that half
  (S4.2) and writes the unit once;
- a retry, a cleared task, or a backfill with `--reprocess-behavior completed`
  of a unit that committed appends nothing and returns where the rows are;
- an attempt that stalled past its heartbeat and resumes after its retry
  either finds the unit loaded (if it had not begun) or is fenced at its next
  write (S4.1): Airflow's SIGTERM to a resumed zombie only calls `on_kill`,
  which stops the load between batches, but correctness never depends on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from lakelog.airflow.assets import emit_topic_event, parse_time_asset
from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID, LakelogHook
from lakelog.airflow.operators._errors import task_errors
from lakelog.jobs.unit_load import load_unit

logger = logging.getLogger(__name__)


def unit_of(context: Mapping[str, Any]) -> str:
    """The unit a task instance covers: dag.task.map_index.<partition key or data interval>."""
    ti = context["ti"]
    dag_run = context["dag_run"]
    map_index = getattr(ti, "map_index", -1)
    map_index = -1 if map_index is None else map_index
    partition_key = getattr(dag_run, "partition_key", None)
    start = getattr(dag_run, "data_interval_start", None)
    end = getattr(dag_run, "data_interval_end", None)
    if partition_key:
        covered = f"partition={partition_key}"
    elif start is not None and end is not None:
        covered = f"{start.isoformat()}--{end.isoformat()}"
    else:
        raise AirflowFailException(
            f"run {dag_run.run_id} has neither a partition key nor a data interval, so the unit it loads cannot be "
            f"told; pass unit= (a template naming the data, e.g. the file's date)"
        )
    return f"{ti.dag_id}.{ti.task_id}.{map_index}.{covered}"


class LakelogLoadOperator(BaseOperator):
    """Load `source` (a path or glob of Parquet, CSV or JSONL files, templated) into `topic`, once per unit.

    :param topic: the topic to load into (it must exist).
    :param source: a path, glob or list of them, local or on the root's object store.
    :param key_column: the column (or JSON field) whose value keys each record; rows are spread over the
        topic's partitions by the producer's `partitioner`, as the Producer spreads them.
    :param format: parquet, csv or jsonl; by default each file's suffix tells.
    :param unit: the unit's name, if the run's partition key or data interval does not say which data it covers.
    :param lakelog_conn_id: the `lakelog` connection naming the root.
    :param producer_config: producer configs over the connection's (e.g. `transaction.timeout.ms`).

    Returns (XCom) `{"topic", "unit", "loaded", "rows", "offsets": {partition: [first, last]}}`;
    `loaded` is False when an earlier attempt had loaded the unit.
    """

    template_fields: Sequence[str] = ("topic", "source", "key_column", "unit")
    ui_color = "#cfe8f7"

    def __init__(
        self,
        *,
        topic: str,
        source: str | list[str],
        key_column: str | None = None,
        format: str | None = None,
        unit: str | None = None,
        lakelog_conn_id: str = DEFAULT_CONN_ID,
        batch_records: int = 10_000,
        producer_config: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            asset = parse_time_asset(topic, lakelog_conn_id)
            kwargs["outlets"] = [asset] if asset is not None else []
        super().__init__(**kwargs)
        self.topic = topic
        self.source = source
        self.key_column = key_column
        self.format = format
        self.unit = unit
        self.lakelog_conn_id = lakelog_conn_id
        self.batch_records = batch_records
        self.producer_config = dict(producer_config or {})
        self._stop = threading.Event()

    def execute(self, context: Any) -> dict[str, Any]:
        unit = self.unit or unit_of(context)
        with task_errors(f"load of unit {unit} into {self.topic}"):
            connection = LakelogHook(self.lakelog_conn_id).connection
            result = load_unit(
                connection.root,
                self.topic,
                self.source,
                unit,
                key_column=self.key_column,
                format=self.format,
                batch_records=self.batch_records,
                storage_options=connection.storage_options,
                producer_config=connection.client_config("producer", self.producer_config),
                should_stop=self.should_stop,
            )
        if result.loaded:
            self.log.info("loaded unit %s: %s", unit, result.describe())
        else:
            self.log.warning(
                "skipped: unit %s was loaded before by an earlier attempt, at %s; this attempt wrote nothing",
                unit,
                result.describe(),
            )
        emit_topic_event(self, context, self.topic, connection.root, result.as_dict())
        return result.as_dict()

    def should_stop(self) -> bool:
        """Asked before each batch: True once the task was told to stop (then the load aborts)."""
        return self._stop.is_set()

    def on_kill(self) -> None:
        self.log.warning("asked to stop: the load stops before its next batch and its transaction is aborted")
        self._stop.set()


__all__ = ["LakelogLoadOperator", "unit_of"]
