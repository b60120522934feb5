"""The streaming consume-transform-produce job (pipelines/stream_topic_to_topic.py) in real processes: SIGKILLed
in the middle of a micro-batch with its output transaction open, then restarted from its checkpoint; and two runs
of the same query at once (a zombie). The output holds each committed input record once, and no aborted one.

The pause inside the sink's transaction is tests/spark/stream_hooks/sitecustomize.py, on the job's PYTHONPATH only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from lakelog import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from lakelog.log import create_topic, open_partition
from lakelog.log.partition_file import partition_files

pytestmark = [pytest.mark.slow, pytest.mark.roots("local", "s3")]

REPO = Path(__file__).resolve().parents[2]
HOOKS = Path(__file__).resolve().parent / "stream_hooks"
IN_PARTITIONS, OUT_PARTITIONS = 3, 2
JOB_TIMEOUT_S = 300


def committed(root: str, topic: str, partitions: int) -> list:
    """Every record of `topic` a read_committed Consumer returns, up to the LSO of each partition."""
    with Consumer({"lakelog.root": root, "enable.partition.eof": True, "isolation.level": "read_committed"}) as reader:
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        messages, at_end = [], set()
        while len(at_end) < partitions:
            for message in reader.consume(10_000, 5.0):
                if message.error() is None:
                    messages.append(message)
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
        return messages


def write_input(root: str, first: int, outcomes: tuple[str, ...], transactional_id: str = "writer") -> None:
    producer = Producer({"lakelog.root": root, "transactional.id": transactional_id})
    producer.init_transactions()
    for number, outcome in enumerate(outcomes):
        producer.begin_transaction()
        for index in range(first + 10 * number, first + 10 * number + 10):
            producer.produce("in", key=f"k{index}", value=f"{outcome}-{index}", partition=index % IN_PARTITIONS)
        producer.flush()  # the rows land before the transaction ends (an abort drops rows still queued)
        producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    producer.close()


def start_job(root: str, checkpoint: Path, workdir: Path, pause_batch: int | None, *, idle: bool) -> subprocess.Popen:
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": f"{HOOKS}{os.pathsep}{REPO}"}
    environment.pop("LAKELOG_TEST_PAUSE_BATCH", None)
    if pause_batch is not None:
        environment.update(LAKELOG_TEST_PAUSE_BATCH=str(pause_batch), LAKELOG_TEST_PAUSE_DIR=str(workdir))
    arguments = ["--root", root, "--source", "in", "--dest", "out", "--checkpoint", str(checkpoint)]
    arguments += ["--idle-seconds", "2"] if idle else ["--available-now"]
    return subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", "local[2]"]
        + ["--conf", "spark.ui.enabled=false", str(REPO / "pipelines" / "stream_topic_to_topic.py"), *arguments],
        cwd=workdir,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_paused(job: subprocess.Popen, workdir: Path) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not (workdir / "paused").exists():
        if job.poll() is not None:
            out, err = job.communicate()
            pytest.fail(f"the job ended ({job.returncode}) before its transaction paused:\n{out}\n{err[-4000:]}")
        assert time.monotonic() < deadline, "the job never reached its micro-batch's transaction"
        time.sleep(0.05)


def open_output_transactions(root: str) -> dict[int, dict[int, int]]:
    logs = [open_partition(root, "out", p) for p in range(OUT_PARTITIONS)]
    return {log.partition: log.open_transactions() for log in logs if log.open_transactions()}


def assert_exactly_once(root: str) -> None:
    """`out` holds one record per committed record of `in` (by the source header), upper-cased, nothing aborted."""
    inputs = committed(root, "in", IN_PARTITIONS)
    outputs = committed(root, "out", OUT_PARTITIONS)
    sources = Counter(dict(message.headers())["lakelog.source"].decode() for message in outputs)
    expected = Counter(f"in:{m.partition()}:{m.offset()}" for m in inputs)
    assert sources == expected
    by_source = {f"in:{m.partition()}:{m.offset()}": m for m in inputs}
    for message in outputs:
        source = by_source[dict(message.headers())["lakelog.source"].decode()]
        assert (message.key(), message.value()) == (source.key(), source.value().upper())
    assert not any(message.value().startswith(b"ABORT") for message in outputs)


@pytest.mark.roots("local", "s3", release=("s3",))  # two Spark jobs, one killed: minutes on each root
def test_a_job_killed_with_its_output_transaction_open_restarts_from_its_checkpoint_exactly_once(root, tmp_path):
    """In: committed and aborted transactions, and one left open (committed late, after the kill). The job is
    SIGKILLed inside its first micro-batch's transaction (rows appended to `out`, not committed); restarted from
    its checkpoint, it replays that batch (aborting the open transaction, S4.1, S4.7) and reads on."""
    create_topic(root, "in", IN_PARTITIONS)
    create_topic(root, "out", OUT_PARTITIONS)
    write_input(root, 0, ("commit", "abort", "commit"))
    late = Producer({"lakelog.root": root, "transactional.id": "late"})
    late.init_transactions()
    late.begin_transaction()
    for index in range(100, 104):
        late.produce("in", key=f"k{index}", value=f"late-{index}", partition=0)
    late.flush()
    write_input(root, 200, ("commit",))  # after the open transaction: held back on partition 0 only (its LSO)
    checkpoint = tmp_path / "checkpoint"

    killed = start_job(root, checkpoint, tmp_path, pause_batch=0, idle=False)
    wait_paused(killed, tmp_path)
    assert open_output_transactions(root), "the micro-batch's transaction should be open when the job is killed"
    os.killpg(killed.pid, signal.SIGKILL)
    assert killed.wait(60) == -signal.SIGKILL
    assert committed(root, "out", OUT_PARTITIONS) == []

    late.commit_transaction()
    late.close()
    write_input(root, 300, ("abort", "commit"))
    restarted = start_job(root, checkpoint, tmp_path, pause_batch=None, idle=True)
    out, err = restarted.communicate(timeout=JOB_TIMEOUT_S)
    assert restarted.returncode == 0, out + err[-4000:]
    assert not open_output_transactions(root)
    assert_exactly_once(root)
    assert len(committed(root, "out", OUT_PARTITIONS)) == 20 + 4 + 10 + 10


@pytest.mark.roots("local")
def test_two_runs_of_one_query_at_once_the_older_is_fenced_and_each_record_lands_once(root, tmp_path):
    """Run A pauses inside its first micro-batch's transaction; run B of the same query (same checkpoint, so the
    same transactional.id) replays that batch, fencing A (S4.1), and goes on. A, let go, is fenced: its query fails
    with ProducerFenced and nothing of its transaction is committed."""
    create_topic(root, "in", IN_PARTITIONS)
    create_topic(root, "out", OUT_PARTITIONS)
    write_input(root, 0, ("commit", "abort", "commit"))
    assert len(partition_files(open_partition(root, "in", 0).table)) > 1  # the aborted rows are in the log
    checkpoint = tmp_path / "checkpoint"

    zombie = start_job(root, checkpoint, tmp_path, pause_batch=0, idle=False)
    try:
        wait_paused(zombie, tmp_path)
        (tmp_path / "winner").mkdir()
        winner = start_job(root, checkpoint, tmp_path / "winner", None, idle=True)
        out, err = winner.communicate(timeout=JOB_TIMEOUT_S)
        assert winner.returncode == 0, out + err[-4000:]
        (tmp_path / "go").touch()
        out, err = zombie.communicate(timeout=JOB_TIMEOUT_S)
    finally:
        if zombie.poll() is None:
            os.killpg(zombie.pid, signal.SIGKILL)
    assert zombie.returncode != 0, "the zombie run should have failed"
    assert "ProducerFenced" in err or "INVALID_PRODUCER_EPOCH" in err, err[-4000:]
    assert not open_output_transactions(root)
    assert_exactly_once(root)
    assert len(committed(root, "out", OUT_PARTITIONS)) == 20
