"""A program written for confluent-kafka's classic protocol, SIGKILLed mid-transaction and restarted with no sweep
running, delivers each record once (S7.4): the restarted member's heartbeats expire the dead one past its
session.timeout.ms (S6.5) and its read_committed offset fetch aborts the dead transaction past its
transaction.timeout.ms, fencing it with an epoch bump (S4.7), as Kafka's broker timers would."""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import topic_rows

from lakelog import Producer
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.coordinator.transaction.state import TxnState

pytestmark = [pytest.mark.slow, pytest.mark.roots("local")]

TESTS = Path(__file__).resolve().parents[1]
RECORDS = 40


class App:
    """processes.classic_app as a real process; its JSON lines read on a thread."""

    def __init__(self, *arguments: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "processes.classic_app", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def until(self, event: str, timeout: float = 90.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.process.kill()
                raise AssertionError(f"no {event!r}: {self.process.stderr.read()}") from None
            if line["event"] == event:
                return line


def test_S7_4_classic_program_killed_mid_transaction_and_restarted_without_a_sweep_delivers_once(root, topic, tmp_path):
    source, output = topic(name="in", partitions=2), topic(name="out", partitions=2)
    producer = Producer({"lakelog.root": root})
    for n in range(RECORDS):
        producer.produce(source, value=f"r{n}", partition=n % 2)
    producer.flush()
    stop = str(tmp_path / "stop")

    first = App(root, "classic-etl", source, output, stop, "2")
    first.until("hanging")  # two transactions committed, the third holds offsets and output rows
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(30)
    open_before = [m for m in TransactionCoordinator(root).list_transactions() if m.state is TxnState.ONGOING]
    assert len(open_before) == 1

    second = App(root, "classic-etl", source, output, stop)
    try:
        deadline = time.monotonic() + 45
        while len(topic_rows(root, output)) < RECORDS:
            assert time.monotonic() < deadline, f"{len(topic_rows(root, output))} of {RECORDS} delivered"
            assert second.process.poll() is None, second.process.stderr.read()
            time.sleep(0.5)
        Path(stop).touch()
        second.until("stopped")
        assert second.process.wait(30) == 0
    finally:
        if second.process.poll() is None:
            second.process.kill()
    rows = topic_rows(root, output)
    sources = collections.Counter(row["headers"][0]["value"] for row in rows)
    assert len(sources) == RECORDS and set(sources.values()) == {1}, sources
    # The dead transaction was aborted by the restarted program, not left open (no sweep ran).
    dead = TransactionCoordinator(root).describe(open_before[0].transactional_id)
    assert dead.state is TxnState.COMPLETE_ABORT
