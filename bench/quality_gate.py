"""A gated transactional load of 1 M rows with 5 expectations against the same load ungated.

Two load paths, each into a gated topic and into an ungated twin (same
partitions, same rows), in this process, rounds alternating so machine load
hits both sides alike:

- producer: the transactional Producer (begin, produce every row, commit).
  On the gated topic commit_transaction() validates the transaction's rows it
  kept in hand and appends the result row inside the transaction (S11.1, S11.2).
- load: `lakelog load` of one JSON-lines file (loader.load, what the CLI runs).
  A gated topic's file is one transaction of TransactionalBatchWriter, judged
  before its commit; the baseline is the same one-transaction load into the
  ungated twin (the loader's gated path without a suite), so the ratio is the
  gate's own cost. Plain `lakelog load` of an ungated topic (expected-offset
  appends, no transaction) is printed once for information.

The suite is the issue's: value.customer not null, value.amount_cents between
0 and 10,000,000, row count between 1 and 1e7, key unique within the load,
value.currency in a set. GX is imported once per process; it is warmed up
before the timed rounds and printed apart (cold: the first gated load of a
process pays it on top). Target: gated/ungated <= 1.3 for each path. The
breakdown says where a gated load's time goes: the load itself (the ungated
median), keeping the suite's columns in hand as the rows are sent (the JSON
value fields parsed batch by batch, StagedRows), building the validation frame
(merging the batches' fields, pandas columns), GX's run, the result row's
append, and the rest (gated minus ungated minus those: concatenating the kept
columns, the suite read, one more partition and marker in the transaction, and
whatever else the gated side pays).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

from bench import _common

ROWS, ROWS_QUICK = 1_000_000, 50_000
ROUNDS, ROUNDS_QUICK = 3, 1
WARM_UP = 1_000
PARTITIONS = 4
TARGET = 1.3
CURRENCIES = ("EUR", "USD", "GBP", "CHF")
SUITE = {
    "name": "orders",
    "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "value.customer"}},
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "value.amount_cents", "min_value": 0, "max_value": 10_000_000},
        },
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1, "max_value": 10_000_000}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "key"}},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value.currency", "value_set": CURRENCIES}},
    ],
}


class _Timers:
    """Seconds spent in the gate's steps, per timed round (the functions are wrapped for this benchmark only)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def take(self) -> dict[str, float]:
        taken, self.seconds = dict(self.seconds), defaultdict(float)
        return taken

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        from lakelog.client.producer import gate as producer_gate
        from lakelog.client.producer import sender
        from lakelog.jobs import batch_writer
        from lakelog.quality import batch_gate, staged
        from lakelog.quality.results import RESULTS_LOG

        validate_module = importlib.import_module("lakelog.quality.validate")
        patches = [
            (validate_module, "validate", self._timed(validate_module.validate, "validate")),
            (validate_module, "validation_frame", self._timed(validate_module.validation_frame, "frame")),
            (staged, "merge_field_columns", self._timed(staged.merge_field_columns, "merge")),
            (
                sender.Sender,
                "send",
                self._timed(sender.Sender.send, "result row", lambda args: args[1][0] == RESULTS_LOG),
            ),
            (
                batch_writer._Appends,
                "append",
                self._timed(batch_writer._Appends.append, "result row", lambda args: args[1][0] == RESULTS_LOG),
            ),
            (producer_gate.ProducerGate, "keep", self._timed(producer_gate.ProducerGate.keep, "keep")),
            (batch_gate.BatchGate, "appended", self._timed(batch_gate.BatchGate.appended, "keep")),
        ]
        originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
        for owner, name, wrapper in patches:
            setattr(owner, name, wrapper)
        try:
            yield
        finally:
            for owner, name, original in originals:
                setattr(owner, name, original)

    def _timed(self, function: Callable, name: str, counted: Callable[[tuple], bool] = lambda args: True) -> Callable:
        def timed(*args, **kwargs):
            if not counted(args):
                return function(*args, **kwargs)
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    rows, rounds = (ROWS_QUICK, ROUNDS_QUICK) if quick else (ROWS, ROUNDS)
    expectations = len(SUITE["expectations"])
    with _common.session(
        "quality_gate",
        f"a gated transactional load of {rows:,} rows with {expectations} expectations vs the same load ungated "
        f"(Producer over {PARTITIONS} partitions; lakelog load), {rounds} rounds each",
        root_parent,
        keep,
    ) as (result, root):
        gx_seconds = _warm_gx()
        print(f"GX import + ephemeral context (first validation of this process, paid once): {gx_seconds:.2f} s")
        keys, values = _orders(rows)
        source, warm_up = os.path.join(root, "orders.jsonl"), os.path.join(root, "warm-up.jsonl")
        for path, lines in ((source, values), (warm_up, values[:WARM_UP])):
            with open(path, "wb") as handle:
                handle.write(b"\n".join(lines) + b"\n")
        _topics(root)
        timers = _Timers()
        table = []
        with timers.installed():
            for path, (gated_round, ungated_round) in (
                ("producer", _producer_rounds(root, keys, values)),
                ("load", _load_rounds(root, source, warm_up)),
            ):
                gated_round(WARM_UP), ungated_round(WARM_UP), timers.take()  # warm-up: handles, ids, the results log
                gated, ungated, steps = [], [], []
                cpu: dict[str, list[float]] = {"gated": [], "ungated": []}
                faults: dict[str, list[int]] = {"gated": [], "ungated": []}
                for n in range(rounds):
                    for side in ("gated", "ungated") if n % 2 else ("ungated", "gated"):
                        started, faulted = time.process_time(), _minor_faults()
                        (gated if side == "gated" else ungated).append((gated_round if side == "gated" else ungated_round)())
                        cpu[side].append(time.process_time() - started)
                        faults[side].append(_minor_faults() - faulted)
                        step = timers.take()
                        if side == "gated":
                            steps.append(step)
                table.append(_breakdown(path, gated, ungated, steps))
                ratio = _common.median(gated) / _common.median(ungated)
                result.add(f"quality_gate {path} gated/ungated @{rows}", ratio, TARGET)
                print(
                    f"  cold (the first gated load of a process also imports GX): "
                    f"{(_common.median(gated) + gx_seconds) / _common.median(ungated):.3f}; "
                    f"CPU time (this process, all threads; moved less by other processes): "
                    f"{_common.median(cpu['gated']):.2f} / {_common.median(cpu['ungated']):.2f} s = "
                    f"{_common.median(cpu['gated']) / _common.median(cpu['ungated']):.3f}; "
                    f"minor page faults per round (fresh memory touched): gated "
                    f"{_common.median(faults['gated']):,.0f}, ungated {_common.median(faults['ungated']):,.0f}"
                )
        _common.print_table(
            ["path", "ungated s", "gated s", "gate s", "keep + parse s", "frame s", "GX run s", "result row s", "other s"],
            table,
        )
        plain = _plain_load(root, source)
        print(
            f"plain `lakelog load` of the same file into an ungated topic (expected-offset appends, "
            f"no transaction): {plain:.2f} s"
        )
    return result


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _warm_gx() -> float:
    started = time.perf_counter()
    importlib.import_module("lakelog.quality.validate")._batch_definition()
    return time.perf_counter() - started


