"""What a user waits for on object storage: the round trips of each operation, through the public API.

The store is moto's S3 server on loopback behind a proxy in a process of its own that adds a delay D to every
request (tests/round_trips.py). Each operation runs at D = 0, 5 and 25 ms (quick: 0 and 25):

- rounds = (p50 time at D - p50 time at 0) / D: the requests the caller waited for one after another, whatever
  the emulator's own speed;
- depth: the same counted from the proxy's record (the longest chain of requests each sent after the one
  before it was answered), and the requests made, by kind.

Plain delta-rs's append runs beside them on the same proxy. Targets are the round-trip goals of the store's
commit path (docs/decisions/commit-path.md). An idle consumer's requests per minute are printed for 1, 16 and 256
partitions (quick: 1 and 16) at fetch.wait.max.ms 500 (the default) and 100.
Each operation writes topics of its own: a partition with one writer, as the goals are stated (a partition shared
by writers pays for their lost races, S9.5).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from deltalake import DeltaTable, write_deltalake

from bench import _common
from lakelog import Consumer, Producer, TopicPartition
from lakelog.admin import AdminClient, NewTopic
from lakelog.log import BatchHeader, open_partition, payload_table
from lakelog.log.records import conform_payload, stamp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from round_trips import DelayedStore, Trace  # noqa: E402 - test tooling, shared with the benchmark
from s3emulator import S3Emulator  # noqa: E402

BUCKET = "lakelog-bench-round-trips"
DELAYS_MS = (0, 5, 25)
DELAYS_MS_QUICK = (0, 25)
REPEATS = 7
REPEATS_QUICK = 3
IDLE_SECONDS = 10
# The goals (rounds waited), per operation: docs/decisions/commit-path.md.
GOALS = {
    "idempotent produce 1 + flush": 2.0,
    "transaction, 1 partition": 6.0,
    "transaction, 4 partitions": 6.5,
    "transaction, 16 partitions": 6.5,
    "transaction, 1 partition, until a read_committed consumer has it": 8.0,
    "begin, produce 1, send_offsets, commit": 8.0,
}


@dataclass
class Measured:
    times: dict[int, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    traces: dict[int, list[Trace]] = field(default_factory=lambda: collections.defaultdict(list))


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("round_trips")
    delays = DELAYS_MS_QUICK if quick else DELAYS_MS
    repeats = REPEATS_QUICK if quick else REPEATS
    with S3Emulator() as emulator:
        emulator.create_bucket(BUCKET)
        with DelayedStore(emulator, 0.0) as store, store.exported():
            root = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
            print(f"== round_trips: moto on {emulator.endpoint_url} behind a delaying proxy, root {root}")
            operations = _operations(root)
            measured = {name: Measured() for name in operations}
            for delay_ms in delays:
                store.set_delay(delay_ms / 1000)
                for name, operation in operations.items():
                    for attempt in range(repeats + 1):
                        with store.traced() as traces:
                            started = time.perf_counter()
                            operation()
                            elapsed = time.perf_counter() - started
                        if attempt:  # the first warms the handles up at this delay
                            measured[name].times[delay_ms].append(elapsed)
                            measured[name].traces[delay_ms].append(traces[0])
            _report(measured, delays, result)
            for partitions in (1, 16) if quick else (1, 16, 256):
                for wait_ms in (500, 100):
                    _idle_consumer(root, store, result, partitions, wait_ms)
    return result


def _operations(root: str) -> dict[str, Callable[[], None]]:
    admin = AdminClient({"lakelog.root": root})
    for future in admin.create_topics(
        [
            NewTopic(name, n)
            for name, n in (
                ("idempotent", 1),
                ("one", 1),
                ("four", 4),
                ("sixteen", 16),
                ("read", 1),
                ("offsets", 1),
                ("input", 1),
            )
        ]
    ).values():
        future.result()
    idempotent = Producer({"lakelog.root": root, "client.id": "bench-rt-idempotent"})
    transactional = Producer({"lakelog.root": root, "transactional.id": "bench-rt"})
    transactional.init_transactions()
    # A read_committed consumer, assigned and polling in a thread while its operation runs.
    # Its long poll (fetch.wait.max.ms) at one round of the largest delay: the row measures the reads, not the wait.
    reader = Consumer(
        {
            "lakelog.root": root,
            "group.id": "bench-rt-reader",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": DELAYS_MS[-1],
        }
    )
    reader.assign([TopicPartition("read", 0, 0)])
    member = Consumer(
        {"lakelog.root": root, "group.id": "bench-rt-group", "enable.auto.commit": False, "session.timeout.ms": 600_000}
    )
    member.subscribe(["input"])
    while not member.assignment():
        member.consume(1, 0.05)
    metadata = member.consumer_group_metadata()

    log = open_partition(root, "idempotent", 0)
    rows = stamp(conform_payload(payload_table([b"v" * 100])), 0, BatchHeader(), time.time_ns() // 1000)
    plain_uri = f"{root}/plain-delta-rs"
    storage = log.table.io.delta_options()
    write_deltalake(plain_uri, rows, mode="append", storage_options=storage)
    handle = DeltaTable(plain_uri, storage_options=storage)

    def transaction(topic: str, partitions: int) -> Callable[[], None]:
        def call() -> None:
            transactional.begin_transaction()
            for partition in range(partitions):
                transactional.produce(topic, value=b"v" * 100, partition=partition)
            transactional.commit_transaction()

        return call

    def produce_and_flush() -> None:
        idempotent.produce("idempotent", value=b"v" * 100, partition=0)
        idempotent.flush()

    def until_read() -> None:
        value = uuid.uuid4().bytes
        seen = threading.Event()

        def poll() -> None:
            while not seen.is_set():
                message = reader.poll(0.05)
                if message is not None and message.error() is None and message.value() == value:
                    seen.set()

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        transactional.begin_transaction()
        transactional.produce("read", value=value, partition=0)
        transactional.commit_transaction()
        if not seen.wait(60):
            raise RuntimeError("the read_committed consumer never saw the committed record")
        thread.join()

    offset = iter(range(1, 1 << 30))

    def with_offsets() -> None:
        transactional.begin_transaction()
        transactional.produce("offsets", value=b"v" * 100, partition=0)
        transactional.send_offsets_to_transaction([TopicPartition("input", 0, next(offset))], metadata)
        transactional.commit_transaction()

    return {
        "idempotent produce 1 + flush": produce_and_flush,
        "transaction, 1 partition": transaction("one", 1),
        "transaction, 4 partitions": transaction("four", 4),
        "transaction, 16 partitions": transaction("sixteen", 16),
        "transaction, 1 partition, until a read_committed consumer has it": until_read,
        "begin, produce 1, send_offsets, commit": with_offsets,
        "plain delta-rs append": lambda: write_deltalake(handle, rows, mode="append"),
    }


def _report(measured: dict[str, Measured], delays: tuple[int, ...], result: _common.Result) -> None:
    rows = []
    for name, data in measured.items():
        base = _common.median(data.times[0])
        for delay_ms in delays[1:]:
            waited = _common.median(data.times[delay_ms])
            rounds = (waited - base) / (delay_ms / 1000)
            traces = data.traces[delay_ms]
            depth = _common.median([trace.depth for trace in traces])
            count = sum(trace.count for trace in traces) / len(traces)
            mix: collections.Counter[str] = sum((trace.mix for trace in traces), collections.Counter())
            detail = " / ".join(f"{mix[kind] / len(traces):.1f} {kind}" for kind in sorted(mix))
            rows.append([name, delay_ms, waited * 1e3, rounds, depth, count, detail])
            if delay_ms == delays[-1]:
                result.add(f"round_trips rounds of {name} @{delay_ms} ms", rounds, GOALS.get(name))
                result.add(f"round_trips requests of {name}", count, None)
    _common.print_table(["operation", "D ms", "p50 ms", "rounds", "depth p50", "requests", "mix (mean)"], rows)


def _idle_consumer(root: str, store: DelayedStore, result: _common.Result, partitions: int, wait_ms: int) -> None:
    """Requests per idle minute of a read_committed consumer of `partitions` partitions with nothing new, polling
    in a loop with `fetch.wait.max.ms` = `wait_ms` (its long poll: at most one look per partition per wait)."""
    store.set_delay(0.0)
    topic = f"idle-{partitions}"
    if topic not in AdminClient({"lakelog.root": root}).list_topics().topics:
        AdminClient({"lakelog.root": root}).create_topics([NewTopic(topic, partitions)])[topic].result()
    consumer = Consumer(
        {
            "lakelog.root": root,
            "group.id": f"bench-rt-idle-{partitions}-{wait_ms}",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": wait_ms,
        }
    )
    consumer.assign([TopicPartition(topic, partition, -1) for partition in range(partitions)])
    settle = time.monotonic() + 2 * wait_ms / 1000 + 1
    while time.monotonic() < settle:
        consumer.poll(0.05)  # positioned at the end, and past the long poll's first, shorter waits
    with store.traced() as traces:
        deadline = time.monotonic() + IDLE_SECONDS
        while time.monotonic() < deadline:
            consumer.poll(0.1)
    consumer.close()
    per_minute = traces[0].count / IDLE_SECONDS * 60
    bound = partitions * 2 * 60_000 / wait_ms
    print(
        f"   an idle read_committed consumer of {partitions} partition(s), fetch.wait.max.ms={wait_ms}: "
        f"{per_minute:.0f} requests per idle minute (at most one GET and one HEAD per partition per wait: "
        f"{bound:.0f}; {dict(traces[0].mix)})"
    )
    result.add(f"round_trips idle consumer of {partitions}, fetch.wait.max.ms={wait_ms}, requests/min", per_minute, None)


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
