"""A small in-process workload on one topic, recorded: a transactional producer commits and aborts
the planned transactions (tests/chaos/generator.py) while a read_committed reader polls, also while
a transaction is open; a second producer sends plain batches; at the end a read_committed reader
and a read_uncommitted monitor read everything.

`run_workload(..., bug=NAME)` is the test-only build: one client misbehaves as BUGS says, and the
history shows it. With no bug the history must be clean.
"""

from __future__ import annotations

import time

from chaos.client import RecordingConsumer, RecordingProducer
from chaos.generator import PlannedTransaction
from chaos.history import INVOKE, OK, HistoryWriter, key_of, text
from lakelog import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from lakelog.log import READ_COMMITTED, create_topic, open_partition

TOPIC = "chaos"
PARTITIONS = 2
DRAIN_TIMEOUT_S = 60
# The readers' long poll (fetch.wait.max.ms): an idle partition is looked at again at least this often, so a
# poll of DRAIN_POLL_S, longer than it, that finds nothing means nothing more is there. With the default (500 ms)
# a 0.3 s poll could end before the look that sees the last writes, and a planted skip went unseen.
FETCH_WAIT_MS = 100
DRAIN_POLL_S = 0.3

# Planted bug -> what the misbehaving client does (and the anomaly class the checker must find).
BUGS = {
    "abort-reported-as-commit": "the producer aborts a transaction and records a commit (lost-write)",
    "resend-fresh-producer": "a committed batch is sent again by a new producer, a fresh producer id (duplicate)",
    "read-uncommitted": "the reader reads read_uncommitted while it claims read_committed (aborted-read)",
    "read-uncommitted-open": "the same reader, polling while a transaction is open (precommitted-read)",
    "seek-back": "the reader seeks back to the start without recording it (nonmonotonic-poll)",
    "two-producers-out-of-order": "a client sends two batches through two producers, the later one first (nonmonotonic-send)",
    "seek-forward": "the reader seeks past one readable record without recording it (poll-skip)",
    "counted-offsets": "the monitor numbers records by counting, not by their offsets (inconsistent-offsets)",
}


def run_workload(root: str, history_dir: str, plan: list[PlannedTransaction], bug: str | None = None) -> None:
    """Run the workload on `root` (creates its topic), recording every client in `history_dir`."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown planted bug {bug!r}: one of {sorted(BUGS)}")
    create_topic(root, TOPIC, PARTITIONS, None)
    producer_history = HistoryWriter(history_dir, "producer-0")
    producer = RecordingProducer(
        {"lakelog.root": root, "transactional.id": "chaos-0", "linger.ms": 600_000, "batch.num.messages": 1_000_000},
        producer_history,
    )
    producer.init_transactions()
    uncommitted = bug in ("read-uncommitted", "read-uncommitted-open")
    reader = RecordingConsumer(
        {
            "lakelog.root": root,
            "isolation.level": "read_uncommitted" if uncommitted else "read_committed",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
        },
        HistoryWriter(history_dir, "reader-0"),
        claims="read_committed",
    )
    reader.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    for number, planned in enumerate(plan):
        producer.begin_transaction()
        for partition in range(PARTITIONS):
            for index in range(planned.records):
                producer.produce(TOPIC, f"t{number}-p{partition}-{index}".encode(), partition=partition)
        producer.flush()
        if bug != "read-uncommitted":
            reader.consume(1000, 0.05)  # while the transaction is open: nothing, in read_committed
        if bug == "abort-reported-as-commit" and number == 0:
            producer_history(INVOKE, "commit", txn=producer.txn, transactional_id=producer.transactional_id)
            Producer.abort_transaction(producer)
            producer_history(OK, "commit", txn=producer.txn, transactional_id=producer.transactional_id)
        elif planned.commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
        if bug == "seek-forward" and number == len(plan) - 1:
            # Skip exactly one readable record: the first committed data row at or after the reader's position
            # (the last transaction commits rows on every partition). Skipping position + 1 blindly could skip a
            # marker or an aborted row, which is no poll skip, depending on how far the reader had got. Partition 1,
            # because the plain sends land there later: a skip shows only when a later read follows it.
            position = reader.position([TopicPartition(TOPIC, 1)])[0].offset
            Consumer.seek(reader, TopicPartition(TOPIC, 1, next_readable(root, 1, position) + 1))
        reader.consume(1000, 0.2)
        if bug == "resend-fresh-producer" and number == 0:
            again = RecordingProducer({"lakelog.root": root}, HistoryWriter(history_dir, "producer-0-again"))
            for index in range(planned.records):
                again.produce(TOPIC, f"t0-p0-{index}".encode(), partition=0)
            again.flush()
    plain_sends(root, history_dir, out_of_order=bug == "two-producers-out-of-order")
    drain(reader)
    if bug == "seek-back":
        Consumer.seek(reader, TopicPartition(TOPIC, 0, OFFSET_BEGINNING))
        drain(reader)
    reader.close()
    for name, isolation in (("reader-final", "read_committed"), ("monitor", "read_uncommitted")):
        with RecordingConsumer(
            {"lakelog.root": root, "isolation.level": isolation, "fetch.wait.max.ms": FETCH_WAIT_MS},
            HistoryWriter(history_dir, name),
            count_offsets=name == "monitor" and bug == "counted-offsets",
        ) as consumer:
            consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
            drain(consumer)


def next_readable(root: str, partition: int, position: int) -> int:
    """The offset of the first committed data record of the partition at or after `position` (read_committed)."""
    log = open_partition(root, TOPIC, partition)
    offset = max(position, log.log_start_offset())
    while offset < log.last_stable_offset():
        fetched = log.fetch(offset, max_records=100, isolation_level=READ_COMMITTED)
        data = [row["offset"] for row in fetched.rows.to_pylist() if row["control"] is None]
        if data:
            return min(data)
        offset = fetched.next_offset
    raise AssertionError(f"{TOPIC}-{partition} has no committed record at or after offset {position}")


def plain_sends(root: str, history_dir: str, out_of_order: bool) -> None:
    """Two batches of idempotent sends to partition 1, recorded as one send of both, first then second."""
    history = HistoryWriter(history_dir, "producer-1")
    batches = [[f"plain-{batch}-{index}".encode() for index in range(3)] for batch in range(2)]
    if not out_of_order:
        producer = RecordingProducer({"lakelog.root": root, "linger.ms": 600_000}, history)
        for value in batches[0] + batches[1]:
            producer.produce(TOPIC, value, partition=1)
        producer.flush()
        return
    producers = [Producer({"lakelog.root": root, "linger.ms": 600_000}) for _ in batches]
    delivered: list[list[list]] = [[], []]
    for number, (producer, batch) in enumerate(zip(producers, batches, strict=True)):
        for value in batch:
            producer.produce(
                TOPIC,
                value,
                partition=1,
                on_delivery=lambda error, message, n=number: delivered[n].append(
                    [key_of(message.topic(), message.partition()), message.offset(), text(message.value())]
                ),
            )
    producers[1].flush()
    producers[0].flush()
    history(OK, "send", delivered[0] + delivered[1])


def drain(consumer: Consumer) -> None:
    """Consume until a poll finds nothing more (every write has ended before this is called)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while consumer.consume(1000, DRAIN_POLL_S):
        if time.monotonic() > deadline:
            raise TimeoutError(f"still reading after {DRAIN_TIMEOUT_S} s")
