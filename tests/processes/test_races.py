"""Races between real processes on one partition: concurrent appends, conditional publish, bulk loads killed.

Processes are started with multiprocessing's "spawn" context (workers.py) or as
`python -m lakelog.cli` subprocesses, so nothing is shared but the root. Every
test runs on a local folder and on an S3 prefix of the session's emulator
(S12.1): workers get the root's URI and reach the emulator through the AWS_*
environment they inherit. A commit on the emulator costs several times what it
costs on a local folder (50-250 ms against about 10 ms), so the s3 runs do the
same races at a smaller scale (`SCALE`). Random choices come from one seeded generator; the seed is printed
(and set with $LAKELOG_TEST_SEED to replay a run). A killed load dies at a named kill point
(workers.LOAD_KILL_POINTS), never after a sleep, so where it dies does not depend on the machine's speed.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue as queue_module
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelog.log import create_topic, open_partition
from lakelog.store import Location
from processes import workers

pytestmark = [pytest.mark.slow, pytest.mark.roots("local", "s3")]

REPO = Path(__file__).resolve().parents[2]
WORKERS = 4
LOAD_BATCH = 2_000
CHECKPOINT_INTERVAL = 4  # checkpoint.interval.commits of the killed load's topic


@dataclass(frozen=True)
class Scale:
    """How much each test does on one kind of root."""

    batches: int  # per appending worker
    rounds: int  # of the expected-offset race
    create_rounds: int  # of the topic-creation race
    load_rows: int  # of the bulk-load source
    max_kills: int  # of the killed bulk load
    kill_within_batches: int  # a killed run dies within its first this many batches


SCALE = {
    "local": Scale(batches=40, rounds=8, create_rounds=12, load_rows=60_000, max_kills=7, kill_within_batches=6),
    # 15 load batches: five kills within 1-3 batches each still leave the finishing run something to do.
    "s3": Scale(batches=8, rounds=5, create_rounds=6, load_rows=30_000, max_kills=5, kill_within_batches=3),
}


@pytest.fixture
def scale(root_kind: str) -> Scale:
    return SCALE[root_kind]


def all_rows(root: str, topic: str, partition: int = 0) -> list[dict]:
    """Every row of the partition in offset order, read on the latest snapshot."""
    log = open_partition(root, topic, partition)
    rows: list[dict] = []
    offset = 0
    while offset < log.log_end_offset():
        fetched = log.fetch(offset, max_records=1_000_000, max_bytes=1 << 30)
        rows.extend(fetched.rows.to_pylist())
        offset = fetched.next_offset
    return rows


def run_processes(jobs: list[tuple], timeout_s: float = 120) -> list[tuple]:
    """Run each `(target, *args)` in its own spawned process with a shared barrier and report queue
    (appended to its arguments); return every report but the final "done" ones."""
    context = multiprocessing.get_context("spawn")
    count = len(jobs)
    barrier = context.Barrier(count)
    reports = context.Queue()
    processes = [context.Process(target=target, args=(*args, barrier, reports), daemon=True) for target, *args in jobs]
    for process in processes:
        process.start()
    collected: list[tuple] = []
    finished = 0
    deadline = time.monotonic() + timeout_s
    try:
        while finished < count:
            try:
                report = reports.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue_module.Empty:
                raise AssertionError(f"workers did not finish within {timeout_s} s; got {collected[-5:]}") from None
            if report[0] == "crashed":
                raise AssertionError(f"worker {report[1]} crashed:\n{report[2]}")
            if report[0] == "done":
                finished += 1
            else:
                collected.append(report)
        for process in processes:
            process.join(30)
            assert process.exitcode == 0
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(5)
    return collected


# -- (a) concurrent appends -------------------------------------------------------------------


def check_dense_and_exactly_once(rows: list[dict], batches: int, records: int) -> None:
    """S1.1 dense offsets; S1.2 each batch's rows adjacent and in order; every payload exactly once."""
    total = WORKERS * batches * records
    assert [row["offset"] for row in rows] == list(range(total))
    counts = Counter(row["value"] for row in rows)
    expected = {workers.payload_value(w, b, r) for w in range(WORKERS) for b in range(batches) for r in range(records)}
    assert set(counts) == expected, f"lost: {sorted(expected - set(counts))[:5]}, foreign: {sorted(set(counts) - expected)[:5]}"
    assert [value for value, seen in counts.items() if seen != 1] == []
    for start in range(0, total, records):
        batch = [row["value"] for row in rows[start : start + records]]
        assert batch == [batch[0][:-1] + str(r).encode() for r in range(records)], f"batch split at offset {start}"
    by_worker = defaultdict(list)
    for row in rows[::records]:
        by_worker[row["value"][:3]].append(row["value"])
    for values in by_worker.values():
        assert values == sorted(values), "a worker's batches landed out of its own order"


