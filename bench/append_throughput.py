"""Idempotent append throughput through PartitionLog.append vs a plain delta-rs append.

For batches of 1, 1k, 10k and 100k records with 100-byte values, one partition
gets idempotent appends (producer id from allocate_producer_id, epoch 0,
increasing base sequence) through PartitionLog.append, and a second Delta table
with the same schema and configuration gets the very same stamped rows through
`deltalake.write_deltalake(handle, rows, mode="append")`. The two are timed
alternately, batch by batch, so machine load hits both alike. Stamping the
baseline's rows happens outside its timing; the lakelog side pays for its own.
Both handles are reopened after each checkpoint (the topic's
`checkpoint.interval.commits`, also the baseline table's interval), as
FINDINGS.md recommends for any long-lived handle: the baseline's here, the
log's by the maintenance it runs after each commit (whose cost, compaction
included, counts on the lakelog side).

The ratio is lakelog time / baseline time for the same records. Targets: <= 1.3
at 1 record per batch, <= 1.10 at 10k and 100k (1k is informational).
"""

from __future__ import annotations

import time

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench import _common
from lakelog.log import BatchHeader, allocate_producer_id, create_topic, open_partition, payload_table
from lakelog.log.records import PARTITION_SCHEMA, conform_payload, stamp
from lakelog.store.upkeep.maintenance import is_checkpoint_version

SIZES = (1, 1_000, 10_000, 100_000)
BATCHES = {1: 300, 1_000: 100, 10_000: 40, 100_000: 10}
BATCHES_QUICK = {1: 60, 1_000: 20, 10_000: 8, 100_000: 3}
WARMUP = 2
TARGETS = {1: 1.3, 1_000: None, 10_000: 1.10, 100_000: 1.10}
VALUE_BYTES = 100


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    batches = BATCHES_QUICK if quick else BATCHES
    result = _common.Result("append_throughput")
    print(f"== append_throughput: idempotent PartitionLog.append vs write_deltalake, {VALUE_BYTES}-byte values")
    print(f"   batches per size: {', '.join(f'{s:,}: {batches[s]}' for s in SIZES)} (+{WARMUP} warm-up)")
    rows = []
    ratios = {}
    with _common.temp_root(root_parent, keep) as root:
        producer_id = allocate_producer_id(root, "bench-throughput")
        for size in SIZES:
            lakelog_s, baseline_s = _measure(root, size, batches[size], producer_id)
            records = size * batches[size]
            ratio = lakelog_s / baseline_s
            ratios[size] = ratio
            rows.append(
                [
                    f"{size:,}",
                    batches[size],
                    records / lakelog_s,
                    records / baseline_s,
                    lakelog_s / batches[size] * 1e3,
                    baseline_s / batches[size] * 1e3,
                    ratio,
                ]
            )
    _common.print_table(
        ["records/batch", "batches", "lakelog rec/s", "baseline rec/s", "lakelog ms/batch", "baseline ms/batch", "ratio"],
        rows,
    )
    for size in SIZES:
        result.add(f"append_throughput time lakelog/baseline @{size}", ratios[size], TARGETS[size])
    return result


def _measure(root: str, size: int, batches: int, producer_id: int) -> tuple[float, float]:
    topic = f"throughput-{size}"
    config = create_topic(root, topic)
    log = open_partition(root, topic, 0)
    maintenance = _common.MaintenanceTally()
    # delta-rs's own table (one lakelog created declares a writer feature delta-rs refuses to write).
    baseline_uri = f"{root}/baseline-{size}"
    handle = DeltaTable.create(
        baseline_uri, PARTITION_SCHEMA, configuration=config.table_configuration(), raise_if_key_not_exists=False
    )
    interval = config.values["checkpoint.interval.commits"]
    payload = payload_table([b"v" * VALUE_BYTES] * size)
    conformed = conform_payload(payload)
    lakelog_s = baseline_s = 0.0
    sequence = 0
    for batch in range(WARMUP + batches):
        header = BatchHeader(producer_id, 0, sequence)
        rows = stamp(conformed, sequence, header, time.time_ns() // 1000)

        def lakelog_append(header: BatchHeader = header) -> float:  # defaults bind this iteration's values (called within it)
            t0 = time.perf_counter()
            log.append(payload, header)
            took = time.perf_counter() - t0
            maintenance.add(log)
            return took

        def baseline_append(rows: pa.Table = rows) -> float:  # defaults bind this iteration's values (called within it)
            nonlocal handle
            t0 = time.perf_counter()
            write_deltalake(handle, rows, mode="append")
            # Reopened after each of its checkpoints (the topic's interval), exactly when the log reopens its own.
            if is_checkpoint_version(handle.version(), interval):
                handle = DeltaTable(baseline_uri)
            return time.perf_counter() - t0

        if batch % 2:
            took_lakelog, took_baseline = lakelog_append(), baseline_append()
        else:
            took_baseline, took_lakelog = baseline_append(), lakelog_append()
        if batch >= WARMUP:
            lakelog_s += took_lakelog
            baseline_s += took_baseline
        sequence += size
    print(f"   @{size:,}: lakelog {_common.table_line(log)}; {maintenance.line()}")
    return lakelog_s, baseline_s


def main(argv: list[str] | None = None) -> None:
    options = _common.parser(__doc__.splitlines()[0]).parse_args(argv)
    run(options.quick, options.root, options.keep)


if __name__ == "__main__":
    main()
