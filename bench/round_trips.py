"""What a user waits for on object storage: the round trips of each operation, through the public API.

The store is an emulator on loopback behind a proxy in a process of its own that adds a delay D to every request
(tests/round_trips.py): moto's S3 server (`--store s3`, the default), Azurite (`azure`) or fake-gcs-server
(`gcs`), the clients' settings pointing at the proxy (AWS_ENDPOINT_URL; Azure's connection string with the proxy
as its BlobEndpoint; STORAGE_EMULATOR_HOST). `--store all` runs the three one after another and prints at the end
one table of them side by side: requests, depth and rounds per operation at the largest delay, and the mix.
Requests are named in S3's words on every store (tests/round_trips.py's `kind`), so the mixes compare: Azure's
Put Blob, Get Blob, Get Blob Properties and Delete Blob are PUT, GET, HEAD and DELETE, a `comp=list` GET is LIST;
on GCS an upload POST (the create a commit is) is PUT, a media GET (`alt=media`) is GET, a metadata GET of an
object (or of a bucket) is HEAD, a GET of `/b/<bucket>/o` is LIST. Each operation runs at D = 0, 5 and 25 ms
(quick: 0 and 25):

- rounds = (p50 time at D - p50 time at 0) / D: the requests the caller waited for one after another, whatever
  the emulator's own speed;
- depth: the same counted from the proxy's record (the longest chain of requests each sent after the one
  before it was answered), and the requests made, by kind.

Plain delta-rs's append runs beside them on the same proxy, where delta-rs writes to the emulator (not to
fake-gcs-server: its first write fails with "Generic GCS error", and the row is left out with the error printed). Targets are the round-trip goals of the store's
commit path (docs/decisions/commit-path.md). An idle consumer's requests per minute are printed for 1, 16 and 256
partitions (quick: 1 and 16) at fetch.wait.max.ms 500 (the default) and 100.
Each operation writes topics of its own: a partition with one writer, as the goals are stated (a partition shared
by writers pays for their lost races, S9.5).
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deltalake import DeltaTable, write_deltalake

from bench import _common
from lakelog import Consumer, Producer, TopicPartition
from lakelog.admin import AdminClient, NewTopic
from lakelog.log import BatchHeader, open_partition, payload_table
from lakelog.log.records import conform_payload, stamp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from cloud_emulators import Azurite, FakeGcs, available  # noqa: E402
from round_trips import DelayedStore, Trace  # noqa: E402 - test tooling, shared with the benchmark
from s3emulator import S3Emulator  # noqa: E402

BUCKET = "lakelog-bench-round-trips"
STORES = ("s3", "azure", "gcs")
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


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False, store: str = "s3") -> _common.Result:
    result = _common.Result("round_trips")
    delays = DELAYS_MS_QUICK if quick else DELAYS_MS
    stores = STORES if store == "all" else (store,)
    compared: dict[str, dict[str, Row]] = {}
    for name in stores:
        compared[name] = _run_store(name, quick, result)
    if len(stores) > 1:
        _compare(compared, delays[-1])
    return result


def _emulator(store: str) -> tuple[contextlib.AbstractContextManager[Any], Callable[[Any], str], str]:
    """The store's emulator (not started), what makes the benchmark's bucket in it and returns the root, its name."""
    if store == "s3":
        return S3Emulator(), lambda emulator: emulator.create_bucket(BUCKET), "moto"
    if store == "azure":
        return Azurite(), lambda emulator: f"az://{emulator.create_container(BUCKET)}", "Azurite"
    if store == "gcs":
        return FakeGcs(), lambda emulator: f"gs://{emulator.create_bucket(BUCKET)}", "fake-gcs-server"
    raise ValueError(f"no store {store!r}: one of {', '.join(STORES)} or all")


def _run_store(store: str, quick: bool, result: _common.Result) -> dict[str, Row]:
    delays = DELAYS_MS_QUICK if quick else DELAYS_MS
    repeats = REPEATS_QUICK if quick else REPEATS
    reason = available(store) if store != "s3" else None
    if reason:
        print(f"== round_trips on {store}: skipped, {reason}")
        return {}
    made, make_bucket, emulator_name = _emulator(store)
    with made as emulator:
        bucket = make_bucket(emulator)
        with DelayedStore(emulator, 0.0) as delayed, delayed.exported():
            root = f"{bucket}/bench-{uuid.uuid4().hex[:8]}"
            print(f"== round_trips: {emulator_name} on {emulator.endpoint_url} behind a delaying proxy, root {root}")
            operations = _operations(root)
            measured = {name: Measured() for name in operations}
            for delay_ms in delays:
                delayed.set_delay(delay_ms / 1000)
                for name, operation in operations.items():
                    for attempt in range(repeats + 1):
                        with delayed.traced() as traces:
                            started = time.perf_counter()
                            operation()
                            elapsed = time.perf_counter() - started
                        if attempt:  # the first warms the handles up at this delay
                            measured[name].times[delay_ms].append(elapsed)
                            measured[name].traces[delay_ms].append(traces[0])
            rows = _report(measured, delays, result, "" if store == "s3" else f" on {store}")
            for partitions in (1, 16) if quick else (1, 16, 256):
                for wait_ms in (500, 100):
                    per_minute = _idle_consumer(root, delayed, result, partitions, wait_ms, store)
                    name = f"idle read_committed consumer, {partitions} partition(s), wait {wait_ms} ms: requests/min"
                    rows[name] = Row(per_minute, None, None, "")
    return rows


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
    try:
        write_deltalake(plain_uri, rows, mode="append", storage_options=storage)
        handle: DeltaTable | None = DeltaTable(plain_uri, storage_options=storage)
    except Exception as error:  # delta-rs's object_store may not reach an emulator lakelog's clients reach
        print(f"   plain delta-rs append left out: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
        handle = None

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

    operations: dict[str, Callable[[], None]] = {
        "idempotent produce 1 + flush": produce_and_flush,
        "transaction, 1 partition": transaction("one", 1),
        "transaction, 4 partitions": transaction("four", 4),
        "transaction, 16 partitions": transaction("sixteen", 16),
        "transaction, 1 partition, until a read_committed consumer has it": until_read,
        "begin, produce 1, send_offsets, commit": with_offsets,
    }
    if handle is not None:
        operations["plain delta-rs append"] = lambda: write_deltalake(handle, rows, mode="append")
    return operations


@dataclass(frozen=True)
class Row:
    """One operation's figures at the largest delay: requests (mean), depth (p50), rounds, the mix (mean per kind)."""

    requests: float
    depth: float | None
    rounds: float | None
    mix: str


