"""The exactly-once consume-transform-produce job (pipelines.consume_transform_produce, S7.4) under
chaos, recorded: the generator writes the input, recorded worker processes (chaos.client) run the
job while the nemesis kills and pauses them and this process runs the coordinator sweep, and a
read_committed reader reads the output at the end. Everything each client did is in the history.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from chaos.client import ChaosSupervisor, RecordingConsumer
from chaos.generator import generate_input
from chaos.history import HistoryWriter, Op, read_history
from chaos.nemesis import Nemesis
from lakelog import OFFSET_BEGINNING, KafkaError, Message, TopicPartition
from lakelog.log import create_topic
from pipelines.consume_transform_produce import Job, RunReport
from pipelines.topic_positions import end_offsets

INPUT, OUTPUT, GROUP = "in", "out", "chaos"


@dataclass(frozen=True)
class JobChaos:
    """How big a run is, the clients' timing, and how much chaos."""

    records: int = 100_000
    partitions: int = 4
    workers: int = 3
    batch_records: int = 2000
    session_timeout_ms: int = 2000
    heartbeat_interval_ms: int = 200
    transaction_timeout_ms: int = 7000
    # Stop faults once this share of the input is committed, or after this many, so the run ends soon after.
    chaos_until: float = 0.9
    max_faults: int = 14
    deadline_s: float = 420


@dataclass
class JobChaosRun:
    """What a run did and saw."""

    config: JobChaos
    root: str
    events_dir: Path
    seconds: float
    faults: Counter
    events: Counter
    report: RunReport
    committed: dict[int, int | None] | None
    input_end: dict[int, int]
    output: list[Message]
    history: list[Op]

    def summary(self) -> str:
        faults, events, report = self.faults, self.events, self.report
        fencings = events["fenced commits"] + events["lost"] + events["fatal ProducerFenced"]
        return (
            f"chaos: {self.config.records} records, {self.seconds:.0f} s; kills={faults['kills']}, "
            f"pauses={faults['pauses']} ({faults['zombie pauses']} inside a transaction, "
            f"{faults['pauses past the session timeout']} past the session timeout), fencings={fencings} "
            f"({events['fenced commits']} zombie offset commits refused, {events['lost']} assignments lost on a "
            f"fenced heartbeat, {events['fatal ProducerFenced']} producers fenced after the sweep aborted their "
            f"transaction); transactions: {events['committed']} committed, {events['aborted']} aborted by workers, "
            f"{report.transactions_aborted_by_sweep} by the sweep; members expired by the sweep="
            f"{report.members_expired}; worker restarts after a fatal error={report.restarts}; "
            f"history: {len(self.history)} operations"
        )


def run_job_chaos(workdir: Path, rng: random.Random, config: JobChaos = JobChaos()) -> JobChaosRun:
    """One recorded run in `workdir` (its root, the workers' events and the history are kept there)."""
    root, events_dir, history_dir = str(workdir / "lake"), workdir / "events", workdir / "history"
    for folder in (root, events_dir, history_dir):
        Path(folder).mkdir()
    create_topic(root, INPUT, config.partitions, None)
    create_topic(root, OUTPUT, config.partitions, None)
    generate_input(root, INPUT, config.records, config.partitions, HistoryWriter(history_dir, "generator"))
    job = Job(
        root,
        INPUT,
        OUTPUT,
        GROUP,
        batch_records=config.batch_records,
        session_timeout_ms=config.session_timeout_ms,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        transaction_timeout_ms=config.transaction_timeout_ms,
        events_dir=str(events_dir),
    )
    supervisor = ChaosSupervisor(job, config.workers, str(history_dir))
    nemesis = Nemesis(supervisor, rng, events_dir, config.session_timeout_ms, config.transaction_timeout_ms)
    started = time.monotonic()
    supervisor.start_all()
    try:
        while True:
            if time.monotonic() - started > config.deadline_s:
                raise TimeoutError(
                    f"the job did not catch up in {config.deadline_s:g} s"
                    f" (slots never assigned a partition: {slots_never_assigned(events_dir, config.workers)})"
                )
            time.sleep(rng.uniform(0.2, 0.8))
            nemesis.heal()
            supervisor.sweep()
            supervisor.restart_exited(skip=nemesis.dead)
            committed = supervisor.committed()
            done = 0 if committed is None else sum(offset or 0 for offset in committed.values())
            if done < config.chaos_until * config.records and nemesis.faults < config.max_faults:
                nemesis.strike()
            else:
                nemesis.heal(everything=True)
                # Caught up, and every slot has owned partitions (S6.2): a slot killed before it joined is
                # started again and given a share at the next rebalance, even when the input is all consumed.
                if supervisor.caught_up() and not slots_never_assigned(events_dir, config.workers):
                    break
    finally:
        nemesis.heal(everything=True)
        supervisor.stop()
    seconds = time.monotonic() - started
    # A zombie's transaction may still hold an output LSO: the sweep aborts it after its timeout.
    supervisor.settle_output()
    output = read_committed_output(root, config.partitions, HistoryWriter(history_dir, "final-reader"))
    return JobChaosRun(
        config,
        root,
        events_dir,
        seconds,
        nemesis.counts,
        worker_events(events_dir),
        supervisor.report,
        supervisor.committed(),
        end_offsets(root, INPUT),
        output,
        read_history(history_dir),
    )


def read_committed_output(root: str, partitions: int, history: HistoryWriter) -> list[Message]:
    """The whole output, read_committed, recorded."""
    conf = {"lakelog.root": root, "enable.partition.eof": True, "max.poll.records": 50_000}
    with RecordingConsumer(conf, history) as reader:
        reader.assign([TopicPartition(OUTPUT, p, OFFSET_BEGINNING) for p in range(partitions)])
        out, at_end = [], set()
        while len(at_end) < partitions:
            for message in reader.consume(50_000, 5.0):
                if message.error() is not None:
                    assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                    at_end.add(message.partition())
                else:
                    out.append(message)
        return out


def slots_never_assigned(events_dir: Path, workers: int) -> list[int]:
    """The worker slots whose events show no assignment holding a partition yet."""
    missing = []
    for slot in range(workers):
        path = events_dir / f"slot-{slot}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        events = [json.loads(line) for line in lines if line.endswith("}")]
        if not any(e["event"] == "assigned" and e["partitions"] for e in events):
            missing.append(slot)
    return missing


def worker_events(events_dir: Path) -> Counter:
    """The workers' own events (the pipeline's --events-dir), counted by kind."""
    counts: Counter = Counter()
    for path in events_dir.glob("slot-*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            counts[event["event"]] += 1
            if event["event"] == "aborted" and event["fenced"]:
                counts["fenced commits"] += 1
            if event["event"] == "fatal":
                counts[f"fatal {event['error']}"] += 1
    return counts
