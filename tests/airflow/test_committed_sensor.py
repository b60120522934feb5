"""LakelogCommittedSensor under a real Airflow scheduler: it wakes when the sweep aborts a hanging transaction (S4.7, S5.1).

`airflow standalone` (scheduler, DAG processor, API server, triggerer; LocalExecutor,
SQLite) holds two DAGs: the sensor test DAG and a copy of airflow/dags/lakelog_sweep.py,
both on the `lakelog_default` connection. Both are paused at creation, so no
scheduled sweep runs before the test asks for one. A transactional producer
(transaction.timeout.ms 2000) writes to partition 0 and is dropped without
committing. The deferrable sensors wait in the triggerer (state `deferred`), the
poking one in a worker (`running`), and stay so while the transaction is open, long
past its timeout; the sweep DAG aborts it, and every sensor succeeds with the LSO
past the abort marker. A missing topic fails each sensor at its first try with one line.

Also the conditions themselves (lakelog.jobs.committed_wait) and the trigger, on a
local and an S3 root, without Airflow's scheduler.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest

from lakelog import AdminClient, NewTopic, Producer
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import InvalidRequest, UnknownTopicOrPartition
from lakelog.jobs.committed_wait import CommittedWait, parse_offsets
from lakelog.log import open_partition
from tests.airflow.scheduler import Airflow

REPO = Path(__file__).resolve().parents[2]
DAGS = Path(__file__).parent / "dags"
SENSORS = ("wait_stable", "wait_offsets", "wait_poke")


def hanging_transaction(root: str, topic: str, timeout_ms: int) -> None:
    """A producer writes one record to partition 0 in a transaction and is dropped: it never commits or aborts."""
    producer = Producer({"lakelog.root": root, "transactional.id": "hanging", "transaction.timeout.ms": timeout_ms})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(topic, value="half", partition=0)
    producer.flush()


# -- the conditions and the trigger, without a scheduler ----------------------------------------------------


@pytest.mark.roots("local", "s3")
def test_S5_1_wait_holds_while_a_transaction_is_open_and_reports_who_holds_it(root):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("events", num_partitions=2)])
    hanging_transaction(root, "events", 60_000)
    stable = CommittedWait(root, "events")
    upto = CommittedWait(root, "events", {"topic": "events", "offsets": {"0": [0, 0]}})  # a load XCom
    first = stable.check()
    assert not first.done and [wait.partition for wait in first.held_back] == [0]
    assert "partition 0 at LSO 0 (held back by the open transaction of producer" in first.describe()
    assert "from offset 0" in first.describe()
    assert not upto.check().done

    Producer({"lakelog.root": root, "transactional.id": "hanging"}).init_transactions()  # aborts the open one (S4.2)
    after = stable.check()
    assert after.done and after.as_dict() == {"topic": "events", "last_stable_offsets": {"0": 2, "1": 0}}
    assert upto.check().last_stable_offsets == {0: 2}


def test_S5_1_wait_opens_each_partition_once_and_refuses_a_missing_topic_or_partition(tmp_path, monkeypatch):
    import lakelog.jobs.committed_wait as committed_wait

    root = str(tmp_path / "lake")
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("events", num_partitions=2)])
    opened: list[int] = []

    def counting_open(location, topic, partition):
        opened.append(partition)
        return open_partition(location, topic, partition)

    monkeypatch.setattr(committed_wait, "open_partition", counting_open)
    wait = CommittedWait(root, "events")
    assert wait.check().done and wait.check().done
    producer = Producer({"lakelog.root": root})
    producer.produce("events", value="one", partition=1)
    producer.flush()
    after = wait.check()
    assert after.done and after.last_stable_offsets == {0: 0, 1: 1}  # the refresh saw the new record
    assert opened == [0, 1]  # later checks refresh the logs in hand

    with pytest.raises(UnknownTopicOrPartition, match="topic absent does not exist"):
        CommittedWait(root, "absent", {}).check()
    with pytest.raises(UnknownTopicOrPartition, match="has partitions 0-1, not 2"):
        CommittedWait(root, "events", {1: 0, 2: 0}).check()


def test_S5_1_offsets_are_parsed_from_what_templates_and_xcoms_give():
    assert parse_offsets("t", None) is None and parse_offsets("t", "None") is None
    assert parse_offsets("t", {0: 5, "1": "7"}) == {0: 5, 1: 7}
    assert parse_offsets("t", "{'0': [3, 9]}") == {0: 10}
    assert parse_offsets("t", '{"topic": "t", "offsets": {"2": [0, 4]}}') == {2: 5}
    assert parse_offsets("t", {}) == {}
    with pytest.raises(InvalidRequest, match="of topic u, not of t"):
        parse_offsets("t", {"topic": "u", "offsets": {}})
    with pytest.raises(InvalidRequest, match="must not be negative"):
        parse_offsets("t", {0: -1})
    with pytest.raises(UnknownTopicOrPartition, match="not a partition number"):
        parse_offsets("t", {"x": 1})


def test_S4_7_S5_1_trigger_fires_when_the_sweep_aborts_the_hanging_transaction(tmp_path):
    from lakelog.airflow import LakelogCommittedTrigger

    root = str(tmp_path / "lake")
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("events", num_partitions=2)])
    hanging_transaction(root, "events", 1000)
    trigger = LakelogCommittedTrigger(topic="events", root=root, offsets={0: 1}, poke_interval=0.2)
    classpath, kwargs = trigger.serialize()
    assert classpath == "lakelog.airflow.triggers.committed.LakelogCommittedTrigger"
    assert json.loads(json.dumps(kwargs)) == kwargs

    async def scenario() -> dict:
        run = LakelogCommittedTrigger(**kwargs).run()
        first = asyncio.ensure_future(run.__anext__())
        await asyncio.sleep(1.2)
        assert not first.done()  # the transaction is open (and past its timeout: nobody swept yet)
        await asyncio.to_thread(TransactionCoordinator(root).sweep)
        return (await asyncio.wait_for(first, 60)).payload

    assert asyncio.run(scenario()) == {"status": "success", "topic": "events", "last_stable_offsets": {"0": 2}}

    missing = LakelogCommittedTrigger(topic="absent", root=root, poke_interval=0.2)

    async def first_event() -> dict:
        return (await missing.run().__anext__()).payload

    event = asyncio.run(first_event())
    assert event["status"] == "error" and "UNKNOWN_TOPIC_OR_PART" in event["message"] and "absent" in event["message"]


# -- under the scheduler ----------------------------------------------------------------------------------


@pytest.fixture
def scheduler(tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(DAGS / "lakelog_test_sensor.py", dags / "lakelog_test_sensor.py")
    shutil.copy(REPO / "airflow" / "dags" / "lakelog_sweep.py", dags / "lakelog_sweep.py")
    root = str(tmp_path / "lake")
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("events", num_partitions=2)])
    airflow = Airflow(
        tmp_path / "airflow",
        dags,
        connections={"lakelog_default": {"conn_type": "lakelog", "extra": {"root": root}}},
        extra_env={"AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True"},
    )
    try:
        airflow.start(["lakelog_test_sensor", "lakelog_sweep"])
        unpaused = airflow.cli(["dags", "unpause", "lakelog_test_sensor"], writes=True)
        assert unpaused.returncode == 0, unpaused.stderr[-2000:]
        yield airflow, root
    finally:
        airflow.stop()


def states(airflow: Airflow, run_id: str) -> dict[str, str]:
    return {ti["task_id"]: ti["state"] for ti in airflow.task_instances("lakelog_test_sensor", run_id)}


def xcom(airflow: Airflow, run_id: str, task_id: str) -> dict:
    rows = airflow.query(
        "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = 'return_value'",
        "lakelog_test_sensor",
        run_id,
        task_id,
    )
    assert rows, f"no XCom from {task_id}"
    value = json.loads(rows[0][0])
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.slow
@pytest.mark.xdist_group("airflow-standalone")
def test_S4_7_S5_1_sensor_wakes_when_the_sweep_dag_aborts_a_hanging_transaction(scheduler):
    airflow, root = scheduler
    hanging_transaction(root, "events", 2000)
    airflow.trigger("lakelog_test_sensor", "hanging", conf={"topic": "events", "offsets": {"0": 1}})
    waiting = {"wait_stable": "deferred", "wait_offsets": "deferred", "wait_poke": "running"}
    airflow.wait(lambda: states(airflow, "hanging") == waiting, 300, f"the sensors to wait ({waiting})")

    # They stay waiting while the transaction is open, past its timeout (nobody swept yet), and each check
    # says who holds the partition back: the deferred ones from the triggerer (a `.trigger.` log), the other poking.
    def checks(task_id: str, *, triggerer: bool) -> int:
        logs = airflow.task_logs("lakelog_test_sensor", task_id)
        return sum(
            log.count("partition 0 at LSO 0 (held back by the open transaction of producer")
            for path, log in logs.items()
            if "run_id=hanging" in path and (".trigger." in path) == triggerer
        )

    timed_out = time.monotonic() + 2.5
    airflow.wait(
        lambda: (
            time.monotonic() > timed_out and all(checks(task_id, triggerer=task_id != "wait_poke") >= 3 for task_id in SENSORS)
        ),
        300,
        "each sensor to check three times",
    )
    assert states(airflow, "hanging") == waiting
    assert open_partition(root, "events", 0).last_stable_offset() == 0

    unpaused = airflow.cli(["dags", "unpause", "lakelog_sweep"], writes=True)
    assert unpaused.returncode == 0, unpaused.stderr[-2000:]
    airflow.trigger("lakelog_sweep", "sweep-now")
    airflow.wait(
        lambda: set(states(airflow, "hanging").values()) <= {"success", "failed", "upstream_failed"},
        300,
        "the sensors to end",
    )
    assert states(airflow, "hanging") == dict.fromkeys(SENSORS, "success"), airflow.task_logs("lakelog_test_sensor")
    assert TransactionCoordinator(root).describe("hanging").state.value == "CompleteAbort"
    sweeps = airflow.task_logs("lakelog_sweep", "sweep")
    assert any("'aborted_timed_out': ['hanging']" in log for log in sweeps.values()), sweeps

    # The abort marker is offset 1 of partition 0: the LSO is 2 there, 0 on the empty partition 1.
    assert xcom(airflow, "hanging", "wait_stable") == {"topic": "events", "last_stable_offsets": {"0": 2, "1": 0}}
    assert xcom(airflow, "hanging", "wait_offsets") == {"topic": "events", "last_stable_offsets": {"0": 2}}
    assert xcom(airflow, "hanging", "wait_poke") == {"topic": "events", "last_stable_offsets": {"0": 2, "1": 0}}
    logs = "\n".join(airflow.task_logs("lakelog_test_sensor", "wait_stable").values())
    assert "topic events is stable up to the offsets waited for" in logs or "reached the offsets waited for" in logs, logs

    # A missing topic: each sensor fails at its first try (no retry), with one clear line.
    airflow.trigger("lakelog_test_sensor", "missing", conf={"topic": "absent"})
    airflow.wait(
        lambda: list(states(airflow, "missing").values()) == ["failed"] * len(SENSORS),
        300,
        "the sensors on a missing topic to fail",
    )
    for ti in airflow.task_instances("lakelog_test_sensor", "missing"):
        assert ti["try_number"] == 1, ti
    for task_id in SENSORS:
        logs = "\n".join(
            log for path, log in airflow.task_logs("lakelog_test_sensor", task_id).items() if "run_id=missing" in path
        )
        assert "UNKNOWN_TOPIC_OR_PART: topic absent does not exist" in logs, logs
