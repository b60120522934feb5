"""What the Spark benchmarks share: a local session, a topic of transactions, and CPU time of Spark's processes.

These machines are shared, so wall time is noisy; the CPU time of this process
and its children (the JVM, Spark's Python workers) is printed beside it, and
measured in the same rounds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakelog.log import BatchHeader, ControlType, create_topic, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED

PARTITIONS = 4
BATCH_ROWS = 50_000
ABORT_EVERY = 10
VALUE_BYTES = 100


def session(app: str):
    """A local[2] session with 2 GiB for the driver and no UI, as the tests use."""
    from pyspark_lakelog import local_session

    return local_session(app)


def fill_topic(root: str, topic: str, rows: int, seed: int = 5, values: str = "json") -> int:
    """`rows` records over PARTITIONS partitions in transactions of BATCH_ROWS rows by two interleaving
    producers, one in ABORT_EVERY aborted, with a plain batch after every fifth. Values are JSON orders
    of about 100 bytes ("json": random numbers, repeated field names, as event payloads are) or 100
    random hex bytes ("random": nothing for Parquet to compress). Returns the number of read_committed rows."""
    rng = np.random.default_rng(seed)
    create_topic(root, topic, PARTITIONS)
    committed = 0
    per_partition = rows // PARTITIONS
    for partition in range(PARTITIONS):
        log = open_partition(root, topic, partition)
        epochs = {1: 0, 2: 0}
        written = transaction = 0
        while written < per_partition:
            producer_id = 1 + transaction % 2
            count = min(BATCH_ROWS, per_partition - written)
            log.append(
                _payload(rng, count, values),
                BatchHeader(producer_id, epochs[producer_id], 0, is_transactional=True),
                transaction=_UNVERIFIED,
            )
            epochs[producer_id] += 1
            aborted = transaction % ABORT_EVERY == ABORT_EVERY - 1
            log.append_marker(producer_id, epochs[producer_id], ControlType.ABORT if aborted else ControlType.COMMIT)
            committed += 0 if aborted else count
            written += count
            if transaction % 5 == 4:
                log.append(_payload(rng, 100, values))
                committed += 100
            transaction += 1
    return committed


def _payload(rng: np.random.Generator, count: int, kind: str) -> pa.Table:
    customers = rng.integers(0, 10_000, count)
    if kind == "random":
        raw = rng.integers(0, 256, size=(count, VALUE_BYTES // 2), dtype=np.uint8)
        values = [row.tobytes().hex().encode() for row in raw]
    else:
        orders = rng.integers(0, 1 << 40, count)
        amounts = rng.integers(100, 100_000, count)
        values = [
            f'{{"order_id":{order},"customer":"c{customer}","amount_cents":{amount},"status":"PAID"}}'.encode()
            for order, customer, amount in zip(orders, customers, amounts, strict=True)
        ]
    return payload_table(values, keys=[f"c{n}".encode() for n in customers])


@dataclass
class Timing:
    wall_s: float
    cpu_s: float


def timed(call: Callable[[], object]) -> tuple[Timing, object]:
    """Wall and CPU seconds (this process and every descendant: the JVM, Python workers) of one call."""
    cpu_before, wall_before = _tree_cpu_s(), time.perf_counter()
    value = call()
    return Timing(time.perf_counter() - wall_before, _tree_cpu_s() - cpu_before), value


def _tree_cpu_s() -> float:
    """User + system CPU of this process and its descendants, from /proc (Linux); 0 elsewhere."""
    if not os.path.isdir("/proc"):
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                data = stat.read()
        except OSError:
            continue
        fields = data[data.rindex(")") + 2 :].split()
        parents[int(name)] = int(fields[1])
        cpu[int(name)] = sum(int(value) for value in fields[11:15])
    me = os.getpid()
    total = 0
    for pid, ticks in cpu.items():
        ancestor = pid
        while ancestor in parents and ancestor not in (me, 0, 1):
            ancestor = parents[ancestor]
        if ancestor == me:
            total += ticks
    return total / tick
