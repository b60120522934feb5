"""A root at scale: the request model of docs/scale.md, checked against a scaled-down root on the S3 emulator.

The emulator sits behind the counting proxy of the round-trip benchmark (tests/round_trips.py, no delay added).
Two roots are made, each with one topic, of SIZES partitions (100 and 400; quick: 40 and 160), COMMITS appends to
each partition. On each, the benchmark counts the requests of:

- a plan (`plan_scan`, what every Spark read, view refresh and micro-batch makes first): cold, in a process that
  holds no handle of the topic, then made again (the kept handles refreshed, lakelog.log.plan_handles);
- one sweep (`lakelog coordinator sweep`: transactions, groups, log cleaner, internal compaction, sink records) of
  the root;
- producers at work: PRODUCERS transactional producers side by side, each TRANSACTIONS transactions of one record
  to each of WIDTH partitions of its own (after one transaction that opens them): requests per transaction by the
  table they go to (a topic partition, a `__transaction_state` partition), and the busiest table.

The model is linear: each operation's requests per partition (plans, the sweep) or per transaction (producers),
measured on the first topic, predict the second's; the ratio measured / predicted is printed for each (target
LOW-HIGH). docs/scale.md scales the same unit costs to 10,000 partitions and 100 producers.
"""

from __future__ import annotations

import collections
import functools
import os
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Callable

from bench import _common
from lakelog import Producer
from lakelog.admin import AdminClient, NewTopic
from lakelog.jobs.maintenance import sweep
from lakelog.log import open_partition, payload_table, plan_handles
from lakelog.log.scan import plan_scan

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from round_trips import DelayedStore, Trace  # noqa: E402 - test tooling, shared with the benchmark
from s3emulator import S3Emulator  # noqa: E402

BUCKET = "lakelog-bench-scale"
SIZES = (100, 400)
SIZES_QUICK = (40, 160)
COMMITS = 3
PRODUCERS = 4
TRANSACTIONS = 5
WIDTH = 4
LOW, HIGH = 0.85, 1.15
# Requests per partition of a plan made again in the same process (the Spark read's goal on S3).
PLAN_AGAIN_TARGET = 2.0


# -- the measurement ----------------------------------------------------------------------------------------------


def prefix_of(path: str) -> str:
    """The table folder a request is under (`<root>/topics/<t>/<p>`, `<root>/__transaction_state/<n>`, ...)."""
    parts = urllib.parse.urlsplit(path).path.strip("/").split("/")
    for index, part in enumerate(parts):
        if part == "topics" and index + 2 < len(parts):
            return "/".join(parts[: index + 3])
        if part.startswith("__") and index + 1 < len(parts):
            return "/".join(parts[: index + 2])
    return "/".join(parts[:-1])


def kind_of_prefix(prefix: str) -> str:
    if "/topics/" in f"/{prefix}/":
        return "topic"
    if "__transaction_state" in prefix:
        return "coordinator"
    return "other"


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("scale")
    small, large = SIZES_QUICK if quick else SIZES
    with S3Emulator() as emulator:
        emulator.create_bucket(BUCKET)
        with DelayedStore(emulator, 0.0) as store, store.exported():
            root = f"s3://{BUCKET}/scale-{uuid.uuid4().hex[:8]}"
            print(f"== scale: moto on {emulator.endpoint_url} behind a counting proxy, root {root}")
            # A root per size: the sweep of each goes over its own topic's partitions (and its internal logs) only.
            units = _measure(f"{root}/p{small}", store, small)
            measured = _measure(f"{root}/p{large}", store, large)
    rows = []
    for name, (unit, per) in units.items():
        count, _ = measured[name]
        scale = large if per == "partition" else 1
        if per == "partition":
            unit = unit / small
        predicted = unit * scale
        ratio = count / predicted if predicted else float("inf")
        rows.append([name, f"{unit:.2f} per {per}", large, count, round(predicted), ratio])
        result.add(f"scale {name} at {large} partitions: measured / model", ratio, HIGH)
        verdict = "PASS" if LOW <= ratio <= HIGH else "MISS"
        print(f"   {name}: {count:.0f} at {large}, model {predicted:.0f} from the unit cost at {small} ({verdict})")
    _common.print_table(["operation", f"unit cost (at {small})", "partitions", "measured", "model", "ratio"], rows)
    again = measured["plan, again"][0] / large
    result.add(f"scale requests per partition of a plan made again, at {large}", again, PLAN_AGAIN_TARGET)
    return result


