"""A cold coordinator against the length of its log: the sweep with nothing to do, and a describe (S8.2).

Every new process (an Airflow sweep, a CLI command, a producer's
init_transactions) starts a coordinator that has replayed nothing. Two roots, one
whose `__transaction_state` partition holds a short history and one a long one
(1,000 vs 101,000 records; 11,000 with --quick), over the same 200 live
transactional ids, all finished: the sweep finds nothing to do. Each round times
a fresh `TransactionCoordinator(root).sweep()` and a fresh `describe(id)` on
both, in turn. The history is written as real coordinator records (each id
going through begin, prepare and complete again and again), appended in
batches of 10,000 through the coordinator's own log, so it is the log a long
life leaves; the long one ends 1,000 records past its last multiple of
10,000, so a cold start that loads a snapshot still replays as many records
as on the short one. The ratio is the median on the long log / on the short one.
Target: <= 2 (flat in the log's length).
"""

from __future__ import annotations

import dataclasses
import time

from bench import _common
from lakelog.coordinator.transaction import TransactionMetadata, TxnState, partition_for_transactional_id
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator

TARGET = 2.0
IDS = 200
SHORT = 1_000
LONG = 100_000
LONG_QUICK = 10_000
BATCH = 10_000
ROUNDS = 7
BROKER = {"transaction.state.log.num.partitions": 1}
CYCLE = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)


@dataclasses.dataclass(frozen=True)
class _Records:
    records: tuple[TransactionMetadata, ...]


def history(records: int) -> list[TransactionMetadata]:
    """`records` records over IDS ids, each id cycling Ongoing -> PrepareCommit -> CompleteCommit."""
    now = int(time.time() * 1000)
    out = []
    for n in range(records):
        transactional_id = f"etl-{n % IDS}"
        state = CYCLE[(n // IDS) % len(CYCLE)] if n < records - IDS else TxnState.COMPLETE_COMMIT
        out.append(
            TransactionMetadata(
                transactional_id=transactional_id,
                producer_id=n % IDS,
                previous_producer_id=-1,
                next_producer_id=-1,
                producer_epoch=min(n // (IDS * len(CYCLE)), 30_000),
                last_producer_epoch=-1,
                transaction_timeout_ms=60_000,
                state=state,
                partitions=frozenset({("orders", 0)}) if state is not TxnState.COMPLETE_COMMIT else frozenset(),
                txn_start_ms=now,
                txn_last_update_ms=now,
            )
        )
    return out


def write_history(root: str, records: int) -> None:
    coordinator = TransactionCoordinator(root, broker_config=BROKER)
    log = coordinator._log(partition_for_transactional_id("etl-0", coordinator.num_partitions))
    rows = history(records)
    for start in range(0, len(rows), BATCH):
        log.run(lambda state, batch=tuple(rows[start : start + BATCH]): _Records(batch))


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("coordinator_recovery")
    long = LONG_QUICK if quick else LONG
    print(f"== coordinator_recovery: a cold sweep and describe on a __transaction_state of {SHORT:,} vs {long + SHORT:,} records")
    with _common.temp_root(root_parent, keep) as short_root, _common.temp_root(root_parent, keep) as long_root:
        started = time.perf_counter()
        write_history(short_root, SHORT)
        write_history(long_root, long + SHORT)
        print(f"   histories written in {time.perf_counter() - started:.0f} s")
        times: dict[tuple[str, str], list[float]] = {(k, r): [] for k in ("sweep", "describe") for r in ("short", "long")}
        for round_number in range(ROUNDS + 1):
            for name, root in (("short", short_root), ("long", long_root)):
                began = time.perf_counter()
                report = TransactionCoordinator(root, broker_config=BROKER).sweep()
                swept = time.perf_counter() - began
                assert report.ids_seen == IDS and not report.aborted_timed_out, report
                began = time.perf_counter()
                assert TransactionCoordinator(root, broker_config=BROKER).describe("etl-7") is not None
                described = time.perf_counter() - began
                if round_number:  # the first round warms the file cache
                    times[("sweep", name)].append(swept)
                    times[("describe", name)].append(described)
        _common.print_table(
            ["cold call", "short log p50 ms", "long log p50 ms"],
            [
                [
                    kind,
                    f"{_common.median(times[(kind, 'short')]) * 1000:.1f}",
                    f"{_common.median(times[(kind, 'long')]) * 1000:.1f}",
                ]
                for kind in ("sweep", "describe")
            ],
        )
        for kind in ("sweep", "describe"):
            ratio = _common.median(times[(kind, "long")]) / _common.median(times[(kind, "short")])
            result.add(f"coordinator_recovery cold {kind} p50 {long + SHORT:,}/{SHORT:,} records", ratio, TARGET)
    return result


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
