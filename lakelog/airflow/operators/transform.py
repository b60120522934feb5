"""LakelogTransformOperator: transform one topic into another exactly once per run, whatever Airflow repeats.

Each run reads the input from the group's committed offsets up to the LSO it
sees when it starts, applies `transform` to Arrow batches, and commits the
output rows with the input offsets they came from, in transactions of at most
`max_records_per_transaction` input records (KIP-447, S7.1;
`lakelog.jobs.transform`). The transactional id is
`lakelog.transform.<dag>.<task>.<map_index>`, the same for every attempt, so:

- a retry after a try that died inside a transaction aborts that transaction
  when it starts (S4.2) and goes on from the last committed offsets;
- an attempt that stalled past its heartbeat and resumes after its retry is
  fenced at its next write (S4.1), or finds nothing left to do if it stalled
  before it began. Airflow's SIGTERM to a resumed zombie only calls `on_kill`,
  which stops the run between batches and aborts its transaction, but
  correctness never depends on it.

Runs of one task share the transactional id: run the DAG with
`max_active_runs=1` (a second concurrent run fences the first, which then
fails). The group must be the task's own (it commits outside the group protocol,
so the coordinator refuses it while the group has members: NonEmptyGroup); a
mapped task needs one group per map index.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from lakelog.airflow.assets import emit_topic_event, parse_time_asset
from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID, LakelogHook
from lakelog.airflow.operators._errors import task_errors
from lakelog.jobs.transform import Transform, TransformResult, run_transform, transform_transactional_id

logger = logging.getLogger(__name__)


class LakelogTransformOperator(BaseOperator):
    """Transform `input_topic` into `output_topic` as consumer group `group_id`, exactly once per run.

    :param input_topic: the topic to read (templated); every partition is read.
    :param output_topic: the topic to write (templated); it must exist.
    :param group_id: the consumer group whose committed offsets say where the input was left (templated);
        the task's own: no other consumer may be a member of it.
    :param transform: a callable taking a pyarrow Table and returning a Table or RecordBatch (or a list of
        them, or None). Each input table holds data rows of one partition, in offset order, at most
        `max_records_per_transaction` of them, read_committed (no aborted rows, no markers), with the columns
        of Spark's Kafka source: `key` (binary), `value` (binary), `topic` (string), `partition` (int32),
        `offset` (int64), `timestamp` (timestamp[us, UTC]), `timestampType` (int32) and `headers`
        (list<struct<key: string, value: binary>>). The output has a `value` column (binary or string) and
        optionally `key` (binary or string), `headers` (as above) and `timestamp` (a timestamp or int64
        milliseconds; absent or null: the time of writing); its rows are spread over the output's
        partitions as the Producer spreads them, by key with the producer's `partitioner`. Any other column
        or type fails the task with one line (InvalidRequest, no retry); in the first batch nothing has
        been written yet, later the open transaction is aborted.
    :param max_records_per_transaction: input records per transaction: bounds memory and the work a retry redoes.
    :param lakelog_conn_id: the `lakelog` connection naming the root.
    :param producer_config: producer configs over the connection's (e.g. `transaction.timeout.ms`).

    Returns (XCom) `{"input_topic", "output_topic", "group_id", "records_in", "records_out",
    "offsets": {partition: committed offset}}`. Emits the output topic's Asset: the one named at parse time
    when `output_topic` is not templated, else the rendered topic's Asset through any AssetAlias among the
    outlets (pass `outlets=[AssetAlias(...)]` for a templated output topic).
    """

    template_fields: Sequence[str] = ("input_topic", "output_topic", "group_id")
    ui_color = "#d7f0dc"

    def __init__(
        self,
        *,
        input_topic: str,
        output_topic: str,
        group_id: str,
        transform: Transform,
        max_records_per_transaction: int = 10_000,
        lakelog_conn_id: str = DEFAULT_CONN_ID,
        producer_config: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs:
            asset = parse_time_asset(output_topic, lakelog_conn_id)
            kwargs["outlets"] = [asset] if asset is not None else []
        super().__init__(**kwargs)
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.group_id = group_id
        self.transform = transform
        self.max_records_per_transaction = max_records_per_transaction
        self.lakelog_conn_id = lakelog_conn_id
        self.producer_config = dict(producer_config or {})
        self._stop = threading.Event()

    def execute(self, context: Any) -> dict[str, Any]:
        ti = context["ti"]
        transactional_id = transform_transactional_id(ti.dag_id, ti.task_id, getattr(ti, "map_index", -1))
        with task_errors(f"transform of {self.input_topic} into {self.output_topic} as group {self.group_id}"):
            connection = LakelogHook(self.lakelog_conn_id).connection
            result = run_transform(
                connection.root,
                self.input_topic,
                self.output_topic,
                self.group_id,
                self.transform,
                transactional_id=transactional_id,
                max_records_per_transaction=self.max_records_per_transaction,
                storage_options=connection.storage_options,
                producer_config=connection.client_config("producer", self.producer_config),
                should_stop=self.should_stop,
            )
        if result.transactions:
            self.log.info(
                "transformed %d records of %s into %d of %s in %d transaction(s) of %s; group %s now at %s",
                result.records_in,
                self.input_topic,
                result.records_out,
                self.output_topic,
                result.transactions,
                transactional_id,
                self.group_id,
                _offsets(result),
            )
        else:
            self.log.info(
                "nothing to transform: group %s was at the end of %s (%s); this attempt wrote nothing",
                self.group_id,
                self.input_topic,
                _offsets(result),
            )
        emit_topic_event(self, context, self.output_topic, connection.root, result.as_dict())
        return result.as_dict()

    def should_stop(self) -> bool:
        """Asked before each batch and each commit: True once the task was told to stop (then the run aborts)."""
        return self._stop.is_set()

    def on_kill(self) -> None:
        self.log.warning("asked to stop: the transform stops before its next batch and its open transaction is aborted")
        self._stop.set()


def _offsets(result: TransformResult) -> str:
    return ", ".join(f"{result.input_topic}-{p} at {offset}" for p, offset in sorted(result.offsets.items())) or "no offsets"


__all__ = ["LakelogTransformOperator"]