def _traced(store: DelayedStore, operation: Callable[[], object]) -> Trace:
    with store.traced() as traces:
        operation()
    return traces[0]


def _measure(root: str, store: DelayedStore, partitions: int) -> dict[str, tuple[float, str]]:
    """Requests of each operation on a new root with one topic of `partitions`, with what they are counted per:
    (count, "partition" | "transaction")."""
    topic = f"scale-{partitions}"
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(topic, partitions)])[topic].result()
    for partition in range(partitions):
        log = open_partition(root, topic, partition)
        for commit in range(COMMITS):
            log.append(payload_table([f"{partition}-{commit}".encode()]))
    plan_handles.forget()
    print(f"-- {partitions} partitions, {COMMITS} appends each")
    counts: dict[str, tuple[float, str]] = {}
    cold = _traced(store, lambda: plan_scan(root, topic))
    again = _traced(store, lambda: plan_scan(root, topic))
    counts["plan, cold"] = (cold.count, "partition")
    counts["plan, again"] = (again.count, "partition")
    print(f"   plan per partition: {cold.count / partitions:.2f} cold {dict(cold.mix)}, {again.count / partitions:.2f} again")
    swept = _traced(store, lambda: sweep(root))
    counts["sweep"] = (swept.count, "partition")
    print(f"   sweep: {swept.count} requests {dict(swept.mix)}, {swept.count / partitions:.1f} per partition")
    producers = [_WidthProducer(root, topic, index, partitions) for index in range(PRODUCERS)]
    tasks: list[Callable[[], None]] = [functools.partial(producer.run, TRANSACTIONS) for producer in producers]
    work = _traced(store, lambda: _side_by_side(tasks))
    for producer in producers:
        producer.close()
    transactions = PRODUCERS * TRANSACTIONS
    per_table: collections.Counter[str] = collections.Counter(prefix_of(request.path) for request in work.requests)
    by_kind: collections.Counter[str] = collections.Counter()
    for request in work.requests:
        method = "PUT" if request.method == "PUT" else "GET+HEAD" if request.method in ("GET", "HEAD") else request.method
        by_kind[f"{kind_of_prefix(prefix_of(request.path))} {method}"] += 1
    for name, count in sorted(by_kind.items()):
        counts[f"transaction: {name}"] = (count / transactions, "transaction")
    busiest, most = per_table.most_common(1)[0]
    counts["transaction: busiest table"] = (most / transactions, "transaction")
    print(
        f"   {transactions} transactions of {WIDTH} partitions: {work.count / transactions:.1f} requests each "
        f"{dict(work.mix)}; busiest table {busiest.split('/', 2)[-1]}: {most / transactions:.2f} per transaction"
    )
    return counts


class _WidthProducer:
    """A transactional producer writing one record to each of its own WIDTH partitions per transaction."""

    def __init__(self, root: str, topic: str, index: int, partitions: int) -> None:
        self.topic = topic
        self.partitions = [(index * WIDTH + offset) % partitions for offset in range(WIDTH)]
        self.producer = Producer({"lakelog.root": root, "transactional.id": f"scale-{topic}-{index}"})
        self.producer.init_transactions()
        self.run(1)  # opens its partitions: the measured transactions are the steady state

    def run(self, transactions: int) -> None:
        for _ in range(transactions):
            self.producer.begin_transaction()
            for partition in self.partitions:
                self.producer.produce(self.topic, value=b"v", partition=partition)
            self.producer.commit_transaction()

    def close(self) -> None:
        self.producer.close()


def _side_by_side(work: list[Callable[[], None]]) -> None:
    """Each callable in a thread of its own, all at once; the first failure is raised."""
    failures: list[BaseException] = []

    def run(task: Callable[[], None]) -> None:
        try:
            task()
        except BaseException as error:  # noqa: BLE001 - reported by the caller
            failures.append(error)

    threads = [threading.Thread(target=run, args=(task,)) for task in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


if __name__ == "__main__":
    _common.cli(run, __doc__)
