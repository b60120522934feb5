"""LakelogLoadOperator under a real Airflow scheduler: backfills load exactly once, bad input fails cleanly (S2.4, S4.1, S4.2, S8.3).

`airflow standalone` (LocalExecutor, SQLite) runs a daily DAG of
LakelogLoadOperator over 7 days of 500-row files, backfilled with
`--max-active-runs 3 --run-backwards`, with faults in the tries:
- 2026-01-02: the first try raises after writing half its rows;
- 2026-01-03: the first try SIGKILLs itself after writing half its rows;
- 2026-01-04: the first try (task and supervisor) is SIGSTOPped before it loads; after the
  heartbeat timeout its retry loads the day, then the old try is resumed;
- 2026-01-06: the same, stopped after writing half its rows.
Then a second backfill of two dates with `--reprocess-behavior completed`.
The topic's read_committed content must be the 7 days' rows, each once.

Bad input (a missing connection, a glob that matches nothing, a file of the
wrong format, a missing topic) fails its task at the first try, with one clear
line in the log, and leaves the root as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import table_fingerprint

from lakelog import AdminClient, NewTopic
from lakelog.log import READ_COMMITTED, open_partition
from tests.airflow.scheduler import Airflow

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("airflow-standalone")]
DAGS = Path(__file__).parent / "dags"
DAYS = [f"2026-01-0{day}" for day in range(1, 8)]
ROWS = 500
PARTITIONS = 3
HEARTBEAT_TIMEOUT_S = 10


def committed_ids(root: str, topic: str) -> Counter:
    ids: Counter = Counter()
    for partition in range(PARTITIONS):
        log = open_partition(root, topic, partition)
        rows = log.fetch(0, max_records=1_000_000, isolation_level=READ_COMMITTED).rows
        ids.update(json.loads(value)["id"] for value in rows.column("value").to_pylist())
    return ids


def write_days(source: Path) -> set[str]:
    source.mkdir()
    expected = set()
    for day in DAYS:
        ids = [f"{day}/{i}" for i in range(ROWS)]
        pq.write_table(pa.table({"id": ids, "amount": list(range(ROWS))}), source / f"{day}.parquet")
        expected.update(ids)
    return expected


def resume(faults: Path, day: str) -> int:
    """SIGCONT the stopped task process and its supervisor (a LocalExecutor worker, which lives on); the task's pid."""
    pids = json.loads((faults / f"{day}.stopped").read_text())["pids"]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    return pids[0]


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """One Airflow for the module: its DAGs are this module's test DAGs, its root a fresh local folder."""
    base = tmp_path_factory.mktemp("load-operator")
    dags = base / "dags"
    dags.mkdir()
    for name in ("lakelog_test_load.py", "lakelog_test_bad_input.py"):
        shutil.copy(DAGS / name, dags / name)
    root = str(base / "lake")
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("days", num_partitions=PARTITIONS)])
    (base / "faults").mkdir()
    airflow = Airflow(
        base / "airflow",
        dags,
        connections={"lakelog_default": {"conn_type": "lakelog", "extra": {"root": root}}},
        heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
        extra_env={"LAKELOG_TEST_SOURCE": str(base / "source"), "LAKELOG_TEST_FAULTS": str(base / "faults")},
    )
    expected = write_days(base / "source")
    try:
        airflow.start(["lakelog_test_load", "lakelog_test_bad_input"])
        yield airflow, root, base, expected
    finally:
        airflow.stop()


