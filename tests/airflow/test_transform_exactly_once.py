"""LakelogTransformOperator under a real Airflow scheduler: each input row in the output once (S4.1, S4.2, S7.1, S7.4).

`airflow standalone` (LocalExecutor, SQLite) runs tests/airflow/dags/lakelog_test_transform.py
(topic `events` into `events-tagged`, 60 records a transaction). Its first run
two faulty tries (usually tries 1 and 2):
- the first SIGKILLs itself inside its second transaction, after that transaction
  wrote rows: its retry aborts them when it takes over the transactional id (S4.2);
- the second (task and supervisor) is SIGSTOPped inside its second transaction,
  after it wrote rows; after the heartbeat timeout the next try fences it and
  finishes the run; then the stopped try is resumed and is fenced at its next
  call (S4.1).
A second run after new input transforms only the new rows. After each run the
output (read_committed) holds every input row exactly once, and the group's
committed offsets are at the input's LSO. Then the example DAG
(airflow/dags/lakelog_transform.py) runs once with its params pointed at the
same input: its output holds each input row once, and the output topic's Asset
gets its event through the DAG's AssetAlias.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from lakelog import AdminClient, NewTopic, Producer
from lakelog.airflow.assets import topic_asset_uri
from lakelog.client.admin.groups import list_offsets
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, open_partition
from tests.airflow.scheduler import Airflow

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("airflow-standalone")]
DAG_FILE = Path(__file__).parent / "dags" / "lakelog_test_transform.py"
EXAMPLE_DAG_FILE = Path(__file__).parents[2] / "airflow" / "dags" / "lakelog_transform.py"
DAG_ID = "lakelog_test_transform"
EXAMPLE_DAG_ID = "lakelog_transform"
PARTITIONS = 3
HEARTBEAT_TIMEOUT_S = 10
TRANSACTIONAL_ID = "lakelog.transform.lakelog_test_transform.transform.-1"


def produce(root: str, ids: range) -> None:
    producer = Producer({"lakelog.root": root})
    for i in ids:
        producer.produce("events", key=f"k{i}", value=json.dumps({"id": i}), partition=i % PARTITIONS)
    producer.flush()


def output(root: str, isolation_level: str = READ_COMMITTED, topic: str = "events-tagged", field: str = "id") -> Counter:
    found: Counter = Counter()
    for partition in range(PARTITIONS):
        rows = open_partition(root, topic, partition).fetch(0, max_records=1_000_000, isolation_level=isolation_level).rows
        rows = rows.filter(rows.column("control").is_null())
        found.update(json.loads(value)[field] for value in rows.column("value").to_pylist())
    return found


def offsets_at_the_lso(root: str) -> tuple[dict[int, int], dict[int, int]]:
    listed = list_offsets(root, "tagger", [("events", p) for p in range(PARTITIONS)], require_stable=True)
    committed = {tp.partition: tp.offset for tp in listed.topic_partitions}
    return committed, {p: open_partition(root, "events", p).last_stable_offset() for p in range(PARTITIONS)}


def api_ready(airflow: Airflow) -> bool:
    """The API server answers: a task started before it does can be lost (its supervisor times out and kills it)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{airflow.port}/api/v2/monitor/health", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture
def scheduler(tmp_path):
    """An Airflow whose DAGs folder holds the transform test DAG and the example DAG, on a fresh local root."""
    dags = tmp_path / "dags"
    dags.mkdir()
    for dag_file in (DAG_FILE, EXAMPLE_DAG_FILE):
        shutil.copy(dag_file, dags / dag_file.name)
    root = str(tmp_path / "lake")
    # orders and orders-enriched are the example DAG's defaults: its cron runs find nothing to do and write nothing.
    AdminClient({"lakelog.root": root}).create_topics(
        [
            NewTopic(name, num_partitions=PARTITIONS)
            for name in ("events", "events-tagged", "events-enriched", "orders", "orders-enriched")
        ]
    )
    faults = tmp_path / "faults"
    faults.mkdir()
    airflow = Airflow(
        tmp_path / "airflow",
        dags,
        connections={"lakelog_default": {"conn_type": "lakelog", "extra": {"root": root}}},
        heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
        extra_env={"LAKELOG_TEST_FAULTS": str(faults)},
    )
    try:
        airflow.start([DAG_ID, EXAMPLE_DAG_ID])
        airflow.wait(lambda: api_ready(airflow), 120, "the API server to answer")
        yield airflow, root, faults
    finally:
        airflow.stop()


