"""Stage 2 of the main job: transactions, a zombie, the sweep, and a read_committed consume.

1. a producer process ("zombie") with transactional.id `payments` begins a
   transaction, writes to every partition, and stalls (SIGSTOP);
2. a new instance with the same transactional.id calls init_transactions: the
   stalled transaction is aborted and the old instance is fenced (S4.1, S4.2);
   the new instance commits two transactions and aborts one;
3. the zombie wakes (SIGCONT), writes more and tries to commit: ProducerFenced;
4. another producer process (`refunds`) dies (SIGKILL) in the middle of a
   transaction: the partitions' LSO holds; once its transaction.timeout.ms has
   passed, the coordinator sweep aborts it (S4.7) and the LSO moves on;
5. a read_committed consumer reads the topic: it shows exactly the committed
   rows, and a read_uncommitted one shows the aborted rows too.

Run alone: `python -m pipelines.demo_transactions --root R`.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time

from lakelog import AdminClient, Consumer, KafkaException, NewTopic, Producer, TopicPartition
from lakelog.admin import IsolationLevel, OffsetSpec
from lakelog.client.roots import Location, check_root, make_root
from lakelog.jobs.maintenance import Sweeper

TOPIC = "payments"
PARTITIONS = 3
STALLED_TIMEOUT_MS = 1000


def transaction_messages(name: str, count: int) -> list[dict]:
    return [{"transaction": name, "n": n} for n in range(count)]


def produce_transaction(producer: Producer, name: str, count: int) -> None:
    for message in transaction_messages(name, count):
        producer.produce(TOPIC, json.dumps(message), partition=message["n"] % PARTITIONS)
    producer.flush()


def child(role: str, root: str) -> None:
    """A producer process: `zombie` stalls mid-transaction and then tries to commit; `dying` is killed mid-transaction."""
    transactional_id = {"zombie": "payments", "dying": "refunds"}[role]
    # The zombie's timeout is long: it is fenced by the new instance, not by the sweep.
    timeout_ms = STALLED_TIMEOUT_MS * (60 if role == "zombie" else 1)
    producer = Producer({"lakelog.root": root, "transactional.id": transactional_id, "transaction.timeout.ms": timeout_ms})
    producer.init_transactions()
    producer.begin_transaction()
    produce_transaction(producer, f"{role}-1", 6)
    print("in transaction", flush=True)
    sys.stdin.readline()  # the parent stops us here (zombie) or kills us (dying)
    try:
        produce_transaction(producer, f"{role}-late", 3)
        producer.commit_transaction()
        print("committed", flush=True)
    except KafkaException as error:
        print(f"{type(error).__name__} fatal={error.error.fatal()}", flush=True)


def start_child(role: str, root: Location) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", f"{__package__}.demo_transactions", "--child", role, "--root", root.uri],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    if line != "in transaction":
        raise SystemExit(f"demo: {role} process did not start its transaction ({line!r})")
    return process


def read_all(root: Location, isolation_level: str) -> list[dict]:
    messages = []
    conf = {"lakelog.root": root, "isolation.level": isolation_level, "enable.partition.eof": True}
    with Consumer(conf) as consumer:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        while len(at_end) < PARTITIONS:
            for message in consumer.consume(1000, timeout=5):
                if message.error() is not None:
                    at_end.add(message.partition())
                else:
                    messages.append(json.loads(message.value()))
    return messages


def offsets(root: Location) -> str:
    requests = {TopicPartition(TOPIC, partition): OffsetSpec.latest() for partition in range(PARTITIONS)}
    admin = AdminClient({"lakelog.root": root})
    stable = admin.list_offsets(requests, isolation_level=IsolationLevel.READ_COMMITTED)
    high = admin.list_offsets(requests, isolation_level=IsolationLevel.READ_UNCOMMITTED)
    return ", ".join(f"p{tp.partition} LSO {stable[tp].result().offset}/HW {high[tp].result().offset}" for tp in requests)


def run(root: Location) -> None:
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS)])
    print(f"created topic {TOPIC} with {PARTITIONS} partitions")

    zombie = start_child("zombie", root)
    zombie.send_signal(signal.SIGSTOP)
    print(f"zombie: began a transaction of 6 messages and stalls (SIGSTOP); {offsets(root)}")

    producer = Producer({"lakelog.root": root, "transactional.id": "payments"})
    producer.init_transactions()
    print("new instance of transactional.id 'payments' initialised: the zombie's transaction is aborted, the zombie fenced")
    committed: list[str] = []
    for name, commit in (("t1", True), ("t2", False), ("t3", True)):
        producer.begin_transaction()
        produce_transaction(producer, name, 9)
        if commit:
            producer.commit_transaction()
            committed.append(name)
        else:
            producer.abort_transaction()
        print(f"  transaction {name} of 9 messages {'committed' if commit else 'aborted'}")

    zombie.send_signal(signal.SIGCONT)
    zombie.stdin.write("\n")
    zombie.stdin.flush()
    outcome = zombie.stdout.readline().strip()
    zombie.wait(30)
    print(f"zombie woke, wrote more and tried to commit: {outcome}")
    if not outcome.startswith("ProducerFenced"):
        raise SystemExit(f"demo: FAILED: the zombie was not fenced ({outcome!r})")

    dying = start_child("dying", root)
    dying.send_signal(signal.SIGKILL)
    dying.wait()
    print(f"producer 'refunds' SIGKILLed mid-transaction: {offsets(root)}")
    time.sleep(STALLED_TIMEOUT_MS / 1000 + 0.5)
    report = Sweeper(root).transactions()
    print(f"coordinator sweep: aborted {report.aborted_timed_out}, rolled forward {report.rolled_forward}; {offsets(root)}")
    if report.aborted_timed_out != ["refunds"]:
        raise SystemExit(f"demo: FAILED: the sweep should have aborted 'refunds', report: {report}")

    seen = read_all(root, "read_committed")
    expected = sorted((m["transaction"], m["n"]) for name in committed for m in transaction_messages(name, 9))
    got = sorted((m["transaction"], m["n"]) for m in seen)
    if got != expected:
        raise SystemExit(f"demo: FAILED: read_committed returned {len(got)} messages, expected {len(expected)}: {got}")
    everything = read_all(root, "read_uncommitted")
    print(
        f"verified: read_committed shows exactly the {len(got)} messages of {committed}; "
        f"read_uncommitted shows {len(everything)} (aborted and fenced ones too)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="demo-root-transactions", help="root folder (wiped first)")
    parser.add_argument("--child", choices=("zombie", "dying"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root)
        return
    root = check_root(args.root)
    root.io.delete_tree(root.uri)
    make_root(root)  # as `lakelog init` does: the clients take no folder or prefix that is not a root
    run(root)


if __name__ == "__main__":
    main()