def test_S4_1_S4_2_backfill_with_failures_zombies_and_a_reprocess_loads_each_row_once(scheduler):
    airflow, root, base, expected = scheduler
    faults = base / "faults"
    for day, kind in [("2026-01-02", "raise"), ("2026-01-03", "kill"), ("2026-01-04", "stop-before"), ("2026-01-06", "stop-mid")]:
        (faults / f"{day}.{kind}").touch()
    airflow.backfill(
        "lakelog_test_load",
        DAYS[0],
        DAYS[-1],
        "--max-active-runs",
        "3",
        "--run-backwards",
    )
    # The stopped tries: wait for each day's retry to succeed, then resume the zombie.
    for day in ("2026-01-04", "2026-01-06"):
        # The waits' closures bind this iteration's day and task as defaults (each runs within it).
        airflow.wait(lambda day=day: (faults / f"{day}.stopped").exists(), 300, f"the first try of {day} to stop")
        airflow.wait(
            lambda day=day: any(
                (faults / f"{day}.try{n}.outcome").exists()
                and "loaded" in json.loads((faults / f"{day}.try{n}.outcome").read_text())
                for n in (2, 3, 4)
            ),
            300,
            f"a retry of {day} to load it",
        )
        task = resume(faults, day)
        airflow.wait(lambda task=task: gone(task), 120, f"the resumed first try of {day} to end")
    runs = airflow.wait_runs_done("lakelog_test_load", len(DAYS), 600)
    assert all(run["state"] == "success" for run in runs.values()), runs
    assert committed_ids(root, "days") == Counter(dict.fromkeys(expected, 1))

    # The zombies: the one stopped before loading found the day loaded; the one stopped mid-write was fenced.
    before = json.loads((faults / "2026-01-04.try1.outcome").read_text())
    assert before.get("loaded") is False, before
    mid = json.loads((faults / "2026-01-06.try1.outcome").read_text())
    assert "ProducerFenced" in mid.get("error", "") or "PRODUCER_FENCED" in mid.get("error", ""), mid

    # A second backfill re-runs two completed dates: nothing is appended, and the logs say where the units are.
    airflow.wait_backfills_done("lakelog_test_load", 120)
    airflow.backfill(
        "lakelog_test_load",
        DAYS[1],
        DAYS[2],
        "--reprocess-behavior",
        "completed",
        "--max-active-runs",
        "2",
    )
    airflow.wait_backfills_done("lakelog_test_load", 300)
    runs = airflow.runs("lakelog_test_load")
    assert all(run["state"] == "success" for run in runs.values()), runs
    assert committed_ids(root, "days") == Counter(dict.fromkeys(expected, 1))
    logs = airflow.task_logs("lakelog_test_load", "load_day")

    def log_of(day: str, attempt: int) -> str:
        return next(text for path, text in logs.items() if f"run_id=backfill__{day}" in path and f"attempt={attempt}." in path)

    # The zombie stopped before loading says, in its own attempt's log, that it skipped and where the day is.
    assert "skipped: unit lakelog_test_load.load_day.-1.2026-01-04" in log_of("2026-01-04", 1)
    assert "was loaded before by an earlier attempt, at 500 rows at days-0" in log_of("2026-01-04", 1)
    assert "PRODUCER_FENCED" in log_of("2026-01-06", 1)
    # The reprocessed dates' new tries say the same.
    for day in DAYS[1:3]:
        assert "this attempt wrote nothing" in log_of(day, 3), log_of(day, 3)[-3000:]


BAD_INPUT = {
    "missing_connection": "Airflow connection 'lakelog_nowhere' is not defined",
    "no_match": "INVALID_REQUEST: source {source}/nothing-*.parquet matches no file",
    "wrong_format": "INVALID_REQUEST: source bad.parquet cannot be read as parquet",
    "missing_topic": "UNKNOWN_TOPIC_OR_PART: topic absent does not exist",
}


def test_S8_3_bad_input_fails_the_task_at_once_with_one_line_and_writes_nothing(scheduler):
    airflow, root, base, _ = scheduler
    source = base / "source"
    pq.write_table(pa.table({"id": ["g"]}), source / "good.parquet")
    (source / "bad.parquet").write_text("id,amount\n1,2\n")
    before = table_fingerprint(root)
    airflow.trigger("lakelog_test_bad_input", "bad-input")
    airflow.wait_runs_done("lakelog_test_bad_input", 1, 300)
    instances = {ti["task_id"]: ti for ti in airflow.task_instances("lakelog_test_bad_input", "bad-input")}
    assert {task: (ti["state"], ti["try_number"]) for task, ti in instances.items()} == dict.fromkeys(BAD_INPUT, ("failed", 1))
    for task, line in BAD_INPUT.items():
        log = "\n".join(airflow.task_logs("lakelog_test_bad_input", task).values())
        assert line.format(source=source) in log, (task, log[-3000:])
    assert table_fingerprint(root) == before