def _orders(rows: int) -> tuple[list[bytes], list[bytes]]:
    keys = [b"order-%d" % i for i in range(rows)]
    values = [
        json.dumps(
            {
                "order_id": i,
                "customer": f"c{i % 9973}",
                "amount_cents": (i * 7919) % 5_000_000,
                "currency": CURRENCIES[i % len(CURRENCIES)],
                "items": 1 + i % 5,
            }
        ).encode()
        for i in range(rows)
    ]
    return keys, values


def _topics(root: str) -> None:
    from lakelog import AdminClient, NewTopic
    from lakelog.quality import write_suite

    AdminClient({"lakelog.root": root}).create_topics(
        [NewTopic(name, num_partitions=PARTITIONS) for name in ("gated", "ungated", "load-gated", "load-ungated", "load-plain")]
    )
    for topic in ("gated", "load-gated"):
        write_suite(root, topic, json.dumps(SUITE))


def _producer_rounds(root: str, keys: list[bytes], values: list[bytes]) -> tuple[Callable[[], float], ...]:
    from lakelog import Producer

    conf = {"lakelog.root": root, "linger.ms": 60_000, "batch.num.messages": 10_000_000, "batch.size": 1 << 30}

    def side(topic: str) -> Callable[[], float]:
        producer = Producer({**conf, "transactional.id": f"bench-{topic}"})
        producer.init_transactions()

        def round_(count: int | None = None) -> float:
            started = time.perf_counter()
            producer.begin_transaction()
            for key, value in zip(keys[:count], values[:count], strict=False):
                producer.produce(topic, value, key=key)
            producer.commit_transaction()
            return time.perf_counter() - started

        return round_

    return side("gated"), side("ungated")


def _load_rounds(root: str, source: str, warm_up: str) -> tuple[Callable[[], float], ...]:
    from lakelog.jobs import load as loader
    from lakelog.store import Location

    runs = iter(range(1_000_000))

    def gated(count: int | None = None) -> float:
        started = time.perf_counter()
        loaded = loader.load(
            root, "load-gated", warm_up if count else source, key_column="order_id", load_id=f"g{next(runs)}", progress=False
        )
        assert loaded.validation_id is not None, "the gated load was not validated"
        return time.perf_counter() - started

    def ungated(count: int | None = None) -> float:
        # The gated path of the loader (one transaction of TransactionalBatchWriter) into a topic with no suite.
        started = time.perf_counter()
        loader._load_gated(
            loader.check_root(root),
            "load-ungated",
            Location.of(warm_up if count else source),
            "jsonl",
            0,
            "order_id",
            10_000,
            f"u{next(runs)}",
            False,
        )
        return time.perf_counter() - started

    return gated, ungated


def _plain_load(root: str, source: str) -> float:
    from lakelog.jobs import load as loader

    started = time.perf_counter()
    loader.load(root, "load-plain", source, key_column="order_id", load_id="plain", progress=False)
    return time.perf_counter() - started


def _breakdown(path: str, gated: list[float], ungated: list[float], steps: list[dict[str, float]]) -> list[object]:
    median_step = {
        name: _common.median([step.get(name, 0.0) for step in steps])
        for name in ("validate", "frame", "merge", "result row", "keep")
    }
    gate = _common.median(gated) - _common.median(ungated)
    gx_run = median_step["validate"] - median_step["frame"]
    other = gate - median_step["validate"] - median_step["merge"] - median_step["result row"] - median_step["keep"]
    return [
        path,
        _common.median(ungated),
        _common.median(gated),
        gate,
        median_step["keep"],
        median_step["frame"] + median_step["merge"],
        gx_run,
        median_step["result row"],
        other,
    ]


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__ or "", argv)


if __name__ == "__main__":
    main()
