"""A bulk load spread over a topic's partitions by key resumes after a kill as a one-partition load does (S2.4):
each partition's share carries on from the log, and every row lands once, in source order within its partition."""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lakelog import config
from lakelog.client.partitioner import partition_for
from lakelog.log import create_topic, open_partition
from processes import workers

pytestmark = pytest.mark.slow

PARTITIONS = 3
ROWS = 240
BATCH = 10


def shares(rows: list[dict]) -> dict[int, list[dict]]:
    partitioner = config.load("producer")["partitioner"]
    found: dict[int, list[dict]] = {p: [] for p in range(PARTITIONS)}
    for row in rows:
        found[partition_for(row["key"].encode(), PARTITIONS, partitioner)].append(row)
    return found


def stored(root: str, partition: int) -> list[dict]:
    log = open_partition(root, "spread", partition)
    fetched = log.fetch(0, 1 << 30, 1 << 30, "read_uncommitted")
    return [json.loads(value) for value in fetched.rows.column("value").to_pylist()]


def killed_at(root: str, source: Path, occurrence: int) -> tuple[int | None, tuple | None]:
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(
        target=workers.keyed_load_killed_at, args=(root, "spread", str(source), BATCH, occurrence, send), daemon=True
    )
    process.start()
    send.close()
    process.join(120)
    assert not process.is_alive(), "the load to be killed did not end in 120 s"
    return process.exitcode, receive.recv() if receive.poll() else None


def cli_load(root: str, source: Path) -> dict:
    argv = ["load", "--topic", "spread", str(source), "--key-column", "key", "--batch-records", str(BATCH)]
    done = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", *argv, "--no-progress", "--root", root], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_S2_4_a_keyed_load_killed_twice_resumes_each_partition_and_lands_every_row_once(tmp_path):
    root = str(tmp_path / "lake")
    create_topic(root, "spread", PARTITIONS, None)
    rows = [{"key": f"c{n % 13}", "n": n} for n in range(ROWS)]
    source = tmp_path / "orders.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    expected = shares(rows)
    assert all(len(share) > BATCH for share in expected.values())

    landed = 0
    for occurrence in (7, 5):
        code, report = killed_at(root, source, occurrence)
        assert (code, report) == (-signal.SIGKILL, ("killing", occurrence))
        now = {p: stored(root, p) for p in range(PARTITIONS)}
        for partition, got in now.items():
            assert got == expected[partition][: len(got)], partition  # a prefix of its share, none twice
        assert sum(map(len, now.values())) > landed  # the run after a kill carried on
        landed = sum(map(len, now.values()))
    assert 0 < landed < ROWS

    finished = cli_load(root, source)
    assert (finished["total_rows"], finished["resumed_from_row"]) == (ROWS, landed)
    assert finished["appended_by_this_run"] == ROWS - landed
    assert {p: stored(root, p) for p in range(PARTITIONS)} == expected
    again = cli_load(root, source)
    assert (again["appended_by_this_run"], again["load_id"]) == (0, finished["load_id"])
    assert {p: stored(root, p) for p in range(PARTITIONS)} == expected


def test_S2_4_a_keyed_load_resumed_after_partitions_were_added_keeps_the_spread_it_began_with(tmp_path):
    """Keys hash over the new count once a topic grows; a load begun before keeps its first spread, so the rows its
    killed run appended are not appended again to other partitions, and the new partitions get none of it."""
    from lakelog.log.topic_changes import create_partitions

    root = str(tmp_path / "lake")
    create_topic(root, "spread", PARTITIONS, None)
    rows = [{"key": f"c{n % 13}", "n": n} for n in range(ROWS)]
    source = tmp_path / "orders.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, report = killed_at(root, source, 6)
    assert (code, report) == (-signal.SIGKILL, ("killing", 6))
    create_partitions(root, "spread", PARTITIONS + 2)
    finished = cli_load(root, source)
    assert finished["total_rows"] == ROWS and 0 < finished["resumed_from_row"] < ROWS
    assert {p: stored(root, p) for p in range(PARTITIONS)} == shares(rows)
    assert stored(root, PARTITIONS) == [] and stored(root, PARTITIONS + 1) == []
