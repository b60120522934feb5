"""The nemesis of a chaos run: SIGKILLs worker processes (their slot starts again later), pauses
them with SIGSTOP/SIGCONT, some inside a transaction and past their session timeout so that they
wake as zombies (S7.2), and heals everything at the end; and damages a partition's files between
operations (StorageNemesis: emptied, deleted and torn commits, flipped, copied and torn data files)."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from chaos.history import INFO, HistoryWriter, key_of
from lakelog.log.partition_file import partition_files
from lakelog.log.topics import partition_path
from lakelog.store import Location, Table
from lakelog.store.delta.log import DELTA_LOG, DeltaLog, commit_name
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


# -- storage faults ------------------------------------------------------------------------------

# What a user's store can do to a partition's files between two operations (what a crash, a power loss,
# a bad disk or an operator's copy leaves): each a kind of StorageNemesis.strike.
STORAGE_FAULTS = {
    "empty-commit": "a commit file emptied (a link of an unsynced file after a power loss)",
    "hole": "a commit file deleted while a later one is kept",
    "flip-byte": "one byte of an active data file changed",
    "copy-over": "an active data file's bytes copied over another active data file's",
    "torn-commit": "a commit file truncated mid-way",
    "torn-data": "an active data file truncated mid-way",
}


@dataclass(frozen=True)
class StorageFault:
    """One injected fault: its kind, the partition's key and the file (relative to the partition's table)."""

    kind: str
    key: str | None  # None: the whole root (a power loss)
    file: str
    detail: str


class StorageNemesis:
    """Damages the files of one topic's partitions, through the root's FileIO (a local root or S3 alike).

    A target is a file a user's data lives in: a commit file the latest checkpoint does not cover
    (one a cold open still reads) or an active data file of the latest snapshot. Each fault is
    written to `history` as an `info` op `fault` (its value: kind, key, file, detail) right after the
    damage, so the checker can tell what each client saw after it.
    """

    def __init__(self, root: str, topic: str, rng: random.Random, history: HistoryWriter) -> None:
        self.root = Location.of(root)
        self.topic = topic
        self.rng = rng
        self.history = history
        self.injected: list[StorageFault] = []

    def table(self, partition: int) -> Location:
        return partition_path(self.root, self.topic, partition)

    def commit_files(self, partition: int) -> list[str]:
        """`_delta_log/<v>.json` of the versions after the latest checkpoint, oldest first (version 0 kept out:
        it creates the table and holds no record)."""
        log = DeltaLog(self.table(partition))
        checkpoint = log.latest_checkpoint()
        after = 0 if checkpoint is None else checkpoint[0]
        versions = sorted(int(name[: -len(".json")]) for name in log.names() if _is_commit(name))
        return [f"{DELTA_LOG}/{commit_name(v)}" for v in versions if v > after]

    def data_files(self, partition: int) -> list[str]:
        """The active data files of the partition's latest snapshot, by first offset."""
        return [entry.path for entry in partition_files(Table.open(self.table(partition)))]

    def strike(self, kind: str, partition: int) -> StorageFault | None:
        """Inject `kind` (a key of STORAGE_FAULTS) into `partition`; None if it has no file to take it."""
        table = self.table(partition)
        commits, data = self.commit_files(partition), self.data_files(partition)
        if kind in ("empty-commit", "torn-commit", "hole"):
            # A hole keeps a later commit; an emptied or torn commit is the latest, what a power loss or a crash
            # in the middle of a write leaves.
            candidates = commits[:-1] if kind == "hole" else commits[-1:]
            if not candidates:
                return None
            target = self.rng.choice(candidates)
        else:
            if len(data) < (2 if kind == "copy-over" else 1):
                return None
            target = self.rng.choice(data)
        uri = table.child(target).uri
        io = table.io
        if kind == "hole":
            io.delete(uri)
            detail = "deleted"
        elif kind == "empty-commit":
            io.write(uri, b"")
            detail = "emptied"
        elif kind == "copy-over":
            source = self.rng.choice([name for name in data if name != target])
            io.write(uri, io.read(table.child(source).uri))
            detail = f"bytes of {source}"
        else:
            body = io.read(uri)
            if kind == "flip-byte":
                # Inside the column chunks, where damage can pass for data: not the magic at either end nor the
                # footer (its length is the 4 bytes before the closing magic), whose damage fails every open.
                footer = int.from_bytes(body[-8:-4], "little")
                at = self.rng.randrange(4, max(5, len(body) - 8 - footer))
                io.write(uri, body[:at] + bytes([body[at] ^ 0xFF]) + body[at + 1 :])
                detail = f"byte {at} of {len(body)} flipped"
            else:
                keep = self.rng.randrange(1, len(body))
                io.write(uri, body[:keep])
                detail = f"truncated to {keep} of {len(body)} bytes"
        fault = StorageFault(kind, key_of(self.topic, partition), target, detail)
        self.injected.append(fault)
        self.history(INFO, "fault", {"kind": kind, "key": fault.key, "file": target, "detail": detail})
        return fault


def _is_commit(name: str) -> bool:
    """Whether a `_delta_log` file name is a commit's, `<v>.json` (not a checkpoint, a temporary or a mark)."""
    stem = name[: -len(".json")] if name.endswith(".json") else ""
    return stem.isdigit() and commit_name(int(stem)) == name
