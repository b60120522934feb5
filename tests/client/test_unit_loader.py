"""Loading a unit of source files exactly once (lakelog/jobs/unit_load.py), on local and S3 roots.

What Airflow's repeats come down to, without Airflow: the same unit loaded
again (a retry, a clear, a reprocess backfill), an attempt that died halfway, an
attempt fenced by a newer one, two attempts of one unit racing in real
processes, and bad input refused before anything is written (S2.4, S4.1, S4.2, S8.3).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from collections import Counter

import pyarrow as pa
import pytest
from helpers import table_fingerprint

from lakelog.coordinator.transaction import partition_for_transactional_id
from lakelog.errors import InvalidRequest, KafkaTimeout, ProducerFenced, PurgeQueue, UnknownTopicOrPartition
from lakelog.jobs import batch_writer
from lakelog.jobs.batch_writer import SINK_BATCHES_PARTITIONS, TransactionalBatchWriter
from lakelog.jobs.unit_load import load_unit, unit_transactional_id
from lakelog.log import READ_COMMITTED, READ_UNCOMMITTED, open_partition, payload_table
from lakelog.store import Location

pytestmark = pytest.mark.roots("local", "s3")
PARTITIONS = 3


def write_parquet(where: Location, name: str, ids: list[str]) -> str:
    target = where / name
    where.io.write_parquet(pa.table({"id": ids, "amount": list(range(len(ids)))}), target.uri)
    return target.uri


@pytest.fixture
def sources(lake) -> Location:
    """A folder of source files next to the root: on the same store, as users keep landing zones."""
    folder = Location.of(lake.rstrip("/") + "-landing")
    folder.io.make_dirs(folder.uri)
    return folder


def committed_ids(root: str, topic: str) -> Counter:
    ids: Counter = Counter()
    for partition in range(PARTITIONS):
        rows = open_partition(root, topic, partition).fetch(0, max_records=1_000_000, isolation_level=READ_COMMITTED).rows
        ids.update(json.loads(value)["id"] for value in rows.column("value").to_pylist())
    return ids


def test_S2_4_a_unit_loads_once_and_a_repeat_appends_nothing_and_says_where_it_is(lake, make_topic, sources):
    topic = make_topic(partitions=PARTITIONS)
    ids = [f"a{i}" for i in range(300)]
    write_parquet(sources, "day-1.parquet", ids[:100])
    write_parquet(sources, "day-2.parquet", ids[100:])

    first = load_unit(lake, topic, (sources / "day-*.parquet").uri, "daily.2026-01-01", key_column="id", batch_records=40)
    assert first.loaded and first.rows == 300
    assert sorted(first.files) == [(sources / "day-1.parquet").uri, (sources / "day-2.parquet").uri]
    before = table_fingerprint(lake)
    again = load_unit(lake, topic, (sources / "day-*.parquet").uri, "daily.2026-01-01", key_column="id")
    assert not again.loaded
    assert (again.rows, dict(again.offsets)) == (300, dict(first.offsets))
    assert table_fingerprint(lake) == before  # not even an epoch bump (S8.3)
    assert committed_ids(lake, topic) == Counter(dict.fromkeys(ids, 1))
    # Keyed rows land where the Producer would put them: every key in one partition.
    where = {}
    for partition in range(PARTITIONS):
        rows = open_partition(lake, topic, partition).fetch(0, max_records=1000, isolation_level=READ_COMMITTED).rows
        for value in rows.column("value").to_pylist():
            where.setdefault(json.loads(value)["id"], set()).add(partition)
    assert all(len(partitions) == 1 for partitions in where.values())
    assert set(first.as_dict()) == {"topic", "unit", "loaded", "rows", "offsets"}


def test_csv_and_json_lines_sources_load_with_their_keys(lake, make_topic, sources):
    topic = make_topic(partitions=PARTITIONS)
    sources.io.write((sources / "a.csv").uri, b"id,amount\ne1,1\ne2,2\n")
    sources.io.write((sources / "b.jsonl").uri, b'{"id": "e3", "amount": 3}\n\n{"id": "e4", "amount": 4}\n')
    result = load_unit(lake, topic, [(sources / "a.csv").uri, (sources / "b.jsonl").uri], "mixed", key_column="id")
    assert result.loaded and result.rows == 4
    assert committed_ids(lake, topic) == Counter({"e1": 1, "e2": 1, "e3": 1, "e4": 1})
    keys = set()
    for partition in range(PARTITIONS):
        rows = open_partition(lake, topic, partition).fetch(0, max_records=100, isolation_level=READ_COMMITTED).rows
        keys.update(rows.column("key").to_pylist())
    assert keys == {b"e1", b"e2", b"e3", b"e4"}


def test_S4_2_an_attempt_that_died_halfway_is_aborted_and_the_next_loads_the_unit_once(lake, make_topic, sources):
    topic = make_topic(partitions=PARTITIONS)
    source = write_parquet(sources, "day.parquet", [f"b{i}" for i in range(200)])
    asked = {"n": 0}

    def die_at_the_third_batch() -> bool:
        asked["n"] += 1
        if asked["n"] == 3:
            raise KeyboardInterrupt("the worker died")  # not an Exception: nothing in the loader catches it
        return False

    with pytest.raises(KeyboardInterrupt):
        load_unit(lake, topic, source, "u", key_column="id", batch_records=50, should_stop=die_at_the_third_batch)
    assert sum(open_partition(lake, topic, p).high_watermark() for p in range(PARTITIONS)) > 0
    assert committed_ids(lake, topic) == Counter()

    result = load_unit(lake, topic, source, "u", key_column="id", batch_records=50)
    assert result.loaded and result.rows == 200
    assert committed_ids(lake, topic) == Counter({f"b{i}": 1 for i in range(200)})


def test_S4_1_an_attempt_fenced_by_a_newer_one_commits_nothing(lake, make_topic, sources):
    topic = make_topic(partitions=PARTITIONS)
    source = write_parquet(sources, "day.parquet", [f"c{i}" for i in range(200)])
    fenced = {"done": False}

    def newer_attempt_takes_over() -> bool:
        if not fenced["done"]:
            fenced["done"] = True
            # The retry of a stalled attempt: it fences the old one and loads the unit.
            assert load_unit(lake, topic, source, "u", key_column="id").loaded
        return False

    with pytest.raises(ProducerFenced):
        load_unit(lake, topic, source, "u", key_column="id", batch_records=50, should_stop=newer_attempt_takes_over)
    assert committed_ids(lake, topic) == Counter({f"c{i}": 1 for i in range(200)})


def test_a_load_told_to_stop_aborts_its_transaction(lake, make_topic, sources):
    topic = make_topic(partitions=PARTITIONS)
    source = write_parquet(sources, "day.parquet", [f"d{i}" for i in range(100)])
    calls = {"n": 0}

    def stop_at_the_second_batch() -> bool:
        calls["n"] += 1
        return calls["n"] >= 2

    with pytest.raises(PurgeQueue):
        load_unit(lake, topic, source, "u", batch_records=50, should_stop=stop_at_the_second_batch)
    assert committed_ids(lake, topic) == Counter()
    for partition in range(PARTITIONS):
        log = open_partition(lake, topic, partition)
        assert log.last_stable_offset() == log.high_watermark()  # aborted, not left hanging
    assert load_unit(lake, topic, source, "u").loaded


@pytest.mark.parametrize("record_timeout_s", [60.0, 0.0], ids=["decides-again", "past-the-deadline"])
def test_S2_1_a_batch_record_that_loses_its_offset_decides_again_or_times_out(
    lake, make_topic, monkeypatch, caplog, record_timeout_s
):
    """Another id's batch record takes the `__sink_batches` offset this batch's record expected (S2.1). The record
    decides again on the snapshot the refusal was checked on; past its deadline the batch gives up with KafkaTimeout,
    logged, and its transaction is aborted (S4.2), so a retry of the batch writes it once."""
    topic = make_topic(partitions=1)
    mine = "sink-mine"
    home = partition_for_transactional_id(mine, SINK_BATCHES_PARTITIONS)
    other = next(
        f"sink-{i}" for i in range(10_000) if partition_for_transactional_id(f"sink-{i}", SINK_BATCHES_PARTITIONS) == home
    )
    monkeypatch.setattr(batch_writer, "RECORD_TIMEOUT_S", record_timeout_s)
    writer, rival = TransactionalBatchWriter(lake, mine), TransactionalBatchWriter(lake, other)

    def rows():
        # Mid-batch, after the writer read its record's partition: the rival's record takes the offset it expects.
        assert not rival.write({(topic, 0): [payload_table([b"rival"])]}, batch_id=0).skipped
        yield (topic, 0), payload_table([b"mine"])

    def committed_values():
        fetched = open_partition(lake, topic, 0).fetch(0, max_records=100, isolation_level=READ_COMMITTED).rows
        return sorted(fetched.column("value").to_pylist())

    if record_timeout_s:
        assert not writer.write_stream([(topic, 0)], rows(), batch_id=0).skipped
    else:
        with pytest.raises(KafkaTimeout, match="its record lost its offset past the deadline"):
            writer.write_stream([(topic, 0)], rows(), batch_id=0)
        assert "giving up" in caplog.text
        assert committed_values() == [b"rival"] and writer.committed_batch() is None
        assert not writer.write({(topic, 0): [payload_table([b"mine"])]}, batch_id=0).skipped
    assert committed_values() == [b"mine", b"rival"]
    assert (writer.last_committed_batch(), rival.last_committed_batch()) == (0, 0)


@pytest.mark.parametrize(
    "case",
    ["no file matches", "not parquet", "missing topic", "missing key column", "not JSON lines", "unknown format"],
)
def test_S8_3_bad_input_is_refused_before_anything_is_written(lake, make_topic, sources, case):
    topic = make_topic(partitions=PARTITIONS)
    good = write_parquet(sources, "good.parquet", ["x"])
    sources.io.write((sources / "bad.parquet").uri, b"id,amount\n1,2\n")
    sources.io.write((sources / "bad.jsonl").uri, b"this is not json\n")
    sources.io.write((sources / "rows.txt").uri, b"1\n")
    before = table_fingerprint(lake)
    calls = {
        "no file matches": (
            lambda: load_unit(lake, topic, (sources / "nothing-*.parquet").uri, "u"),
            InvalidRequest,
            "matches no file",
        ),
        "not parquet": (
            lambda: load_unit(lake, topic, (sources / "bad.parquet").uri, "u"),
            InvalidRequest,
            "cannot be read as parquet",
        ),
        "missing topic": (lambda: load_unit(lake, "absent", good, "u"), UnknownTopicOrPartition, "does not exist"),
        "missing key column": (lambda: load_unit(lake, topic, good, "u", key_column="nope"), InvalidRequest, "key column 'nope'"),
        "not JSON lines": (
            lambda: load_unit(lake, topic, (sources / "bad.jsonl").uri, "u"),
            InvalidRequest,
            "cannot be read as jsonl",
        ),
        "unknown format": (
            lambda: load_unit(lake, topic, (sources / "rows.txt").uri, "u"),
            InvalidRequest,
            "cannot tell the format",
        ),
    }
    call, error, words = calls[case]
    with pytest.raises(error, match=words) as raised:
        call()
    assert "\n" not in str(raised.value)
    assert table_fingerprint(lake) == before


def _race(root: str, topic: str, source: str, start: multiprocessing.Event, results: multiprocessing.Queue) -> None:
    start.wait()
    try:
        result = load_unit(root, topic, source, "raced", key_column="id", batch_records=25)
        results.put(("loaded" if result.loaded else "skipped", result.rows))
    except ProducerFenced:
        results.put(("fenced", 0))


@pytest.mark.slow
def test_S4_1_two_processes_racing_on_one_unit_load_it_once(lake, make_topic, sources):
    topic = make_topic(partitions=PARTITIONS)
    ids = [f"r{i}" for i in range(150)]
    source = write_parquet(sources, "day.parquet", ids)
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_race, args=(lake, topic, source, start, results)) for _ in range(3)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(180)
        assert worker.exitcode == 0
    outcomes = Counter(results.get(timeout=5)[0] for _ in workers)
    # The racer whose init_producer_id came last is fenced by no one: it loads the unit, or finds it loaded by a
    # racer whose commit was decided before that init (a decided commit is finished, not fenced, and reported
    # loaded). So exactly one racer loads, whatever the interleaving; the others are fenced or skip.
    assert outcomes["loaded"] == 1 and sum(outcomes.values()) == len(workers), outcomes
    assert committed_ids(lake, topic) == Counter(dict.fromkeys(ids, 1))
    # The next attempt finds the unit loaded: it reports where the rows are and appends nothing (S2.4).
    again = load_unit(lake, topic, source, "raced", key_column="id")
    assert (again.loaded, again.rows) == (False, len(ids))
    assert committed_ids(lake, topic) == Counter(dict.fromkeys(ids, 1))


def _load_and_get_killed(root: str, topic: str, source: str) -> None:
    calls = {"n": 0}

    def kill_at_the_fourth_batch() -> bool:
        calls["n"] += 1
        if calls["n"] == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        return False

    load_unit(root, topic, source, "killed", batch_records=20, should_stop=kill_at_the_fourth_batch)


@pytest.mark.slow
def test_S4_2_a_process_killed_mid_load_leaves_nothing_visible_and_the_rerun_loads_once(lake, make_topic, sources):
    topic = make_topic(partitions=PARTITIONS)
    ids = [f"k{i}" for i in range(100)]
    source = write_parquet(sources, "day.parquet", ids)
    worker = multiprocessing.get_context("spawn").Process(target=_load_and_get_killed, args=(lake, topic, source))
    worker.start()
    worker.join(180)
    assert worker.exitcode == -signal.SIGKILL
    written = sum(open_partition(lake, topic, p).high_watermark() for p in range(PARTITIONS))
    assert written == 60  # three batches of 20 reached the log, uncommitted
    assert committed_ids(lake, topic) == Counter()
    assert load_unit(lake, topic, source, "killed").loaded
    assert committed_ids(lake, topic) == Counter(dict.fromkeys(ids, 1))
    # The dead attempt's rows stay in the log as an aborted transaction (S4.2), never read as committed.
    data = 0
    for partition in range(PARTITIONS):
        rows = open_partition(lake, topic, partition).fetch(0, max_records=10_000, isolation_level=READ_UNCOMMITTED).rows
        data += rows.filter(rows.column("control").is_null()).num_rows
    assert data == 160
    assert TransactionalBatchWriter(lake, unit_transactional_id("killed")).last_committed_batch() == 0
