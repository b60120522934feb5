"""Stage 5 of the main job: a Structured Streaming job from topic to topic, killed mid-batch and restarted.

1. topic `events` gets committed transactions, an aborted one, and one left open;
2. the streaming job (pipelines/stream_topic_to_topic.py) runs in a child
   process and is SIGKILLed in the middle of its first micro-batch (its offsets
   logged in the checkpoint, its commit not);
3. the open transaction commits late, and the job is started again from the
   same checkpoint: it runs the killed micro-batch again and reads on;
4. `events-upper` holds every committed record of `events` once (by its
   `lakelog.source` header), upper-cased, and no aborted one.

Run alone (on any root): `python -m pipelines.demo_stream --root R`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from lakelog import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from lakelog.admin import AdminClient, NewTopic
from lakelog.client.roots import Location, open_root

from .stream_topic_to_topic import SOURCE_HEADER

SOURCE, DEST = "events", "events-upper"
PARTITIONS = {SOURCE: 3, DEST: 2}


def committed(root: str, topic: str) -> list:
    """Every record of `topic` a read_committed Consumer returns."""
    with Consumer({"lakelog.root": root, "enable.partition.eof": True, "isolation.level": "read_committed"}) as reader:
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS[topic])])
        messages, at_end = [], set()
        while len(at_end) < PARTITIONS[topic]:
            for message in reader.consume(10_000, 5.0):
                if message.error() is None:
                    messages.append(message)
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
        return messages


def transaction(producer: Producer, first: int, count: int, outcome: str) -> None:
    producer.begin_transaction()
    for index in range(first, first + count):
        producer.produce(SOURCE, value=f"{outcome}-{index}", key=f"k{index}", partition=index % PARTITIONS[SOURCE])
    producer.flush()
    producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()


def start_job(root: str, checkpoint: Path, idle_seconds: float) -> subprocess.Popen:
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, "-m", f"{__package__}.stream_topic_to_topic", "--root", root, "--source", SOURCE]
    command += ["--dest", DEST, "--checkpoint", str(checkpoint), "--idle-seconds", str(idle_seconds)]
    return subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def kill_mid_batch(job: subprocess.Popen, checkpoint: Path) -> None:
    """SIGKILL the job once its first micro-batch's offsets are logged and before the batch is committed."""
    deadline = time.monotonic() + 600
    while not (checkpoint / "offsets" / "0").exists():
        if job.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"demo: FAILED: the streaming job ended ({job.returncode}) before its first micro-batch")
        time.sleep(0.01)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()


def run(root: Location) -> None:
    uri = root.uri
    created = AdminClient({"lakelog.root": uri}).create_topics([NewTopic(t, count) for t, count in PARTITIONS.items()])
    for future in created.values():
        future.result()
    writer = Producer({"lakelog.root": uri, "transactional.id": "events-writer"})
    writer.init_transactions()
    transaction(writer, 0, 300, "commit")
    transaction(writer, 300, 100, "abort")
    late = Producer({"lakelog.root": uri, "transactional.id": "events-late"})
    late.init_transactions()
    late.begin_transaction()
    for index in range(400, 430):
        late.produce(SOURCE, value=f"late-{index}", key=f"k{index}", partition=0)
    late.flush()
    transaction(writer, 500, 300, "commit")
    print(f"{SOURCE}: 600 records committed, 100 aborted, 30 in a transaction still open")

    checkpoint = Path(tempfile.mkdtemp(prefix="lakelog-demo-stream-")) / "checkpoint"
    kill_mid_batch(start_job(uri, checkpoint, idle_seconds=600), checkpoint)
    done = (checkpoint / "commits" / "0").exists()
    print(f"streaming job SIGKILLed in its first micro-batch (batch 0 {'committed' if done else 'not committed'})")
    late.commit_transaction()
    late.close()
    writer.close()
    restarted = start_job(uri, checkpoint, idle_seconds=2)
    out, err = restarted.communicate(timeout=900)
    if restarted.returncode != 0:
        raise SystemExit(f"demo: FAILED: the restarted streaming job ended with {restarted.returncode}:\n{err[-3000:]}")
    print(f"streaming job restarted from its checkpoint: {out.strip()}")

    inputs = {f"{SOURCE}:{m.partition()}:{m.offset()}": m for m in committed(uri, SOURCE)}
    outputs = committed(uri, DEST)
    sources = [dict(m.headers())[SOURCE_HEADER].decode() for m in outputs]
    if Counter(sources) != Counter(list(inputs)) or any(
        inputs[s].value().upper() != m.value() for s, m in zip(sources, outputs, strict=True)
    ):
        raise SystemExit(f"demo: FAILED: {DEST} does not hold each committed record of {SOURCE} once")
    print(f"verified: {DEST} holds each of the {len(inputs)} committed records of {SOURCE} once, none aborted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    run(open_root(parser.parse_args().root))


if __name__ == "__main__":
    main()
