"""A cold group coordinator after a long churn, once `__consumer_offsets` is compacted by key (S9.3, S8.2).

Two roots: one whose `__consumer_offsets` partition took 100 records, one 10,100
(101,000 without --quick is not needed: the state is the same size), both over
the same 5 groups and 4 partitions each. The records are the churn a long life
leaves: members that join, get an assignment, commit offsets and leave, each
with a new member id (every consumer restart is a new member). Both logs are
written through the coordinator's own log, then compacted by the sweep's
`compact_internal_logs`. Each round times a fresh `GroupCoordinator(root)`
listing its groups (a cold replay) on both, in turn, with coordinator
snapshots off, so the replay reads the rows the compaction kept. The ratio is
the median on the long log / on the short one. Target: <= 2 (flat in the
log's history). Also printed: rows before and after, and the long log's cold
replay before compaction (INFO).
"""

from __future__ import annotations

import dataclasses
import time

from bench import _common
from lakelog.coordinator.compaction.internal_compaction import compact_internal_logs
from lakelog.coordinator.group import CurrentRecord, MemberRecord, OffsetRecord
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.coordinator.runtime import state_log
from lakelog.log.partition_file import partition_files

TARGET = 2.0
GROUPS = 5
PARTITIONS = 4
SHORT = 100
LONG = 10_100
LONG_FULL = 100_100
BATCH = 1_000
ROUNDS = 7
BROKER = {"offsets.topic.num.partitions": 1}


@dataclasses.dataclass(frozen=True)
class _Records:
    records: tuple


def churn(records: int) -> list:
    """`records` records: per member a join, an assignment, an offset commit and a leave, over GROUPS groups."""
    now = int(time.time() * 1000)
    out: list = []
    member = 0
    while len(out) < records:
        group_id, member_id = f"group-{member % GROUPS}", f"member-{member}"
        tp = ("orders", member % PARTITIONS)
        joined = MemberRecord(group_id, member_id, None, ("orders",), 45_000, 300_000, now)
        out += [
            joined,
            CurrentRecord(group_id, member_id, 1, 0, 0, frozenset({tp}), frozenset(), {}),
            OffsetRecord(group_id, tp[0], tp[1], member, "", now),
            dataclasses.replace(joined, removed=True),
        ]
        member += 1
    return out[:records]


def write_churn(root: str, records: int) -> None:
    coordinator = GroupCoordinator(root, broker_config=BROKER)
    log = coordinator._log(0)
    rows = churn(records)
    for start in range(0, len(rows), BATCH):
        log.run(lambda state, batch=tuple(rows[start : start + BATCH]): _Records(batch))


def rows_of(root: str) -> int:
    log = GroupCoordinator(root, broker_config=BROKER)._log(0).log
    log.refresh()
    return sum(entry.num_records for entry in partition_files(log.table))


def cold_list(root: str) -> float:
    began = time.perf_counter()
    groups = GroupCoordinator(root, broker_config=BROKER).list_groups()
    elapsed = time.perf_counter() - began
    assert len(groups) == GROUPS, groups
    return elapsed


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("internal_compaction")
    long = LONG if quick else LONG_FULL
    print(
        f"== internal_compaction: a cold group coordinator on a compacted __consumer_offsets of {SHORT:,} vs {long:,} records of churn"
    )
    # Snapshots off: the cold replay reads the log itself, which is what compaction bounds.
    state_log.SNAPSHOT_EVERY_RECORDS = 0
    with _common.temp_root(root_parent, keep) as short_root, _common.temp_root(root_parent, keep) as long_root:
        started = time.perf_counter()
        write_churn(short_root, SHORT)
        write_churn(long_root, long)
        print(f"   churn written in {time.perf_counter() - started:.0f} s")
        uncompacted = [cold_list(long_root)]
        before = {"short": rows_of(short_root), "long": rows_of(long_root)}
        began = time.perf_counter()
        for root in (short_root, long_root):
            compact_internal_logs(root)
        print(f"   compacted in {time.perf_counter() - began:.1f} s")
        after = {"short": rows_of(short_root), "long": rows_of(long_root)}
        times: dict[str, list[float]] = {"short": [], "long": []}
        for round_number in range(ROUNDS + 1):
            for name, root in (("short", short_root), ("long", long_root)):
                elapsed = cold_list(root)
                if round_number:  # the first round warms the file cache
                    times[name].append(elapsed)
        _common.print_table(
            ["log", "rows before", "rows after", "cold list_groups p50 ms"],
            [[name, before[name], after[name], f"{_common.median(times[name]) * 1000:.1f}"] for name in ("short", "long")],
        )
        print(f"   long log before compaction: cold list_groups {_common.median(uncompacted) * 1000:.1f} ms")
        ratio = _common.median(times["long"]) / _common.median(times["short"])
        result.add(f"internal_compaction cold load p50 {long:,}/{SHORT:,} records of churn", ratio, TARGET)
        result.add("internal_compaction rows kept / written (long)", after["long"] / before["long"])
    return result


if __name__ == "__main__":
    options = _common.parser(__doc__.splitlines()[0]).parse_args()
    run(options.quick, options.root, options.keep)