def test_S4_1_S4_2_S7_1_S7_4_a_retry_after_a_partial_write_and_a_zombie_leave_each_row_once(scheduler):
    airflow, root, faults = scheduler
    produce(root, range(300))
    # The 6th should_stop question is the second transaction's commit: both tries have written rows by then.
    (faults / "run-1.1.kill").write_text("6")
    (faults / "run-1.2.stop").write_text("6")
    airflow.trigger(DAG_ID, "run-1")

    airflow.wait(lambda: (faults / "run-1.stopped").exists(), 300, "a try to stop")
    stopped = json.loads((faults / "run-1.stopped").read_text())
    retry = stopped["try"] + 1
    airflow.wait(lambda: (faults / f"run-1.try{retry}.outcome").exists(), 300, f"try {retry} to end")
    finished = json.loads((faults / f"run-1.try{retry}.outcome").read_text())
    assert finished.get("offsets") == {"0": 100, "1": 100, "2": 100}, finished
    for pid in stopped["pids"]:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    airflow.wait(lambda: gone(stopped["pids"][0]), 120, f"the resumed try {stopped['try']} to end")
    runs = airflow.wait_runs_done(DAG_ID, 1, 300)
    assert runs["run-1"]["state"] == "success", runs

    assert output(root) == Counter(dict.fromkeys(range(300), 1))
    committed, lso = offsets_at_the_lso(root)
    assert committed == lso == {0: 100, 1: 100, 2: 100}
    # The killed and the stopped tries did write rows, which their successors aborted (S4.2).
    assert sum(output(root, READ_UNCOMMITTED).values()) > 300
    killed = json.loads((faults / "run-1.1.claimed").read_text())["try"]
    assert killed < stopped["try"]
    assert not (faults / f"run-1.try{killed}.outcome").exists()  # SIGKILLed: it never got to say anything
    zombie = json.loads((faults / f"run-1.try{stopped['try']}.outcome").read_text())
    assert "PRODUCER_FENCED" in zombie.get("error", ""), zombie

    # New input: the next run transforms only it.
    produce(root, range(300, 450))
    airflow.trigger(DAG_ID, "run-2")
    runs = airflow.wait_runs_done(DAG_ID, 2, 300)
    assert runs["run-2"]["state"] == "success", runs
    assert output(root) == Counter(dict.fromkeys(range(450), 1))
    committed, lso = offsets_at_the_lso(root)
    assert committed == lso == {0: 150, 1: 150, 2: 150}

    logs = airflow.task_logs(DAG_ID, "transform")

    def log_of(run: str, attempt: int) -> str:
        return next(text for path, text in logs.items() if f"run_id={run}" in path and f"attempt={attempt}." in path)

    # The killed try had committed its first transaction; the retry went on from where the zombie's left the group.
    assert f"transaction 1 of {TRANSACTIONAL_ID} committed: 60 records in, 60 out; offsets events-0 none->60" in log_of(
        "run-1", killed
    )
    assert f"transaction 1 of {TRANSACTIONAL_ID} committed: 60 records in, 60 out; offsets events-1 20->80" in log_of(
        "run-1", retry
    )
    assert "PRODUCER_FENCED" in log_of("run-1", stopped["try"])
    # The retry says it fenced the earlier tries; the resumed zombie says it was fenced with a transaction open.
    assert f"{TRANSACTIONAL_ID} took over the transactional id, fencing earlier attempts" in log_of("run-1", retry)
    assert f"transaction of {TRANSACTIONAL_ID} left to the attempt that fenced this one (PRODUCER_FENCED" in log_of(
        "run-1", stopped["try"]
    )
    assert "transformed 150 records of events into 150 of events-tagged" in log_of("run-2", 1)
    # Each successful run emitted an event on the output topic's Asset.
    events = airflow.query(
        "SELECT count(*) FROM asset_event JOIN asset ON asset.id = asset_event.asset_id WHERE asset.uri = ?",
        topic_asset_uri(root, "events-tagged"),
    )
    assert events[0][0] == 2, events

    # The example DAG, pointed by its params at the same input with a group of its own.
    params = {"input_topic": "events", "output_topic": "events-enriched", "group_id": "enricher"}
    airflow.trigger(EXAMPLE_DAG_ID, "example-1", conf=params)
    state = airflow.wait(
        lambda: (
            airflow.runs(EXAMPLE_DAG_ID).get("example-1", {}).get("state") in ("success", "failed")
            and airflow.runs(EXAMPLE_DAG_ID)["example-1"]["state"]
        ),
        300,
        "the example DAG's run to end",
    )
    assert state == "success", "\n".join(airflow.task_logs(EXAMPLE_DAG_ID, "enrich").values())[-3000:]
    sources = output(root, topic="events-enriched", field="source")
    assert len(sources) == 450 and set(sources.values()) == {1}
    events = airflow.query(
        "SELECT count(*) FROM asset_event JOIN asset ON asset.id = asset_event.asset_id WHERE asset.uri = ?",
        topic_asset_uri(root, "events-enriched"),
    )
    assert events[0][0] == 1, events
