"""The nemesis of a chaos run: SIGKILLs worker processes (their slot starts again later), pauses
them with SIGSTOP/SIGCONT, some inside a transaction and past their session timeout so that they
wake as zombies (S7.2), and heals everything at the end."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from pathlib import Path

from pipelines.consume_transform_produce import Supervisor


class Nemesis:
    """Kills and pauses workers at random; remembers what it did.

    A "zombie" pause stops a worker caught inside a transaction (its last event is
    "began") for longer than its session but shorter than its transaction timeout:
    the sweep removes it from the group, and when it wakes its offsets are refused
    (S7.2). Plain pauses are any length up to three sessions.
    """

    def __init__(
        self, supervisor: Supervisor, rng: random.Random, events_dir: Path, session_timeout_ms: int, transaction_timeout_ms: int
    ) -> None:
        self.supervisor = supervisor
        self.session_timeout_ms = session_timeout_ms
        self.transaction_timeout_ms = transaction_timeout_ms
        self.rng = rng
        self.events_dir = events_dir
        self.counts: Counter = Counter()
        self.paused: dict[int, float] = {}  # slot -> when to SIGCONT
        self.dead: dict[int, float] = {}  # slot -> when to start again
        # The first faults are a kill and a zombie pause, in random order; then any.
        self.plan = rng.sample(["kill", "zombie"], 2)

    @property
    def faults(self) -> int:
        return self.counts["kills"] + self.counts["pauses"]

    def running(self) -> list[int]:
        return sorted(slot for slot in self.supervisor.processes if slot not in self.paused and slot not in self.dead)

    def in_transaction(self, slots: list[int]) -> list[int]:
        found = []
        for slot in slots:
            path = self.events_dir / f"slot-{slot}.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            if lines and json.loads(lines[-1])["event"] == "began":
                found.append(slot)
        return found

    def strike(self) -> None:
        running = self.running()
        if len(running) < 2:
            return  # keep one worker making progress
        action = self.plan[0] if self.plan else self.rng.choice(["kill", "pause", "zombie", "nothing", "nothing"])
        if action == "zombie":
            in_transaction = self.in_transaction(running)
            if in_transaction:
                running = in_transaction
            elif "kill" in self.plan:
                # No worker is inside a transaction this round: strike the planned kill now and keep the zombie for a
                # later round, so a job that catches up within a few rounds (commits are fast) still sees a fault.
                action = "kill"
            else:
                return  # try again next round
        if self.plan:
            self.plan.remove(action)
        slot = self.rng.choice(running)
        process = self.supervisor.processes[slot]
        if action == "kill":
            process.send_signal(signal.SIGKILL)
            process.wait()
            self.counts["kills"] += 1
            self.dead[slot] = time.monotonic() + self.rng.uniform(0.0, 2.0)
        elif action in ("pause", "zombie"):
            session_s = self.session_timeout_ms / 1000
            if action == "zombie":
                length = self.rng.uniform(session_s + 1.5, self.transaction_timeout_ms / 1000 - 1.5)
            else:
                length = self.rng.uniform(0.3, 3 * session_s)
            process.send_signal(signal.SIGSTOP)
            self.counts["pauses"] += 1
            self.counts["zombie pauses"] += action == "zombie"
            self.counts["pauses past the session timeout"] += length > session_s
            self.paused[slot] = time.monotonic() + length

    def heal(self, everything: bool = False) -> None:
        now = time.monotonic()
        for slot, at in list(self.paused.items()):
            if everything or at <= now:
                self.supervisor.processes[slot].send_signal(signal.SIGCONT)
                del self.paused[slot]
        for slot, at in list(self.dead.items()):
            if everything or at <= now:
                self.supervisor.start(slot)
                del self.dead[slot]
