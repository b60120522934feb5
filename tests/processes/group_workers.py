"""Group members run as real processes by the KIP-447 tests: `python -m processes.group_workers ROLE ...`.

Each prints one JSON object per line on stdout (flushed) for the test to follow,
and never imports pytest.

- `stall-before-offsets ROOT GROUP INPUT OUTPUT COUNT SESSION_MS`: join, read COUNT
  records, produce them transformed in a transaction, then SIGSTOP itself right
  before `send_offsets_to_transaction` (the seed's "long GC"). Woken, it tries to
  send its offsets and commit, and reports what happened.
- `stall-after-offsets ROOT GROUP INPUT OUTPUT COUNT SESSION_MS TXN_TIMEOUT_MS`: the same,
  but it sends its offsets (pending in its transaction) and SIGSTOPs itself right
  before `commit_transaction`; woken, it tries to commit.
- `process ROOT GROUP INPUT OUTPUT COUNT SESSION_MS STOP_FILE`: join, read COUNT
  records, produce and send offsets in one transaction, commit, then keep
  heartbeating until STOP_FILE exists, and leave.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from lakelog import Consumer, KafkaException, Producer


def report(event: str, **details) -> None:
    print(json.dumps({"event": event, **details}), flush=True)


def member(root: str, group: str, session_ms: int) -> Consumer:
    return Consumer(
        {
            "lakelog.root": root,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": 100,
        }
    )


def read(consumer: Consumer, count: int, timeout_s: float = 60.0) -> list:
    messages: list = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"read {len(messages)} of {count} records")
        messages.extend(m for m in consumer.consume(count - len(messages), 0.1) if m.error() is None)
    return messages


def produce_transformed(producer: Producer, output: str, messages: list) -> None:
    for message in messages:
        producer.produce(
            output,
            value=message.value().upper(),
            partition=message.partition(),
            headers=[("lakelog.source", f"{message.topic()}:{message.partition()}:{message.offset()}".encode())],
        )
    producer.flush()


def stall_before_offsets(root: str, group: str, input_topic: str, output: str, count: str, session_ms: str) -> None:
    consumer = member(root, group, int(session_ms))
    # A transaction timeout far beyond the test: only the group metadata can fence this zombie (S7.2).
    producer = Producer({"lakelog.root": root, "transactional.id": "kip447-a", "transaction.timeout.ms": 600_000})
    producer.init_transactions()
    consumer.subscribe([input_topic])
    messages = read(consumer, int(count))
    metadata = consumer.consumer_group_metadata()
    report("polled", member_id=metadata.member_id, member_epoch=metadata.generation_id, offsets=[m.offset() for m in messages])
    producer.begin_transaction()
    produce_transformed(producer, output, messages)
    positions = consumer.position(consumer.assignment())
    report("produced", positions={p.partition: p.offset for p in positions})
    os.kill(os.getpid(), signal.SIGSTOP)
    report("woke")
    try:
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
        producer.commit_transaction()
        report("committed")
    except KafkaException as error:
        report("fenced", error=type(error).__name__, abortable=error.args[0].txn_requires_abort())
        producer.abort_transaction()
        report("aborted")
    consumer.close()


def stall_after_offsets(
    root: str, group: str, input_topic: str, output: str, count: str, session_ms: str, txn_timeout_ms: str
) -> None:
    consumer = member(root, group, int(session_ms))
    producer = Producer({"lakelog.root": root, "transactional.id": "kip447-a", "transaction.timeout.ms": int(txn_timeout_ms)})
    producer.init_transactions()
    consumer.subscribe([input_topic])
    messages = read(consumer, int(count))
    metadata = consumer.consumer_group_metadata()
    producer.begin_transaction()
    produce_transformed(producer, output, messages)
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, metadata)
    report("sent", member_id=metadata.member_id, positions={p.partition: p.offset for p in positions})
    os.kill(os.getpid(), signal.SIGSTOP)
    report("woke")
    try:
        producer.commit_transaction()
        report("committed")
    except KafkaException as error:
        report("fenced", error=type(error).__name__, fatal=error.args[0].fatal())
    consumer.close()


def process(root: str, group: str, input_topic: str, output: str, count: str, session_ms: str, stop_file: str) -> None:
    consumer = member(root, group, int(session_ms))
    producer = Producer({"lakelog.root": root, "transactional.id": "kip447-b"})
    producer.init_transactions()
    consumer.subscribe([input_topic])
    messages = read(consumer, int(count))
    metadata = consumer.consumer_group_metadata()
    producer.begin_transaction()
    produce_transformed(producer, output, messages)
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, metadata)
    producer.commit_transaction()
    report(
        "committed",
        member_id=metadata.member_id,
        member_epoch=metadata.generation_id,
        offsets=[m.offset() for m in messages],
        positions={p.partition: p.offset for p in positions},
    )
    while not Path(stop_file).exists():
        consumer.consume(10, 0.1)  # heartbeats: stays the partition's owner
    consumer.close()
    report("left")


if __name__ == "__main__":
    role, *arguments = sys.argv[1:]
    roles = {"stall-before-offsets": stall_before_offsets, "stall-after-offsets": stall_after_offsets, "process": process}
    roles[role](*arguments)