def test_S1_1_S1_2_four_processes_append_to_one_partition_dense_and_exactly_once(root, scale):
    """A fifth process reads the partition throughout and only ever sees dense prefixes of whole batches."""
    # No compaction of the small files: every version of the log is then one append.
    create_topic(root, "race", 1, {"segment.files": 100_000})
    batches, records = scale.batches, 3
    total = WORKERS * batches * records
    reports = run_processes(
        [(workers.append_batches, root, "race", worker, batches, records) for worker in range(WORKERS)]
        + [(workers.check_snapshots_while_writing, root, "race", WORKERS, total, records)]
    )
    rows = all_rows(root, "race")
    check_dense_and_exactly_once(rows, batches, records)
    snapshots = [r for r in reports if r[0] == "snapshots"]
    print(f"the reader saw {snapshots[0][2]} distinct snapshots")
    assert snapshots[0][2] >= 2  # it did read while the log grew
    # Every AppendResult told the truth about where its batch landed.
    appended = [r for r in reports if r[0] == "appended"]
    assert len(appended) == WORKERS * batches
    for _, worker, batch, base, last in appended:
        assert last - base == records - 1
        assert [row["value"] for row in rows[base : last + 1]] == [
            workers.payload_value(worker, batch, r) for r in range(records)
        ]
    assert open_partition(root, "race", 0).version == WORKERS * batches


def test_S1_1_S3_1_four_idempotent_producers_on_one_partition_exactly_once(root, scale):
    """Through Producer: offsets dense, each producer's rows carry its own PID with sequences 0, 1, 2, ...;
    a Consumer reading meanwhile gets every message once, in offset order, with the reported offsets."""
    create_topic(root, "race", 1)
    batches, records = scale.batches, 3
    total = WORKERS * batches * records
    reports = run_processes(
        [(workers.produce_batches, root, "race", worker, batches, records) for worker in range(WORKERS)]
        + [(workers.consume_while_producing, root, "race", WORKERS, total, records)]
    )
    rows = all_rows(root, "race")
    check_dense_and_exactly_once(rows, batches, records)
    delivered = sorted((r[2], r[3]) for r in reports if r[0] == "delivered")
    assert delivered == sorted((row["value"], row["offset"]) for row in rows)
    [consumed] = [r[2] for r in reports if r[0] == "consumed"]
    assert consumed == [(row["offset"], row["value"]) for row in rows]
    sequences = defaultdict(list)
    owner = {}
    for row in rows:
        sequences[row["producer_id"]].append(row["sequence"])
        owner.setdefault(row["producer_id"], row["value"][:3])
        assert owner[row["producer_id"]] == row["value"][:3], "one PID wrote for two producers"
    assert len(sequences) == WORKERS
    assert all(seqs == list(range(batches * records)) for seqs in sequences.values())


# -- (b) conditional publish races ------------------------------------------------------------


def test_S2_2_writers_racing_at_one_expected_offset_exactly_one_wins(root, scale):
    create_topic(root, "race", 1)
    rounds, records = scale.rounds, 2
    reports = run_processes(
        [(workers.race_at_expected_offset, root, "race", worker, rounds, records) for worker in range(WORKERS)]
    )
    by_round = defaultdict(list)
    for report in reports:
        by_round[report[2]].append(report)
    winners = {}
    for round_ in range(rounds):
        outcomes = by_round[round_]
        assert len(outcomes) == WORKERS
        won = [r for r in outcomes if r[0] == "won"]
        assert len(won) == 1, f"round {round_}: {len(won)} winners"
        _, winner, _, base, last = won[0]
        assert (base, last) == (round_ * records, round_ * records + records - 1)
        winners[round_] = winner
        for _, _, _, expected, log_end_offset, resent in (r for r in outcomes if r[0] == "mismatch"):
            assert expected == round_ * records
            assert log_end_offset == (round_ + 1) * records  # the real LEO, after the winner's batch
            assert resent == (round_ + 1) * records  # re-sending never lands it
    rows = all_rows(root, "race")
    assert [row["offset"] for row in rows] == list(range(rounds * records))
    assert [row["value"] for row in rows] == [
        workers.payload_value(winners[round_], round_, r) for round_ in range(rounds) for r in range(records)
    ]
    assert open_partition(root, "race", 0).version == rounds


