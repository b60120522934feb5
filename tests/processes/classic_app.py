"""A consume-transform-produce program written for confluent-kafka's classic group protocol, run as a real process
by the classic-protocol tests: `python -m processes.classic_app ROOT GROUP INPUT OUTPUT STOP_FILE [HANG_AFTER]`.

As a framework writes one: the range assignor, `assign()` inside `on_assign`, a new random transactional.id per
process, the root passed as `bootstrap.servers`. With HANG_AFTER it commits that many transactions, then opens one
more, sends its offsets into it and hangs there (reporting `hanging`) for the test to SIGKILL. It prints one JSON
object per line, and never imports pytest.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid

from lakelog import Consumer, Producer

SESSION_MS = 2000
TRANSACTION_TIMEOUT_MS = 3000


def report(event: str, **details) -> None:
    print(json.dumps({"event": event, **details}), flush=True)


def main(root: str, group: str, input_topic: str, output: str, stop_file: str, hang_after: str = "-1") -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": root,
            "group.id": group,
            "partition.assignment.strategy": "range",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 100,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": root,
            "transactional.id": f"classic-app-{uuid.uuid4()}",
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
    )
    producer.init_transactions()

    def on_assign(c, partitions):
        c.assign(partitions)
        report("assigned", partitions=[p.partition for p in partitions])

    def on_revoke(c, partitions):
        c.unassign()

    consumer.subscribe([input_topic], on_assign=on_assign, on_revoke=on_revoke)
    committed = 0
    while not os.path.exists(stop_file):
        messages = [m for m in consumer.consume(5, 0.2) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            source = f"{message.topic()}:{message.partition()}:{message.offset()}"
            producer.produce(
                output, value=message.value().upper(), partition=message.partition(), headers=[("source", source.encode())]
            )
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata())
        if committed == int(hang_after):
            producer.flush()
            report("hanging", records=len(messages))
            while True:
                time.sleep(1)
        producer.commit_transaction()
        committed += 1
        report("committed", records=len(messages))
    consumer.close()
    report("stopped")


if __name__ == "__main__":
    main(*sys.argv[1:])
