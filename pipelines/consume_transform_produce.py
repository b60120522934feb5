"""Exactly-once consume-transform-produce (S7.4, KIP-447): N worker processes in one consumer group.

Each worker is a group member (read_committed, no auto-commit) with its own
transactional Producer. Per batch: poll, begin, produce the transformed records
(value upper-cased, key kept, a `lakelog.source` header naming the input
topic:partition:offset), `send_offsets_to_transaction(positions,
consumer.consumer_group_metadata())`, commit. Output rows and input offsets
commit in one transaction, so each input record is in the output once.

What fences a zombie: the group metadata (S7.2). A worker that stalls past its
session is removed from the group; when it wakes, its offsets are refused
(UnknownMemberId / IllegalGeneration), so it aborts, and its output never shows.
transactional.id is `<group>-ctp-<slot>`: one per worker slot, so a restarted
slot's `init_transactions()` fences its dead predecessor and aborts that
predecessor's open transaction at once (S4.2) instead of after
`transaction.timeout.ms`; correctness does not depend on it (any id would do,
KIP-447's point), only recovery time does.

On an abortable error the worker aborts and rewinds every assigned partition to
the group's committed offset (a stable fetch, S7.3); on a fatal one it exits,
and the supervisor starts the slot again.

Run: `python -m pipelines.consume_transform_produce --root R --input T --output U --group G --workers N`
(stops once the group's committed offsets reach the input's end; `--follow` keeps going).
From Python: `run(Job(root, "in", "out", "g"), workers=3)` or `run_worker(job, slot, stop)`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakelog import OFFSET_STORED, Consumer, KafkaException, Message, Producer, TopicPartition
from lakelog.admin import IsolationLevel
from lakelog.client.retry import RetryPolicy
from lakelog.client.roots import open_root, partition_count
from lakelog.errors import (
    FencedInstanceId,
    IllegalGeneration,
    InvalidRequest,
    KafkaTimeout,
    ProducerFenced,
    UnknownMemberId,
)
from lakelog.jobs.maintenance import Sweeper

from .topic_positions import committed_offsets, ensure_output, latest_offsets, records_behind

logger = logging.getLogger(__name__)
# The supervisor says how far the group is behind at most this often, and only when it moved.
PROGRESS_EVERY_S = 5.0

SOURCE_HEADER = "lakelog.source"
# Errors that say "you are a zombie": counted as fencings in the events.
FENCING_ERRORS = (IllegalGeneration, UnknownMemberId, ProducerFenced, FencedInstanceId)
# A worker exits with this status after a fatal error; the supervisor restarts its slot.
EXIT_FATAL = 3
# How often a retriable end of transaction is tried again before the transaction is aborted.
END_RETRIES = 5


@dataclass(frozen=True)
class Job:
    """What to read, what to write, as which group, and the clients' timing."""

    root: str
    input_topic: str
    output_topic: str
    group_id: str
    batch_records: int = 2000
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 500
    # KIP-447 recommends a transaction timeout as short as the session timeout.
    transaction_timeout_ms: int = 10_000
    poll_timeout_s: float = 0.5
    # Where each worker appends its events as JSON lines (`<dir>/slot-<n>.jsonl`); None: nowhere.
    events_dir: str | None = None

    @property
    def transactional_id_prefix(self) -> str:
        return f"{self.group_id}-ctp"


@dataclass
class WorkerReport:
    """What one worker did."""

    slot: int
    transactions: int = 0
    records: int = 0
    aborts: int = 0
    fencings: int = 0
    lost: int = 0


def transform(value: bytes | None) -> bytes | None:
    """The transformation: upper-case the value."""
    return None if value is None else value.upper()


def source_of(message: Message) -> bytes:
    return f"{message.topic()}:{message.partition()}:{message.offset()}".encode()


