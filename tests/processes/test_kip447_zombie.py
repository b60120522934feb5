"""KIP-447's edge cases, step by step with real processes (S6.5, S7.2, S7.3, S7.4).

From the KIP: "1. Client A tries to commit offsets for topic partition P1, but
haven't got the chance to do txn offset commit before a long GC. 2. Client A gets
out of sync and becomes a zombie due to session timeout, group rebalanced.
3. Another client B was assigned with P1. 4. Client B doesn't see pending offsets
because A hasn't committed anything, so it will proceed with potentially
`pending` input data. 5. Client A was back online, and continue trying to do txn
commit. Here if we have generation.id, we will catch it!"

A and B are separate processes (tests/processes/group_workers.py); A's "long GC"
is a SIGSTOP it sends itself right before `send_offsets_to_transaction`. Both run
on a local folder and on an S3 prefix of the session's emulator (S12.1): the
children get the root's URI and inherit the emulator's AWS_* settings.

No timeout is waited out: the sweeps run in the test process on a passed-in
clock set to the last millisecond of the stalled member's lease (or of its
transaction's timeout), where they must leave it, and then one millisecond on.
The children run on the wall clock with Kafka's default 45 s session, which the
test never sleeps through.
"""

from __future__ import annotations

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
from helpers import FakeClock

from lakelog import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import UnstableOffsetCommit
from lakelog.log import create_topic, open_partition

pytestmark = [pytest.mark.slow, pytest.mark.roots("local", "s3")]

TESTS = Path(__file__).resolve().parents[1]
GROUP = "etl"
RECORDS = 10
SESSION_MS = 45_000


def sweep_past_lease(root: str, member_id: str) -> list[tuple[str, str]]:
    """S6.5 on a passed-in clock: at the last millisecond of the (stopped) member's lease the sweep leaves it,
    one millisecond later it removes it; returns what that sweep removed."""
    lease_end = GroupCoordinator(root).describe(GROUP).members[member_id].metadata.lease_expires_ms
    clock = FakeClock(lease_end)
    sweeper = GroupCoordinator(root, clock=clock)
    assert sweeper.sweep() == []
    clock.advance(1)
    return sweeper.sweep()


def sweep_past_transaction_timeout(root: str, transactional_id: str) -> list[str]:
    """S4.7 on a passed-in clock: at the last millisecond of the transaction's timeout the sweep leaves it, one
    millisecond later it aborts it; returns the ids that sweep aborted."""
    metadata = TransactionCoordinator(root).describe(transactional_id)
    clock = FakeClock(metadata.txn_start_ms + metadata.transaction_timeout_ms)
    sweeper = TransactionCoordinator(root, clock=clock)
    assert sweeper.sweep().aborted_timed_out == []
    clock.advance(1)
    return sweeper.sweep().aborted_timed_out