def _report(measured: dict[str, Measured], delays: tuple[int, ...], result: _common.Result, suffix: str = "") -> dict[str, Row]:
    rows = []
    largest: dict[str, Row] = {}
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
                result.add(f"round_trips rounds of {name}{suffix} @{delay_ms} ms", rounds, GOALS.get(name))
                result.add(f"round_trips requests of {name}{suffix}", count, None)
                largest[name] = Row(count, depth, rounds, detail)
    _common.print_table(["operation", "D ms", "p50 ms", "rounds", "depth p50", "requests", "mix (mean)"], rows)
    return largest


def _compare(compared: dict[str, dict[str, Row]], delay_ms: int) -> None:
    """The stores side by side: requests per operation, depth and rounds at the largest delay, and the mix."""
    stores = [store for store, rows in compared.items() if rows]
    names = list(dict.fromkeys(name for store in stores for name in compared[store]))
    print(f"== round_trips by store: requests (mean), depth (p50) and rounds at {delay_ms} ms, requests by kind (mean)")
    headers = ["operation"]
    headers += [f"{store} requests" for store in stores]
    headers += [f"{store} depth" for store in stores]
    headers += [f"{store} rounds" for store in stores]
    headers += [f"{store} mix" for store in stores]
    table = []
    for name in names:
        rows = [compared[store].get(name) for store in stores]
        line: list[object] = [name]
        line += [f"{row.requests:.1f}" if row else "-" for row in rows]
        line += [f"{row.depth:.0f}" if row and row.depth is not None else "-" for row in rows]
        line += [f"{row.rounds:.1f}" if row and row.rounds is not None else "-" for row in rows]
        line += [_short_mix(row.mix) if row and row.mix else "-" for row in rows]
        table.append(line)
    _common.print_table(headers, table)


def _short_mix(detail: str) -> str:
    """'2.0 GET / 1.0 HEAD' as '2.0G 1.0H'."""
    return " ".join(f"{count}{kind[0]}" for count, kind in (part.split(" ", 1) for part in detail.split(" / ")))


def _idle_consumer(
    root: str, store: DelayedStore, result: _common.Result, partitions: int, wait_ms: int, store_name: str = "s3"
) -> float:
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
    suffix = "" if store_name == "s3" else f" on {store_name}"
    result.add(f"round_trips idle consumer of {partitions}, fetch.wait.max.ms={wait_ms}, requests/min{suffix}", per_minute, None)
    return per_minute


def main(argv: list[str] | None = None) -> None:
    args = _common.parser(__doc__.splitlines()[0])
    args.add_argument(
        "--store",
        choices=(*STORES, "all"),
        default="s3",
        help="the emulator behind the proxy: moto (s3), Azurite (azure), fake-gcs-server (gcs), or all three one after "
        "another, compared at the end",
    )
    options = args.parse_args(argv)
    run(options.quick, options.root, options.keep, options.store)


if __name__ == "__main__":
    main()