def check_job(job: Job) -> tuple[int, int]:
    """Input and output exist (UnknownTopicOrPartition otherwise) and are not the same; their partition counts."""
    open_root(job.root)
    if job.input_topic == job.output_topic:
        raise InvalidRequest(f"input and output are both {job.input_topic!r}: a job must not read what it writes")
    for name, value in (
        ("batch_records", job.batch_records),
        ("session_timeout_ms", job.session_timeout_ms),
        ("heartbeat_interval_ms", job.heartbeat_interval_ms),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidRequest(f"{name} must be a positive integer, not {value!r}")
    return partition_count(job.root, job.input_topic), partition_count(job.root, job.output_topic)


# -- one worker ---------------------------------------------------------------------------


class _Events:
    def __init__(self, job: Job, slot: int) -> None:
        self._path = None if job.events_dir is None else Path(job.events_dir) / f"slot-{slot}.jsonl"
        self._slot = slot

    def __call__(self, event: str, **details: Any) -> None:
        if self._path is None:
            return
        line = json.dumps({"event": event, "slot": self._slot, "pid": os.getpid(), "time": time.time(), **details})
        with open(self._path, "a") as out:
            out.write(line + "\n")


def run_worker(job: Job, slot: int, stop: Callable[[], bool] = lambda: False) -> WorkerReport:
    """Run one worker until `stop()` is true; raises the fatal error that ends it early (ProducerFenced, ...)."""
    _, output_partitions = check_job(job)
    report = WorkerReport(slot)
    event = _Events(job, slot)
    # The offset each partition's last committed transaction recorded (to send positions that moved past markers).
    sent: dict[tuple[str, int], int] = {}

    def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        event("assigned", partitions=[p.partition for p in partitions])

    def on_revoke(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for p in partitions:
            sent.pop((p.topic, p.partition), None)
        event("revoked", partitions=[p.partition for p in partitions])

    def on_lost(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        sent.clear()
        report.lost += 1
        event("lost", partitions=[p.partition for p in partitions])

    consumer = Consumer(
        {
            "lakelog.root": job.root,
            "group.id": job.group_id,
            "client.id": f"ctp-{slot}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "max.poll.records": job.batch_records,
            "session.timeout.ms": job.session_timeout_ms,
            "heartbeat.interval.ms": job.heartbeat_interval_ms,
        }
    )
    producer = Producer(
        {
            "lakelog.root": job.root,
            "client.id": f"ctp-{slot}",
            "transactional.id": f"{job.transactional_id_prefix}-{slot}",
            "transaction.timeout.ms": job.transaction_timeout_ms,
            "linger.ms": 600_000,
            "batch.num.messages": 1_000_000,
            "batch.size": 1 << 30,
        }
    )
    try:
        producer.init_transactions()
        event("started")
        consumer.subscribe([job.input_topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        while not stop():
            messages = [m for m in consumer.consume(job.batch_records, job.poll_timeout_s) if m.error() is None]
            offsets = _offsets_to_send(consumer, messages, sent)
            if not offsets:
                continue
            try:
                producer.begin_transaction()
                event("began", records=len(messages))
                for message in messages:
                    producer.produce(
                        job.output_topic,
                        value=transform(message.value()),
                        key=message.key(),
                        partition=message.partition() % output_partitions,
                        headers=[(SOURCE_HEADER, source_of(message))],
                    )
                # The output is written (in the transaction) before the offsets go, as KIP-447's example does.
                producer.flush()
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
                _commit(producer)
            except KafkaException as error:
                if error.args[0].fatal():
                    event("fatal", error=type(error).__name__, reason=str(error))
                    raise
                report.aborts += 1
                fenced = isinstance(error, FENCING_ERRORS)
                report.fencings += fenced
                event("aborted", error=type(error).__name__, fenced=fenced, records=len(messages))
                try:
                    producer.abort_transaction()
                except KafkaException as abort_error:
                    # The sweep aborted the transaction already and bumped the epoch: this producer is fenced.
                    event("fatal", error=type(abort_error).__name__, reason=str(abort_error))
                    raise
                # Back to what the group committed (stable: waits out a pending transaction, S7.3).
                sent.clear()
                for partition in consumer.assignment():
                    consumer.seek(TopicPartition(partition.topic, partition.partition, OFFSET_STORED))
                continue
            for partition in offsets:
                sent[(partition.topic, partition.partition)] = partition.offset
            report.transactions += 1
            report.records += len(messages)
            event("committed", records=len(messages), offsets={p.partition: p.offset for p in offsets})
    finally:
        consumer.close()
    event("stopped", **dataclasses.asdict(report))
    return report


def _offsets_to_send(consumer: Consumer, messages: list[Message], sent: dict[tuple[str, int], int]) -> list[TopicPartition]:
    """Positions of the partitions this batch read from, and of those whose position moved past markers."""
    read = {(m.topic(), m.partition()) for m in messages}
    offsets = []
    for partition in consumer.position(consumer.assignment()):
        key = (partition.topic, partition.partition)
        if partition.offset < 0:
            continue
        if key in read or (key in sent and partition.offset > sent[key]):
            offsets.append(partition)
    return offsets


def _commit(producer: Producer) -> None:
    """Commit, retrying a retriable failure after the producer's own backoff (retry.backoff.ms, .max.ms)."""
    backoff = RetryPolicy.from_config(producer.config).start(None)
    for attempt in range(END_RETRIES):
        try:
            producer.commit_transaction()
            return
        except KafkaException as error:
            if not error.args[0].retriable():
                raise
            if attempt == END_RETRIES - 1:
                logger.warning("commit failed %d times, the last with %s; giving up: %s", END_RETRIES, error.error.name(), error)
                raise
            logger.warning("commit failed with %s, trying again: %s", error.error.name(), error)
            backoff.wait()


# -- the supervisor -------------------------------------------------------------------------


@dataclass
class RunReport:
    """What a supervised run did."""

    workers: int
    restarts: int = 0
    sweeps: int = 0
    members_expired: int = 0
    transactions_aborted_by_sweep: int = 0
    seconds: float = 0.0
    exit_codes: list[int] = field(default_factory=list)


def worker_command(job: Job, slot: int) -> list[str]:
    """The command line of one worker process."""
    command = [
        sys.executable,
        "-m",
        f"{__package__ or 'lakelog.pipelines'}.consume_transform_produce",  # the package this copy was imported from
        "--root",
        job.root,
        "--input",
        job.input_topic,
        "--output",
        job.output_topic,
        "--group",
        job.group_id,
        "--worker",
        str(slot),
        "--batch-records",
        str(job.batch_records),
        "--session-timeout-ms",
        str(job.session_timeout_ms),
        "--heartbeat-interval-ms",
        str(job.heartbeat_interval_ms),
        "--transaction-timeout-ms",
        str(job.transaction_timeout_ms),
    ]
    if job.events_dir is not None:
        command += ["--events-dir", job.events_dir]
    return command


def start_worker(job: Job, slot: int) -> subprocess.Popen:
    return subprocess.Popen(worker_command(job, slot), stdout=subprocess.DEVNULL)


class Supervisor:
    """Runs a job's worker processes: starts them, restarts slots whose process ended, runs the combined
    coordinator sweep (S8.2), tells when the group has caught up, stops them."""

    def __init__(self, job: Job, workers: int) -> None:
        check_job(job)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise InvalidRequest(f"workers must be a positive integer, not {workers!r}")
        self.job = job
        self.report = RunReport(workers)
        self.processes: dict[int, subprocess.Popen] = {}
        # Kept across sweeps: each coordinator replays its log from where it last read.
        self._sweeper = Sweeper(job.root)

    def start(self, slot: int) -> None:
        self.processes[slot] = start_worker(self.job, slot)

    def start_all(self) -> None:
        for slot in range(self.report.workers):
            self.start(slot)

    def sweep(self) -> tuple[int, int]:
        """Abort timed-out transactions, then remove members past their session; (aborted, removed)."""
        aborted = len(self._sweeper.transactions().aborted_timed_out)
        removed = len(self._sweeper.groups())
        self.report.sweeps += 1
        self.report.transactions_aborted_by_sweep += aborted
        self.report.members_expired += removed
        return aborted, removed

    def restart_exited(self, skip: Iterable[int] = ()) -> list[int]:
        """Start again every slot (but `skip`) whose process ended (a worker exits after a fatal error)."""
        restarted = []
        skipped = set(skip)
        for slot, process in list(self.processes.items()):
            if slot not in skipped and process.poll() is not None:
                self.report.exit_codes.append(process.returncode)
                self.report.restarts += 1
                self.start(slot)
                restarted.append(slot)
        return restarted

    def committed(self) -> dict[int, int | None] | None:
        """The group's committed offsets of the input (None for none), or None while a transaction holds one."""
        return committed_offsets(self.job.root, self.job.group_id, self.job.input_topic)

    def behind(self) -> dict[int, int] | None:
        """Records of each input partition the group has still to commit (`records_behind`)."""
        return records_behind(self.job.root, self.job.group_id, self.job.input_topic)

    def caught_up(self) -> bool:
        """The group has committed every input partition up to its end (its LSO)."""
        return self.behind() == {}

    def settle_output(self) -> None:
        """Sweep until no transaction is open in the output (every partition's LSO at its HW).

        A worker that died mid-transaction holds the output's LSO, and every row committed after its
        first one, until its restarted slot or the sweep aborts that transaction (S4.7, S5.1): readers
        of the whole output wait for that, at most the transaction timeout.
        """
        deadline = time.monotonic() + self.job.transaction_timeout_ms / 1000 + 30
        while latest_offsets(self.job.root, self.job.output_topic, IsolationLevel.READ_COMMITTED) != latest_offsets(
            self.job.root, self.job.output_topic, IsolationLevel.READ_UNCOMMITTED
        ):
            if time.monotonic() > deadline:
                raise KafkaTimeout(f"{self.job.output_topic}: a transaction stayed open past its timeout")
            self.sweep()
            time.sleep(0.5)

    def stop(self, timeout_s: float = 30.0) -> list[int]:
        """SIGTERM (a worker finishes its batch and leaves the group), then SIGKILL whatever is left."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.terminate()
        deadline = time.monotonic() + timeout_s
        codes = []
        for process in self.processes.values():
            try:
                codes.append(process.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                process.kill()
                codes.append(process.wait())
        return codes


def run(job: Job, workers: int, follow: bool = False, sweep_interval_s: float = 1.0, timeout_s: float | None = None) -> RunReport:
    """Run `workers` worker processes, sweep, restart slots that end; stop once caught up (unless `follow`)."""
    if job.input_topic != job.output_topic:
        ensure_output(job.root, job.input_topic, job.output_topic)
    supervisor = Supervisor(job, workers)
    started = time.monotonic()
    supervisor.start_all()
    said: tuple[float, dict[int, int] | None] = (started, None)
    try:
        while True:
            time.sleep(sweep_interval_s)
            supervisor.sweep()
            supervisor.restart_exited()
            if not follow:
                behind = supervisor.behind()
                if behind == {}:
                    logger.info("group %s has committed all of %s; stopping", job.group_id, job.input_topic)
                    break
                if behind is not None and behind != said[1] and time.monotonic() - said[0] >= PROGRESS_EVERY_S:
                    logger.info(
                        "group %s: %d records of %s to go (%s)",
                        job.group_id,
                        sum(behind.values()),
                        job.input_topic,
                        ", ".join(f"partition {p}: {n}" for p, n in sorted(behind.items())),
                    )
                    said = (time.monotonic(), behind)
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise TimeoutError(f"the job did not catch up within {timeout_s:g} s")
    finally:
        supervisor.stop()
        supervisor.report.seconds = time.monotonic() - started
    return supervisor.report


# -- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--follow", action="store_true", help="keep running after the input is consumed")
    parser.add_argument("--worker", type=int, metavar="SLOT", help="run one worker in this process (what --workers starts)")
    parser.add_argument("--batch-records", type=int, default=Job.batch_records)
    parser.add_argument("--session-timeout-ms", type=int, default=Job.session_timeout_ms)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=Job.heartbeat_interval_ms)
    parser.add_argument("--transaction-timeout-ms", type=int, default=Job.transaction_timeout_ms)
    parser.add_argument("--events-dir", help="append each worker's events as JSON lines here")
    args = parser.parse_args(argv)
    # The supervisor says what it does (progress, the output created, the stop); its workers only what goes wrong.
    logging.basicConfig(
        level=logging.INFO if args.worker is None else logging.WARNING,
        format="consume_transform_produce: %(levelname)s %(message)s",
    )
    job = Job(
        args.root,
        args.input,
        args.output,
        args.group,
        batch_records=args.batch_records,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        transaction_timeout_ms=args.transaction_timeout_ms,
        events_dir=args.events_dir,
    )
    try:
        if args.worker is None:
            print(json.dumps(dataclasses.asdict(run(job, args.workers, follow=args.follow))))
            return 0
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        try:
            print(json.dumps(dataclasses.asdict(run_worker(job, args.worker, stop=lambda: bool(stopping)))))
        except KeyboardInterrupt:
            return 0
    except KafkaException as error:
        print(f"consume_transform_produce: {error.args[0].name()}: {error}", file=sys.stderr)
        return EXIT_FATAL if error.args[0].fatal() else 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
