"""The storage rounds, in-process clients on one topic, recorded: idempotent sends and read_committed
polls, a step at a time, while the store takes damage between operations.

- `run_storage_workload`: a partition per fault kind of the storage nemesis (tests/chaos/nemesis.py)
  damaged halfway, the producer started again after it.
- `run_power_loss_workload`: the same steps in a child process whose writes are journaled
  (tests/chaos/power_loss.py); it is SIGKILLed at a random point, the power goes out (what it never
  synced is dropped or cut), and the store is opened again.

Every error a client meets is recorded (`error` ops); at the end a new producer sends to every
partition and a new reader per partition reads it from the start to its end: what a restarted
application builds on and reads back. `python -m chaos.storage ROOT HISTORY_DIR PARTITIONS STEPS
RECORDS` runs the steps alone (the power-loss round's child).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from chaos.client import TESTS_DIR, RecordingConsumer, RecordingProducer, record_error, worker_environment
from chaos.history import INFO, OK, HistoryWriter, key_of
from chaos.nemesis import STORAGE_FAULTS, StorageFault, StorageNemesis
from lakelog import OFFSET_BEGINNING, TopicPartition
from lakelog.log import create_topic

STORAGE_TOPIC = "damaged"
POWER_TOPIC = "powered"
DRAIN_TIMEOUT_S = 60
# A damaged partition may fail every call: bound each so a round ends (an error retried forever shows as a
# timed-out delivery or a reader that never gets past the damage, both recorded).
SENDER_CONF = {"linger.ms": 600_000, "message.timeout.ms": 1000}


def run_storage_workload(
    root: str,
    history_dir: str,
    rng: random.Random,
    kinds: list[str] | None = None,
    steps: tuple[int, int] = (3, 2),
    records: int = 3,
) -> list[StorageFault]:
    """The storage-fault round on `root` (creates its topic): `steps[0]` steps of sends and polls, then partition i
    takes fault kinds[i] (default: every kind of STORAGE_FAULTS, shuffled), the producer starts again, and `steps[1]`
    steps more; then a new producer and a new reader per partition. Returns the faults injected.

    Few enough commits that no checkpoint is written before the end: a checkpoint made from a writer's snapshot
    in memory covers a damaged commit, and the damage would never be read.
    """
    kinds = rng.sample(sorted(STORAGE_FAULTS), len(STORAGE_FAULTS)) if kinds is None else kinds
    create_topic(root, STORAGE_TOPIC, len(kinds), None)
    nemesis = StorageNemesis(root, STORAGE_TOPIC, rng, HistoryWriter(history_dir, "nemesis"))
    sender = Sender(root, STORAGE_TOPIC, HistoryWriter(history_dir, "producer"))
    readers = [PartitionReader(root, STORAGE_TOPIC, p, HistoryWriter(history_dir, f"reader-{p}")) for p in range(len(kinds))]
    for step in range(sum(steps)):
        if step == steps[0]:
            for partition, kind in enumerate(kinds):
                nemesis.strike(kind, partition)
            # The producer starts again after the damage (as after the crash that left it): it opens the logs
            # cold, and builds on whatever it believes; the readers go on with what they hold.
            sender.restart()
        run_step(sender, readers, step, records)
    for reader in readers:
        reader.close()
    reopen(root, STORAGE_TOPIC, len(kinds), history_dir, records)
    return nemesis.injected


def run_power_loss_workload(
    root: str, history_dir: str, rng: random.Random, journal_dir: str, partitions: int = 2, steps: int = 4, records: int = 3
) -> StorageFault:
    """The power-loss round on `root` (creates its topic; `journal_dir` a new folder beside it): a journaled child
    runs `steps` steps, is SIGKILLed soon after a random number of its sends, the power goes out, and a new producer
    and new readers open the store. Returns the fault (its key None: the whole root)."""
    from chaos import power_loss  # tests/chaos/power_loss.py: the simulated power loss, Linux only

    create_topic(root, POWER_TOPIC, partitions, None)
    journal = power_loss.start(root, journal_dir)
    child = subprocess.Popen(
        [sys.executable, "-m", "chaos.storage", root, history_dir, str(partitions), str(steps), str(records)],
        stdout=subprocess.DEVNULL,
        env=power_loss.environment(journal, worker_environment()),
        cwd=TESTS_DIR,  # `-m` puts the working folder first on the path: tests/ holds no other lakelog
    )
    kill_after = rng.randint(1, steps * partitions)
    sends = Path(history_dir) / "producer.jsonl"
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    try:
        while child.poll() is None and time.monotonic() < deadline:
            if sends.exists() and sends.read_text().count('"f":"send"') >= kill_after:
                time.sleep(rng.uniform(0.0, 0.05))  # between operations or in the middle of the next one
                break
            time.sleep(0.01)
    finally:
        child.kill()  # every client process dies with the machine
        child.wait()
    report = power_loss.lose_power(journal)
    detail = (
        f"after {kill_after} sends: {len(report.dropped)} names dropped, {len(report.truncated)} files cut, "
        f"{len(report.restored)} put back, {len(report.unrestorable)} gone"
    )
    fault = StorageFault("power-loss", None, "", detail)
    HistoryWriter(history_dir, "nemesis")(INFO, "fault", {"kind": fault.kind, "key": None, "file": "", "detail": detail})
    reopen(root, POWER_TOPIC, partitions, history_dir, records)
    return fault


def run_step(sender: Sender, readers: list[PartitionReader], step: int, records: int) -> None:
    """Send `records` values to each reader's partition, then let every reader read to its end."""
    for reader in readers:
        sender.send(reader.partition, [f"s{step}-p{reader.partition}-{i}" for i in range(records)])
    for reader in readers:
        reader.read()