def test_processes_racing_to_create_one_topic_exactly_one_wins(root, scale):
    """One creation wins each race; the others get TOPIC_ALREADY_EXISTS; the topic's partitions are
    single version-0 tables holding the winner's config (S8.3: the refused creations changed nothing)."""
    rounds, partitions = scale.create_rounds, 2
    reports = run_processes([(workers.create_same_topic, root, worker, rounds, partitions) for worker in range(WORKERS)])
    outcomes = defaultdict(dict)
    for _, worker, round_, error in reports:
        outcomes[round_][worker] = error
    for round_ in range(rounds):
        winners = [worker for worker, error in outcomes[round_].items() if error is None]
        refused = sorted(error for error in outcomes[round_].values() if error is not None)
        assert len(winners) == 1, f"round {round_}: {outcomes[round_]}"
        assert refused == ["TOPIC_ALREADY_EXISTS"] * (WORKERS - 1)
        for partition in range(partitions):
            log = open_partition(root, f"contested-{round_}", partition)
            assert log.version == 0, f"round {round_} partition {partition} has {log.version + 1} commits"
            assert log.config.values["segment.files"] == 10 + winners[0]


# -- (c), (d) bulk loads killed and doubled ----------------------------------------------------


@pytest.fixture
def source(tmp_path, rng, scale) -> tuple[Path, list[dict]]:
    """The load's source: a local Parquet file (not under the root; `lakelog load` reads any URI)."""
    rows = [{"id": i, "payload": f"row-{i}-{rng.randrange(10**12):012d}"} for i in range(scale.load_rows)]
    path = tmp_path / "source.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=7_000)
    return path, rows


def start_load(root: str, topic: str, path: Path, batch_records: int = LOAD_BATCH) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lakelog.cli",
            "load",
            "--topic",
            topic,
            str(path),
            "--batch-records",
            str(batch_records),
            "--no-progress",
            "--root",
            root,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={key: value for key, value in os.environ.items() if key != "LAKELOG_ROOT"},
    )


def commits(root: str, topic: str) -> int:
    """Commits so far: the newest version + 1 (log cleanup deletes old commit files, so counting them stalls)."""
    delta_log = Location.of(root) / "topics" / topic / "0" / "_delta_log"
    names = [entry.name.removesuffix(".json") for entry in delta_log.list() if entry.name.endswith(".json")]
    versions = [int(name) for name in names if name.isdigit()]
    return max(versions) + 1 if versions else 0


def check_prefix_of_source(root: str, topic: str, source_rows: list[dict]) -> int:
    """S2.4 at any moment: the partition holds source rows 0..LEO-1, in order, no gaps, whole batches; returns LEO."""
    rows = all_rows(root, topic)
    assert [row["offset"] for row in rows] == list(range(len(rows)))
    assert [json.loads(row["value"]) for row in rows] == source_rows[: len(rows)]
    return len(rows)


def kill_plan(rng, scale: Scale, attempt: int, done: int, total: int) -> tuple[str, int] | None:
    """Where run `attempt` of a load that has `done` of its `total` batches dies: a kill point and the how-manieth
    time it is reached. Every plan but the first run's early one dies mid-load (some batch committed, not the
    last), by construction; None when too little is left for that."""
    remaining = total - done
    if remaining < 2:
        return None
    if attempt == 0 and rng.random() < 0.25:
        return workers.LOAD_FILE_WRITTEN, 1  # its first file written, nothing committed yet
    choices = [workers.LOAD_COMMITTED, workers.LOAD_FILE_WRITTEN]
    if remaining > CHECKPOINT_INTERVAL:
        choices.append(workers.LOAD_CHECKPOINT_DUE)  # within the next CHECKPOINT_INTERVAL commits, not the last
    point = rng.choice(choices)
    if point == workers.LOAD_CHECKPOINT_DUE:
        return point, 1
    if point == workers.LOAD_COMMITTED:
        return point, rng.randint(1, min(scale.kill_within_batches, remaining - 1))
    return point, rng.randint(2 if done == 0 else 1, min(scale.kill_within_batches, remaining))


