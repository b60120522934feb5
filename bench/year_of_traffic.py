"""A year of traffic: one partition written for a simulated year with retention.ms of 7 days, swept as the sweep does.

The partition's log runs on a clock passed in (`open_partition(..., clock)`), which moves one
simulated hour per batch: every hour a batch of records, every simulated day a new idempotent
producer id (a daily task), and once a day the log cleaner's pass (`lakelog.log.retention.clean_topics`:
compaction by key if the topic compacts, retention on the simulated clock, vacuum), as the sweep
and the Airflow sweep DAG run it.

Only the record clock is simulated. The graces that run on the wall clock, before vacuum deletes a
removed file (`file.delete.delay.ms`, `delete.retention.ms`) and before the log cleanup deletes a
commit file (`delta.log.retention.ms`), are hours against a year in a real deployment; here the year
takes minutes, so they are set to a second, or nothing would ever be deleted within the run. No
safety rests on them (S9.5).

Printed once a simulated month: the records kept (log end offset minus log start), the age of the
oldest kept record, active files and bytes, and bytes under the table's folder (data files and
`_delta_log`). Judged:

- size within the retention: the oldest kept record is at most retention.ms + the span of the
  oldest kept file + one sweep interval old (retention removes whole files, as Kafka removes whole
  segments), every month after the first week;
- size flat: the most bytes under the table in the year's last 60 days, divided by the most in
  days 30-90 (target <= 1.2);
- cold open + append: a new handle (`open_partition`) and one batch appended through it, on the
  year-old partition against a fresh one with the same config, interleaved (target <= 1.2).

The file system is synced before the cold opens are timed. The year's ~9,000 deletes land in the
partition's folders within half a minute, and on this machine's root (ext4 mounted with `discard`)
creating a file in those folders then took 0.5-0.8 ms against 0.04 ms in the fresh partition's, until
the journal caught up (a sync, or some seconds). A real year spreads those deletes over months.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from bench import _common
from lakelog import AdminClient, NewTopic
from lakelog.log import BatchHeader, allocate_producer_id, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.log.records import next_sequence
from lakelog.store import Location

TOPIC = "year"
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
RETENTION_MS = 7 * DAY_MS
DAYS = 365
RECORDS = 100
RECORDS_QUICK = 20
# A batch every this many simulated hours (quick: fewer commits for the same year).
STEP_HOURS = 1
STEP_HOURS_QUICK = 6
SWEEP_EVERY_MS = DAY_MS
SAMPLES = 20
SAMPLES_QUICK = 8
TARGET = 1.2
VALUE = b"v" * 100
# Wall-clock graces, cut to a second because the simulated year takes minutes (module docstring).
TOPIC_CONFIG = {
    "retention.ms": str(RETENTION_MS),
    "file.delete.delay.ms": "1000",
    "delete.retention.ms": "1000",
    "delta.log.retention.ms": "1000",
}
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


class SimulatedClock:
    """Milliseconds since the epoch, moved by hand."""

    def __init__(self, start_ms: int) -> None:
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms


@dataclass
class Month:
    """The partition at the end of one simulated month."""

    day: int
    records_kept: int
    oldest_age_days: float
    active_files: int
    active_bytes: int
    folder_bytes: int
    within: bool


class _Partition:
    """A one-partition topic on its own root, written on a simulated clock."""

    def __init__(self, uri: str, clock: SimulatedClock) -> None:
        self.uri = uri
        self.clock = clock
        AdminClient({"lakelog.root": uri}).create_topics([NewTopic(TOPIC, num_partitions=1, config=dict(TOPIC_CONFIG))])
        self.log = open_partition(uri, TOPIC, 0, clock)
        self.producer_id = -1
        self.sequence = 0
        self.appended = 0

    def new_producer(self) -> None:
        self.producer_id = allocate_producer_id(self.uri, "bench-year-of-traffic")
        self.sequence = 0

    def append(self, records: int, log=None) -> None:
        log = log or self.log
        payload = payload_table([VALUE] * records)
        log.append(payload, BatchHeader(self.producer_id, 0, self.sequence))
        self.sequence = next_sequence(self.sequence + records - 1)
        self.appended += records

    def sweep(self) -> None:
        from lakelog.log.retention import clean_topics

        clean_topics(self.uri, self.clock())

    def cold_append(self, records: int) -> float:
        """Seconds to open a new handle on the partition and append one batch through it."""
        t0 = time.perf_counter()
        log = open_partition(self.uri, TOPIC, 0, self.clock)
        self.append(records, log)
        return time.perf_counter() - t0

    def month(self, day: int, largest_file_span_ms: int) -> Month:
        log = open_partition(self.uri, TOPIC, 0, self.clock)
        start, end = log.log_start_offset(), log.log_end_offset()
        files = partition_files(log.table)
        oldest_ms = self.clock()
        if start < end:
            first = log.fetch(start, max_records=1).rows
            oldest_ms = first.column("timestamp").cast("int64")[0].as_py() // 1000
        age_ms = self.clock() - oldest_ms
        folder = Location.of(log.table.location.uri)
        folder_bytes = sum(entry.size for entry in folder.io.list(folder.uri, recursive=True) if not entry.is_dir)
        bound = RETENTION_MS + largest_file_span_ms + SWEEP_EVERY_MS
        return Month(
            day,
            end - start,
            age_ms / DAY_MS,
            len(files),
            sum(entry.size_bytes for entry in files),
            folder_bytes,
            day * DAY_MS <= RETENTION_MS or age_ms <= bound,
        )

    def oldest_file_span_ms(self) -> int:
        """How much simulated time the oldest active file's records span (whole files go, so this is slack)."""
        # The writer's handle may be behind the sweep's commits, whose removed files vacuum may have deleted.
        self.log.refresh()
        files = partition_files(self.log.table)
        if not files:
            return 0
        stamps = self.log.table.read_file(files[0], ["timestamp"]).column("timestamp").cast("int64").to_pylist()
        return (max(stamps) - min(stamps)) // 1000 if stamps else 0


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    step_hours = STEP_HOURS_QUICK if quick else STEP_HOURS
    records = RECORDS_QUICK if quick else RECORDS
    samples = SAMPLES_QUICK if quick else SAMPLES
    result = _common.Result("year_of_traffic")
    print(
        f"== year_of_traffic: one partition, a batch of {records} records every {step_hours} simulated hour(s) "
        f"for {DAYS} days, a new producer id a day, retention.ms {RETENTION_MS // DAY_MS} days, swept daily"
    )
    with _common.temp_root(root_parent, keep) as parent:
        base = Location.of(parent)
        clock = SimulatedClock(START_MS)
        year = _Partition((base / "year").uri, clock)
        started = time.perf_counter()
        months: list[Month] = []
        folder_bytes: dict[int, int] = {}
        next_sweep = START_MS + SWEEP_EVERY_MS
        for hour in range(0, DAYS * 24, step_hours):
            clock.now_ms = START_MS + hour * HOUR_MS
            if hour % 24 < step_hours:
                year.new_producer()
            year.append(records)
            if clock.now_ms >= next_sweep:
                year.sweep()
                next_sweep += SWEEP_EVERY_MS
                day = (clock.now_ms - START_MS) // DAY_MS
                if day % 5 == 0 or day % 30 == 0:
                    month = year.month(day, year.oldest_file_span_ms())
                    folder_bytes[day] = month.folder_bytes
                    if day % 30 == 0:
                        months.append(month)
                        print(f"   ... day {day}, {time.perf_counter() - started:.0f} s", flush=True)
        elapsed = time.perf_counter() - started
        _common.print_table(
            ["day", "records kept", "oldest kept (days)", "active files", "active KiB", "folder KiB", "within retention"],
            [
                [
                    m.day,
                    m.records_kept,
                    m.oldest_age_days,
                    m.active_files,
                    m.active_bytes / 1024,
                    m.folder_bytes / 1024,
                    "yes" if m.within else "NO",
                ]
                for m in months
            ],
        )
        print(
            f"   {year.appended:,} records appended over the year in {elapsed:.0f} s; "
            f"{_common.table_line(open_partition(year.uri, TOPIC, 0, clock))}"
        )
        fresh = _Partition((base / "fresh").uri, clock)
        fresh.new_producer()
        fresh.append(records)
        year.new_producer()
        os.sync()  # the journal work of the compressed year's deletes is done (module docstring)
        year_samples, fresh_samples = [], []
        for _ in range(samples):
            clock.now_ms += step_hours * HOUR_MS
            year_samples.append(year.cold_append(records))
            fresh_samples.append(fresh.cold_append(records))
        _common.print_table(
            ["cold open + append", "samples", "p50 ms", "p95 ms"],
            [
                [label, len(values), _common.median(values) * 1e3, _common.percentile(values, 95) * 1e3]
                for label, values in (("year-old partition", year_samples), ("fresh partition", fresh_samples))
            ],
        )
        within = all(month.within for month in months)
        print(f"   size within the retention every month: {'PASS' if within else 'MISS'}")
        early = [size for day, size in folder_bytes.items() if 30 <= day <= 90]
        late = [size for day, size in folder_bytes.items() if day >= DAYS - 60]
        result.add("year_of_traffic table bytes, last 60 days / days 30-90 (max)", max(late) / max(early), TARGET)
        result.add(
            "year_of_traffic cold open + append p50, year-old / fresh",
            _common.median(year_samples) / _common.median(fresh_samples),
            TARGET,
        )
    return result


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