def reopen(root: str, topic: str, partitions: int, history_dir: str, records: int) -> None:
    """A new producer sends to every partition, then a new reader per partition reads it from its start."""
    after = Sender(root, topic, HistoryWriter(history_dir, "producer-after"))
    for p in range(partitions):
        after.send(p, [f"after-p{p}-{i}" for i in range(records)])
    for p in range(partitions):
        final = PartitionReader(root, topic, p, HistoryWriter(history_dir, f"reader-final-{p}"))
        final.read()
        final.close()


class Sender:
    """Idempotent sends to one partition at a time, every failure recorded; a producer that failed is replaced."""

    def __init__(self, root: str, topic: str, history: HistoryWriter) -> None:
        self.conf = {"lakelog.root": root, **SENDER_CONF}
        self.topic = topic
        self.history = history
        self.producer: RecordingProducer | None = None

    def restart(self) -> None:
        self.producer = None

    def send(self, partition: int, values: list[str]) -> None:
        try:
            if self.producer is None:
                self.producer = RecordingProducer(self.conf, self.history)
            failed = []
            for value in values:
                self.producer.produce(self.topic, value.encode(), partition=partition, on_delivery=lambda e, m: failed.append(e))
            self.producer.flush(10)
            if any(error is not None for error in failed):
                self.restart()
        except Exception as error:  # any failure is the history's to judge, a raw one included
            record_error(self.history, key_of(self.topic, partition), "send", error)
            self.restart()


class PartitionReader:
    """A read_committed reader of one partition from its start: each read polls to the end it sees, every failure
    recorded (a reader that failed stays where it was)."""

    def __init__(self, root: str, topic: str, partition: int, history: HistoryWriter) -> None:
        self.topic = topic
        self.partition = partition
        self.history = history
        self.consumer = RecordingConsumer({"lakelog.root": root, "enable.partition.eof": True}, history)
        self.assigned = False

    def read(self) -> None:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        try:
            if not self.assigned:
                self.consumer.assign([TopicPartition(self.topic, self.partition, OFFSET_BEGINNING)])
                self.assigned = True
            while time.monotonic() < deadline:
                # Every write has returned before a read: a short wait finds all there is.
                messages = self.consumer.consume(1000, 0.05)
                if not messages or all(message.error() is not None for message in messages):
                    return
        except Exception as error:  # any failure is the history's to judge, a raw one included
            record_error(self.history, key_of(self.topic, self.partition), "poll", error)

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception as error:  # any failure is the history's to judge, a raw one included
            record_error(self.history, key_of(self.topic, self.partition), "close", error)


def child_main(argv: list[str]) -> int:
    """The steps alone, on POWER_TOPIC (argv: root, history dir, partitions, steps, records), then wait to be killed."""
    root, history_dir, partitions, steps, records = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    sender = Sender(root, POWER_TOPIC, HistoryWriter(history_dir, "producer"))
    readers = [PartitionReader(root, POWER_TOPIC, p, HistoryWriter(history_dir, f"reader-{p}")) for p in range(partitions)]
    for step in range(steps):
        run_step(sender, readers, step, records)
    HistoryWriter(history_dir, "child")(OK, "done")
    time.sleep(DRAIN_TIMEOUT_S)  # the power loss comes with a SIGKILL
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