def load_killed_at(root: str, topic: str, path: Path, point: str, occurrence: int) -> tuple[int | None, tuple | None]:
    """Run the load in a spawned process that SIGKILLs itself at the kill point; its exit code and last report."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(
        target=workers.load_killed_at, args=(root, topic, str(path), LOAD_BATCH, point, occurrence, send), daemon=True
    )
    process.start()
    send.close()
    process.join(120)
    if process.is_alive():
        process.kill()
        process.join(5)
        raise AssertionError(f"the load to be killed at {point} #{occurrence} did not end in 120 s")
    report = receive.recv() if receive.poll() else None
    return process.exitcode, report


def test_S2_4_bulk_load_killed_at_named_points_and_restarted_appends_every_row_once(root, source, rng, scale):
    """Each run dies at a kill point: with a batch's file written but not committed, with its commit in the log
    but the loader not told, or with a checkpoint due but not written; the next run carries on from the log
    alone (S2.4), and the finishing run appends exactly what is left."""
    path, source_rows = source
    # Checkpoints every CHECKPOINT_INTERVAL commits, so kills also land around checkpoint writes.
    create_topic(root, "bulk", 1, {"check.expected.offsets": True, "checkpoint.interval.commits": CHECKPOINT_INTERVAL})
    load_rows = scale.load_rows
    total = -(-load_rows // LOAD_BATCH)
    history = []
    leo = 0
    for attempt in range(scale.max_kills):
        done = leo // LOAD_BATCH
        plan = kill_plan(rng, scale, attempt, done, total)
        if plan is None:
            break
        code, report = load_killed_at(root, "bulk", path, *plan)
        assert (code, report) == (-signal.SIGKILL, ("killing", *plan)), f"{plan} after {done} batches: {code} {report}"
        leo = check_prefix_of_source(root, "bulk", source_rows)
        assert leo % LOAD_BATCH == 0, f"a batch was split (S1.2): LEO {leo}"
        point, occurrence = plan
        if point == workers.LOAD_COMMITTED:
            assert leo == (done + occurrence) * LOAD_BATCH  # the batch the loader never heard of is in
        elif point == workers.LOAD_FILE_WRITTEN:
            assert leo == (done + occurrence - 1) * LOAD_BATCH  # the written, uncommitted file is not
        else:
            assert done * LOAD_BATCH < leo <= (done + CHECKPOINT_INTERVAL) * LOAD_BATCH
        history.append((plan, leo))
    print(f"kills (plan, LEO after): {history}")
    partial = [leo for _, leo in history if 0 < leo < load_rows]
    assert len(partial) >= 2, f"too few kills landed mid-load to prove anything: {history}"

    # The finishing run starts where the last kill left the log.
    resumed_at = history[-1][1]
    assert check_prefix_of_source(root, "bulk", source_rows) == resumed_at
    finished = start_load(root, "bulk", path)
    out, err = finished.communicate(timeout=120)
    assert finished.returncode == 0, err
    result = json.loads(out)
    assert (result["start_offset"], result["end_offset"], result["total_rows"]) == (0, load_rows, load_rows)
    assert result["resumed_from_row"] == resumed_at
    assert result["appended_by_this_run"] == load_rows - resumed_at

    assert check_prefix_of_source(root, "bulk", source_rows) == load_rows
    # A run after completion appends nothing.
    again = start_load(root, "bulk", path)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out)["appended_by_this_run"] == 0
    assert open_partition(root, "bulk", 0).log_end_offset() == load_rows


@pytest.mark.parametrize("batch_sizes", [(LOAD_BATCH, LOAD_BATCH), (LOAD_BATCH, 3_000)], ids=["same batches", "other batches"])
def test_S2_4_two_instances_of_one_load_at_once_append_every_row_once(root, source, batch_sizes, scale):
    path, source_rows = source
    create_topic(root, "bulk", 1)
    processes = [start_load(root, "bulk", path, size) for size in batch_sizes]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    print(f"results: {results}")
    assert len({r["load_id"] for r in results}) == 1
    assert all((r["start_offset"], r["end_offset"]) == (0, scale.load_rows) for r in results)
    assert sum(r["appended_by_this_run"] for r in results) == scale.load_rows
    assert check_prefix_of_source(root, "bulk", source_rows) == scale.load_rows
