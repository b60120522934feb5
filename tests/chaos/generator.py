"""What a chaos run does, decided up front from one seeded generator: the job's input records, and
the transactions of the in-process workload (tests/chaos/workload.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from chaos.client import RecordingProducer
from chaos.history import HistoryWriter


def value_of(index: int) -> bytes:
    """Input record `index` (unique, so the history can tell who wrote what)."""
    return f"record-{index:06d}".encode()


def generate_input(root: str, topic: str, records: int, partitions: int, history: HistoryWriter) -> None:
    """The job's input: record i in partition i % partitions, so partition p offset o holds record
    partitions*o + p; every send recorded in `history`."""
    producer = RecordingProducer(
        {"lakelog.root": root, "linger.ms": 600_000, "batch.num.messages": 20_000, "batch.size": 1 << 30}, history
    )
    for index in range(records):
        producer.produce(topic, value_of(index), partition=index % partitions)
    producer.flush()


@dataclass(frozen=True)
class PlannedTransaction:
    """`records` values to each partition, then a commit (or an abort)."""

    records: int
    commit: bool


def plan_transactions(rng: random.Random, count: int) -> list[PlannedTransaction]:
    """`count` (>= 3) transactions, about a third aborted; the first commits and so does the last, and
    one in between aborts, so every planted bug has the case it needs."""
    if count < 3:
        raise ValueError("plan at least 3 transactions")
    plan = [PlannedTransaction(rng.randint(1, 4), rng.random() > 0.35) for _ in range(count)]
    plan[0] = PlannedTransaction(plan[0].records, True)
    plan[-1] = PlannedTransaction(plan[-1].records, True)
    middle = rng.randrange(1, count - 1)
    plan[middle] = PlannedTransaction(plan[middle].records, False)
    return plan