class Child:
    """A worker process whose JSON stdout lines are read on a thread."""

    def __init__(self, *arguments: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "processes.group_workers", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.put(json.loads(line))

    def next(self, event: str, timeout: float = 90.0) -> dict:
        try:
            report = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.process.kill()
            raise AssertionError(f"no {event!r} from pid {self.process.pid}: {self.process.stderr.read()}") from None
        assert report["event"] == event, report
        return report

    def silent(self) -> bool:
        """Nothing reported since the last `next`."""
        return self._lines.empty()

    def wait_stopped(self, timeout: float = 30.0) -> None:
        """Until the process is in state T (stopped by SIGSTOP)."""
        deadline = time.monotonic() + timeout
        while Path(f"/proc/{self.process.pid}/stat").read_text().split(") ")[1][0] != "T":
            assert time.monotonic() < deadline, "the process never stopped"
            time.sleep(0.05)

    def finish(self, timeout: float = 60.0) -> int:
        code = self.process.wait(timeout)
        assert code == 0, self.process.stderr.read()
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()


def read_output(root: str, topic: str, isolation_level: str) -> list[tuple[int, bytes, bytes]]:
    """(offset, value, source header) of every data row of partition 0 a reader of this isolation level sees."""
    out = []
    with Consumer({"lakelog.root": root, "isolation.level": isolation_level, "enable.partition.eof": True}) as reader:
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while True:
            message = reader.poll(5.0)
            assert message is not None, "no partition EOF"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                return out
            out.append((message.offset(), message.value(), dict(message.headers())["lakelog.source"]))


def test_S7_2_kip447_zombie_stalled_before_its_offset_commit_is_fenced_and_the_new_owner_stands(root, tmp_path):
    create_topic(root, "in", 1, None)
    create_topic(root, "out", 1, None)
    producer = Producer({"lakelog.root": root, "linger.ms": 600_000})
    for n in range(RECORDS):
        producer.produce("in", f"record-{n}", partition=0)
    producer.flush()
    groups = GroupCoordinator(root)
    stop_file = tmp_path / "stop-b"
    a = b = None
    try:
        # 1. A owns in-0, reads the records, writes the output in its transaction, and stalls before
        #    sending its offsets.
        a = Child("stall-before-offsets", root, GROUP, "in", "out", str(RECORDS), str(SESSION_MS))
        polled = a.next("polled")
        assert polled["offsets"] == list(range(RECORDS))
        assert a.next("produced")["positions"] == {"0": RECORDS}
        a.wait_stopped()
        assert set(groups.describe(GROUP).members) == {polled["member_id"]}
        assert read_output(root, "out", "read_committed") == []  # A's transaction is open
        assert len(read_output(root, "out", "read_uncommitted")) == RECORDS

        # 2. A's session times out; the sweep removes it and the group rebalances.
        assert sweep_past_lease(root, polled["member_id"]) == [(GROUP, polled["member_id"])]
        assert groups.describe(GROUP).members == {}

        # 3-4. B joins, gets in-0, finds no pending offsets (A sent none), so it starts at the last committed
        #      offset (none: the beginning), and commits output and offsets in one transaction.
        b = Child("process", root, GROUP, "in", "out", str(RECORDS), str(SESSION_MS), str(stop_file))
        committed_b = b.next("committed")
        assert committed_b["offsets"] == list(range(RECORDS)) and committed_b["positions"] == {"0": RECORDS}
        assert committed_b["member_epoch"] > polled["member_epoch"]
        assert groups.fetch_offsets(GROUP, [("in", 0)], require_stable=True)[("in", 0)].offset == RECORDS
        # A's open transaction still holds the output's LSO, so B's rows are not visible yet.
        log = open_partition(root, "out", 0)
        assert (log.last_stable_offset(), log.high_watermark()) == (0, 2 * RECORDS + 1)

        # 5. A wakes and tries to commit its offsets: its group metadata is a removed member's. Fenced.
        a.process.send_signal(signal.SIGCONT)
        a.next("woke")
        fenced = a.next("fenced")
        assert fenced == {"event": "fenced", "error": "UnknownMemberId", "abortable": True}
        a.next("aborted")
        a.finish()
        # A's abort wrote its markers; Complete* is left to A's next transaction, an init or the sweep (S4.5).
        assert TransactionCoordinator(root).describe("kip447-a").state.value == "PrepareAbort"

        # B's offsets and output stand: every record once, from B; A's rows are aborted.
        stable = groups.fetch_offsets(GROUP, [("in", 0)], require_stable=True)[("in", 0)]
        assert stable.offset == RECORDS
        visible = read_output(root, "out", "read_committed")
        assert [value for _, value, _ in visible] == [f"RECORD-{n}".encode() for n in range(RECORDS)]
        assert [source for _, _, source in visible] == [f"in:0:{n}".encode() for n in range(RECORDS)]
        assert [offset for offset, _, _ in visible] == list(range(RECORDS, 2 * RECORDS))  # B's rows come after A's aborted ones
        [b_member] = groups.describe(GROUP).members.values()
        assert b_member.metadata.member_id == committed_b["member_id"] and b_member.current.assigned == {("in", 0)}

        stop_file.touch()
        b.next("left")
        b.finish()
    finally:
        for child in (a, b):
            if child is not None:
                child.kill()


@pytest.mark.parametrize("end", ["zombie-commits", "transaction-times-out"])
def test_S7_3_a_new_owner_waits_while_a_stalled_members_offsets_are_pending(root, tmp_path, end):
    """The other half of KIP-447: A sent its offsets and stalled before committing. B, the new owner,
    must not start from the old committed offset: its stable fetch is refused (UnstableOffsetCommit)
    and it backs off until A's transaction ends, by A's commit or by the sweep's abort at its timeout."""
    create_topic(root, "in", 1, None)
    create_topic(root, "out", 1, None)
    producer = Producer({"lakelog.root": root, "linger.ms": 600_000})
    for n in range(2 * RECORDS):
        producer.produce("in", f"record-{n}", partition=0)
    producer.flush()
    groups = GroupCoordinator(root)
    txn_timeout_ms = 600_000 if end == "zombie-commits" else 60_000
    stop_file = tmp_path / "stop-b"
    a = b = None
    try:
        a = Child("stall-after-offsets", root, GROUP, "in", "out", str(RECORDS), str(SESSION_MS), str(txn_timeout_ms))
        sent = a.next("sent")
        assert sent["positions"] == {"0": RECORDS}
        a.wait_stopped()
        assert sweep_past_lease(root, sent["member_id"]) == [(GROUP, sent["member_id"])]

        b = Child("process", root, GROUP, "in", "out", str(RECORDS), str(SESSION_MS), str(stop_file))
        deadline = time.monotonic() + 60
        while not any(m.current.assigned for m in groups.describe(GROUP).members.values()):
            assert time.monotonic() < deadline, "B got no partition"
            time.sleep(0.2)
        time.sleep(2.0)  # B owns in-0 but may not start: A's offsets are pending
        with pytest.raises(UnstableOffsetCommit):
            groups.fetch_offsets(GROUP, [("in", 0)], require_stable=True)
        assert groups.fetch_offsets(GROUP, [("in", 0)], require_stable=False)[("in", 0)] is None
        assert b.process.poll() is None and b.silent()  # B has not committed anything

        if end == "zombie-commits":
            # A's transaction is still alive: its commit stands (its offsets were valid when sent), and B
            # goes on from there.
            a.process.send_signal(signal.SIGCONT)
            a.next("woke")
            a.next("committed")
            expected_b_offsets = list(range(RECORDS, 2 * RECORDS))
        else:
            # A's transaction times out; the sweep aborts it (S4.7), its pending offsets vanish, B starts
            # from the old committed offset; A, woken, finds itself fenced.
            assert sweep_past_transaction_timeout(root, "kip447-a") == ["kip447-a"]
            expected_b_offsets = list(range(RECORDS))
        committed_b = b.next("committed")
        assert committed_b["offsets"] == expected_b_offsets
        if end == "transaction-times-out":
            a.process.send_signal(signal.SIGCONT)
            a.next("woke")
            assert a.next("fenced") == {"event": "fenced", "error": "ProducerFenced", "fatal": True}
        a.finish()
        stop_file.touch()
        b.next("left")
        b.finish()

        visible = [source for _, _, source in read_output(root, "out", "read_committed")]
        if end == "zombie-commits":
            assert visible == [f"in:0:{n}".encode() for n in range(2 * RECORDS)]  # A's ten, then B's ten
        else:
            assert visible == [f"in:0:{n}".encode() for n in range(RECORDS)]  # B's ten; A's are aborted
        final = groups.fetch_offsets(GROUP, [("in", 0)], require_stable=True)[("in", 0)].offset
        assert final == expected_b_offsets[-1] + 1
    finally:
        for child in (a, b):
            if child is not None:
                child.kill()
