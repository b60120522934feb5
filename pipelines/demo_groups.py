"""Stage 3 of the main job: exactly-once consume-transform-produce by a consumer group (S6, S7).

1. topic `clicks` (4 partitions) gets 20,000 records; `clicks-upper` is created;
2. `pipelines.consume_transform_produce` runs 3 worker processes in group `upper`:
   each batch's output and input offsets commit in one transaction (KIP-447);
3. a quarter of the way in, one worker is SIGKILLed (the supervisor starts its
   slot again: its new producer aborts what the dead one left open) and another
   is SIGSTOPped past its session timeout: the sweep removes it, its partitions
   move on, and when it wakes its offsets are refused (it is a zombie);
4. once the group has caught up, a read_committed consume of `clicks-upper`
   shows every click exactly once, upper-cased, and the group's committed
   offsets are the input's end offsets.

Run alone: `python -m pipelines.demo_groups --root R`.
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

from lakelog import OFFSET_BEGINNING, AdminClient, Consumer, KafkaError, NewTopic, Producer, TopicPartition
from lakelog.client.roots import Location, check_root, make_root

from .consume_transform_produce import SOURCE_HEADER, Job, Supervisor
from .topic_positions import end_offsets

INPUT, OUTPUT, GROUP = "clicks", "clicks-upper", "upper"
PARTITIONS = 4
WORKERS = 3
SESSION_TIMEOUT_MS = 2000


# The demo's patience, not a safety bound: on an object store every commit (heartbeats too) is a few round trips.
CATCH_UP_S = 900


def run(root: Location, records: int = 20_000) -> None:
    admin = AdminClient({"lakelog.root": root})
    for future in admin.create_topics([NewTopic(INPUT, PARTITIONS), NewTopic(OUTPUT, PARTITIONS)]).values():
        future.result()
    producer = Producer({"lakelog.root": root, "linger.ms": 600_000, "batch.num.messages": 1_000_000})
    for index in range(records):
        producer.produce(INPUT, f"click-{index}", partition=index % PARTITIONS)
    producer.flush()
    print(f"produced {records} clicks to {INPUT} ({PARTITIONS} partitions)")

    # The workers' event logs are the demo's own observations, not lakelog state: a local folder whatever the root.
    events = Path(tempfile.mkdtemp(prefix="lakelog-demo-group-events-"))
    job = Job(
        root.uri,
        INPUT,
        OUTPUT,
        GROUP,
        batch_records=1000,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=200,
        transaction_timeout_ms=8000,
        events_dir=str(events),
    )
    supervisor = Supervisor(job, WORKERS)
    started = time.monotonic()
    supervisor.start_all()
    faults_done = False
    zombie_until = None
    try:
        while True:
            time.sleep(0.5)
            supervisor.sweep()
            supervisor.restart_exited()
            committed = supervisor.committed() or {}
            progress = sum(offset or 0 for offset in committed.values())
            if not faults_done and progress >= records // 4:
                supervisor.processes[1].send_signal(signal.SIGKILL)
                supervisor.processes[0].send_signal(signal.SIGSTOP)
                zombie_until = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + 1.5
                faults_done = True
                print(f"at {progress} committed records: worker 1 SIGKILLed, worker 0 SIGSTOPped")
            if zombie_until is not None and time.monotonic() >= zombie_until:
                supervisor.processes[0].send_signal(signal.SIGCONT)
                zombie_until = None
                print("worker 0 woke up (SIGCONT)")
            if zombie_until is None and supervisor.caught_up():
                break
            if time.monotonic() - started > CATCH_UP_S:
                raise SystemExit(f"demo: the group did not catch up within {CATCH_UP_S} s")
        supervisor.settle_output()
    finally:
        supervisor.stop()
    counts: Counter = Counter()
    for path in events.glob("slot-*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            counts[event["event"]] += 1
            counts["fenced"] += event["event"] == "aborted" and event["fenced"]
    report = supervisor.report
    print(
        f"group caught up in {time.monotonic() - started:.1f} s: {counts['committed']} transactions committed, "
        f"{counts['aborted']} aborted by workers ({counts['fenced']} zombie offset commits refused), "
        f"{counts['lost']} assignments lost on a fenced heartbeat, {report.members_expired} members expired "
        f"by the sweep, {report.restarts} worker restarts"
    )
    verify(root, records)


def verify(root: Location, records: int) -> None:
    seen: Counter = Counter()
    with Consumer({"lakelog.root": root, "enable.partition.eof": True, "max.poll.records": 50_000}) as reader:
        reader.assign([TopicPartition(OUTPUT, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        while len(at_end) < PARTITIONS:
            batch = reader.consume(50_000, 5.0)
            if not batch:
                raise SystemExit("demo: consumer timed out before the end of the output")
            for message in batch:
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                    continue
                _, partition, offset = dict(message.headers())[SOURCE_HEADER].decode().split(":")
                if message.value() != f"CLICK-{int(offset) * PARTITIONS + int(partition)}".encode():
                    raise SystemExit(f"demo: FAILED: {message.value()!r} is not the transformed input")
                seen[(int(partition), int(offset))] += 1
    expected = {(index % PARTITIONS, index // PARTITIONS) for index in range(records)}
    duplicated = sum(1 for count in seen.values() if count > 1)
    if set(seen) != expected or duplicated:
        raise SystemExit(f"demo: FAILED: {len(expected - set(seen))} clicks missing, {duplicated} duplicated")
    committed = Supervisor(Job(root.uri, INPUT, OUTPUT, GROUP), 1).committed()
    if committed != end_offsets(root, INPUT):
        raise SystemExit(f"demo: FAILED: committed offsets {committed} are not the input's end")
    print(f"verified: read_committed shows each of the {records} clicks exactly once, and the group's offsets are at the end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="demo-groups-root", help="root folder (wiped first)")
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    root = check_root(args.root)
    root.io.delete_tree(root.uri)
    make_root(root)  # as `lakelog init` does: the clients take no folder or prefix that is not a root
    run(root, args.records)


if __name__ == "__main__":
    main()
