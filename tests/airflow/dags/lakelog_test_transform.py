"""A transform DAG for the scheduler tests (topic `events` into `events-tagged`, group `tagger`), with planned faults.

A fault is a file `<run_id>.<n>.<kind>` in $LAKELOG_TEST_FAULTS whose text is
the number of the `should_stop` question (asked before each batch and before
each commit) at which it fires. The tries of a run that reach `execute` claim
the faults in order of n, one each (writing `<run_id>.<n>.claimed`: {"try": N}),
so a try that Airflow lost before it began takes none:
- `kill`: the try SIGKILLs itself, inside an open transaction that has written rows;
- `stop`: the try stops (SIGSTOP, with its supervisor) there, and writes
  `<run_id>.stopped` ({"pids": [...], "try": N}) so the test can resume it.
Every try of a run with faults writes `<run_id>.try<N>.outcome` (its XCom, or its error) when it ends.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
from airflow.sdk import DAG

from lakelog.airflow import LakelogTransformOperator

FAULTS = Path(os.environ.get("LAKELOG_TEST_FAULTS", "/nonexistent"))
KINDS = ("kill", "stop")


def tag(batch: pa.Table) -> pa.Table:
    """Each input row once: its id and where it came from, keyed as it was."""
    columns = batch.select(["value", "partition", "offset"]).to_pydict()
    values = [
        json.dumps({"id": json.loads(value)["id"], "source": f"{partition}@{offset}"})
        for value, partition, offset in zip(columns["value"], columns["partition"], columns["offset"], strict=True)
    ]
    return pa.table({"key": batch.column("key"), "value": pa.array(values, pa.string())})


class FaultyTransform(LakelogTransformOperator):
    def execute(self, context):
        self._run, self._try = context["run_id"], context["ti"].try_number
        self._fault = self._claim()
        self._questions = 0
        try:
            result = super().execute(context)
        except BaseException as error:
            self._outcome(context, {"error": f"{type(error).__name__}: {error}"})
            raise
        self._outcome(context, result)
        return result

    def should_stop(self) -> bool:
        self._questions += 1
        if self._fault is not None and self._questions == self._fault[1]:
            if self._fault[0] == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            (FAULTS / f"{self._run}.stopped").write_text(json.dumps({"pids": [os.getpid(), os.getppid()], "try": self._try}))
            os.kill(os.getppid(), signal.SIGSTOP)
            os.kill(os.getpid(), signal.SIGSTOP)
        return super().should_stop()

    def _claim(self) -> tuple[str, int] | None:
        for path in sorted(FAULTS.glob(f"{self._run}.*.*")):
            sequence, kind = path.name[len(self._run) + 1 :].split(".", 1)
            if kind not in KINDS:
                continue
            try:
                claimed = os.open(FAULTS / f"{self._run}.{sequence}.claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(claimed, json.dumps({"try": self._try}).encode())
            os.close(claimed)
            return kind, int(path.read_text())
        return None

    def _outcome(self, context, what) -> None:
        if any(FAULTS.glob(f"{self._run}.*.claimed")):
            (FAULTS / f"{self._run}.try{self._try}.outcome").write_text(json.dumps(what, default=str))


with DAG(
    dag_id="lakelog_test_transform",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 3, "retry_delay": timedelta(seconds=2)},
) as dag:
    FaultyTransform(
        task_id="transform",
        input_topic="events",
        output_topic="events-tagged",
        group_id="tagger",
        transform=tag,
        max_records_per_transaction=60,
        # Several appends per transaction, so a try that dies mid-transaction has written rows.
        producer_config={"batch.num.messages": 10},
    )
