"""A daily load DAG for the scheduler tests, with the faults a test plans for it.

The source folder and the fault folder come from $LAKELOG_TEST_SOURCE and
$LAKELOG_TEST_FAULTS. A fault is a file `<day>.<kind>` in the fault folder,
fired once (claimed by creating `<day>.fired`) by the first attempt that
reaches it:
- `raise`: the try raises after writing half the day's rows;
- `kill`: the try SIGKILLs itself after writing half the day's rows;
- `stop-before`: the try stops (SIGSTOP, with its supervisor) before it loads anything;
- `stop-mid`: the try stops after writing half the day's rows.
A stopped try writes `<day>.stopped` ({"pids": [...]}) so the test can resume it,
and every try of a faulted day writes `<day>.try<N>.outcome` when it ends.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from lakelog.airflow import LakelogLoadOperator

SOURCE = os.environ.get("LAKELOG_TEST_SOURCE", "/nonexistent")
FAULTS = Path(os.environ.get("LAKELOG_TEST_FAULTS", "/nonexistent"))
KINDS = ("raise", "kill", "stop-before", "stop-mid")


def stop_with_supervisor(day: str) -> None:
    pids = [os.getpid(), os.getppid()]
    (FAULTS / f"{day}.stopped").write_text(json.dumps({"pids": pids}))
    os.kill(os.getppid(), signal.SIGSTOP)
    os.kill(os.getpid(), signal.SIGSTOP)


class FaultyLoad(LakelogLoadOperator):
    def execute(self, context):
        day = context["data_interval_start"].strftime("%Y-%m-%d")
        self._fault = self._claim(day)
        self._batches = 0
        self._day = day
        if self._fault == "stop-before":
            stop_with_supervisor(day)
        try:
            result = super().execute(context)
        except BaseException as error:
            self._outcome(context, {"error": f"{type(error).__name__}: {error}"})
            raise
        self._outcome(context, result)
        return result

    def should_stop(self) -> bool:
        self._batches += 1
        if self._batches == 6 and self._fault in ("raise", "kill", "stop-mid"):
            if self._fault == "raise":
                raise RuntimeError(f"injected failure after half of {self._day}")
            if self._fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            stop_with_supervisor(self._day)
        return super().should_stop()

    def _claim(self, day: str) -> str | None:
        for kind in KINDS:
            if (FAULTS / f"{day}.{kind}").exists():
                try:
                    os.close(os.open(FAULTS / f"{day}.fired", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return None
                return kind
        return None

    def _outcome(self, context, what) -> None:
        if any((FAULTS / f"{self._day}.{kind}").exists() for kind in KINDS):
            try_number = context["ti"].try_number
            (FAULTS / f"{self._day}.try{try_number}.outcome").write_text(json.dumps(what, default=str))


with DAG(
    dag_id="lakelog_test_load",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    end_date=datetime(2026, 1, 31),  # only backfills run it
    catchup=False,
    default_args={"retries": 3, "retry_delay": timedelta(seconds=2)},
) as dag:
    FaultyLoad(
        task_id="load_day",
        topic="days",
        source=SOURCE + "/{{ data_interval_start | ds }}.parquet",
        key_column="id",
        batch_records=50,
    )
