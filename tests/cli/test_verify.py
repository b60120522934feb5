"""`lakelog verify`: a clean root passes, and each kind of damage of issue's findings 1, 2, 4 and 10 is named.

The command is run in-process through `lakelog.cli.main.main`. One clean root is built per module and copied for
each test (through the file IO), then damaged the way a power loss, a bad disk or an operator would.
"""

from __future__ import annotations

import json
import re

import pytest

from lakelog import Consumer, Producer, TopicPartition
from lakelog.cli.main import main
from lakelog.jobs.verify import verify_root
from lakelog.log import BatchHeader, create_topic, open_partition, payload_table
from lakelog.log.partition import LOG_END_OFFSET_APP_ID, wall_clock_ms
from lakelog.log.partition_file import partition_files
from lakelog.log.records import conform_payload, stamp
from lakelog.log.verification import _UNVERIFIED
from lakelog.store import Location, Table
from lakelog.store.delta.actions import TABLE_ID_KEY

TOPIC = "pay"


def build_clean_root(lake: str) -> None:
    """A topic with idempotent and transactional produces, a commit and an abort, and a group's committed offset."""
    create_topic(lake, TOPIC, 2, {"checkpoint.interval.commits": 3})
    idempotent = Producer({"lakelog.root": lake, "enable.idempotence": True})
    for index in range(3):
        idempotent.produce(TOPIC, value=f"v{index}", partition=0)
    idempotent.flush()
    idempotent.close()
    transactional = Producer({"lakelog.root": lake, "transactional.id": "billing"})
    transactional.init_transactions()
    transactional.begin_transaction()
    transactional.produce(TOPIC, value="kept", partition=0)
    transactional.produce(TOPIC, value="kept", partition=1)
    transactional.commit_transaction()
    transactional.begin_transaction()
    transactional.produce(TOPIC, value="dropped", partition=1)
    transactional.flush()
    transactional.abort_transaction()
    transactional.close()
    consumer = Consumer({"lakelog.root": lake, "group.id": "g", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
    consumer.close()


@pytest.fixture(scope="module")
def clean_root(tmp_path_factory) -> Location:
    lake = str(tmp_path_factory.mktemp("clean") / "lake")
    build_clean_root(lake)
    return Location.of(lake)


@pytest.fixture
def lake(clean_root, tmp_path) -> Location:
    """A copy of the clean root, to damage."""
    copy = Location.of(str(tmp_path / "lake"))
    for entry in clean_root.list(recursive=True):
        target = copy.uri + entry.uri[len(clean_root.uri) :]
        if entry.is_dir:
            copy.io.make_dirs(target)
        else:
            copy.io.write(target, clean_root.io.read(entry.uri))
    return copy


def verify(lake: Location, *args: str, capsys) -> tuple[int, str]:
    code = main(["verify", "--root", lake.uri, *args])
    return code, capsys.readouterr().out


def findings(out: str) -> list[list[str]]:
    """The findings section as (table, where, kind, text) rows."""
    if "\nfindings:\n" not in out:
        return []
    section = out.split("\nfindings:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split("\t") for line in section.splitlines() if line.count("\t") >= 3]


def partition_log(lake: Location, partition: int = 0) -> Location:
    return lake / "topics" / TOPIC / str(partition)


def commit_uri(lake: Location, version: int, partition: int = 0) -> str:
    return (partition_log(lake, partition) / "_delta_log" / f"{version:020d}.json").uri


def data_files(lake: Location, partition: int = 0) -> list[tuple[str, int, int]]:
    """(file name, first offset, last offset) of the partition's active files, in offset order."""
    return [
        (entry.path, entry.min_offset, entry.max_offset) for entry in partition_files(Table.open(partition_log(lake, partition)))
    ]


def test_clean_root_exits_0(lake, capsys):
    code, out = verify(lake, "--deep", capsys=capsys)
    assert code == 0, out
    assert out.splitlines()[0] == "partition\tversions\tfiles\toffsets\tLSO\tHW\tstatus"
    rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()[1:] if line.startswith("topics/")}
    assert rows["topics/pay/0"][3:] == ["0-4", "5", "5", "ok"]
    assert rows["topics/pay/1"][3:] == ["0-3", "4", "4", "ok"]
    assert "__transaction_state" in out and "__consumer_offsets" in out
    assert out.rstrip().endswith("clean")


def test_emptied_commit_is_named_with_its_offsets(lake, capsys):
    """Finding 1: a zero-length commit file (a power loss after the link of an unsynced file)."""
    lake.io.write(commit_uri(lake, 3), b"")
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    assert ["topics/pay/0", "version 3", "empty-commit"] == findings(out)[0][:3]
    assert "(offsets lost: 4)" in findings(out)[0][3]
    # In the middle of the log, with the data file it wrote gone too: the next append's first offset bounds the loss.
    lake.io.write(commit_uri(lake, 3, partition=1), b"")
    for entry in partition_log(lake, 1).list():
        if entry.name.startswith(f"part-{3:020d}-"):
            lake.io.delete(entry.uri)
    emptied = [
        row for row in findings(verify(lake, capsys=capsys)[1]) if row[:3] == ["topics/pay/1", "version 3", "empty-commit"]
    ]
    assert "(offsets lost: 2)" in emptied[0][3]


def test_deleted_commit_is_a_hole(lake, capsys):
    """Finding 2: a hole in `_delta_log` is not the end of the log."""
    lake.io.delete(commit_uri(lake, 3, partition=1))
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    hole = [row for row in findings(out) if row[2] == "hole"]
    assert hole and hole[0][:2] == ["topics/pay/1", "version 3"] and "(offsets lost: 2)" in hole[0][3]
    # With the data file the lost commit wrote gone too, the next append's first offset still bounds the loss.
    for entry in partition_log(lake, 1).list():
        if entry.name.startswith(f"part-{3:020d}-"):
            lake.io.delete(entry.uri)
    hole = [row for row in findings(verify(lake, capsys=capsys)[1]) if row[2] == "hole"]
    assert "(offsets lost: 2)" in hole[0][3]


def test_flipped_byte_in_a_data_file_fails_its_checksum_with_deep(lake, capsys):
    """Finding 4: one byte changed inside a stored value."""
    name = data_files(lake)[0][0]
    uri = (partition_log(lake) / name).uri
    data = bytearray(lake.io.read(uri))
    at = data.find(b"v1")
    assert at > 0
    data[at] ^= 0x01
    lake.io.write(uri, bytes(data))
    code, out = verify(lake, "--deep", capsys=capsys)
    assert code == 1
    assert [["topics/pay/0", f"file {name}", "checksum"]] == [row[:3] for row in findings(out)]


def test_data_file_copied_over_another(lake, capsys):
    """Finding 4: a file's bytes copied over another's (an offset twice, the next one gone)."""
    (first, _, _), (second, low, high) = data_files(lake)[:2]
    folder = partition_log(lake)
    lake.io.write((folder / second).uri, lake.io.read((folder / first).uri))
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    named = [row for row in findings(out) if row[1] == f"file {second}"]
    assert named and named[0][2] == "size-mismatch"
    assert f"offsets lost: {low}" + ("" if low == high else f"-{high}") in named[0][3]


def test_missing_data_file_names_its_offsets(lake, capsys):
    name, low, high = data_files(lake)[0]
    lake.io.delete((partition_log(lake) / name).uri)
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    assert findings(out)[0][:3] == ["topics/pay/0", f"file {name}", "missing-file"]
    assert f"offsets lost: {low}-{high}" in findings(out)[0][3]


def test_truncated_checkpoint_is_named_and_repaired(lake, capsys):
    """Finding 10: a truncated checkpoint, whose commits are all there, is rebuilt by --repair."""
    checkpoint = (partition_log(lake) / "_delta_log" / f"{2:020d}.checkpoint.parquet").uri
    data = lake.io.read(checkpoint)
    lake.io.write(checkpoint, data[: len(data) // 2])
    commits_before = {version: lake.io.read(commit_uri(lake, version)) for version in range(4)}
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    kinds = {(row[0], row[1], row[2]) for row in findings(out)}
    assert ("topics/pay/0", "checkpoint 2", "bad-checkpoint") in kinds
    code, out = verify(lake, "--repair", capsys=capsys)
    assert code == 0, out
    assert re.search(r"topics/pay/0\tcheckpoint 2\trepaired\trebuilt from the commits", out)
    assert {version: lake.io.read(commit_uri(lake, version)) for version in range(4)} == commits_before
    assert verify(lake, capsys=capsys)[0] == 0
    assert len(partition_files(Table.open(partition_log(lake)))) == 3


def test_commit_without_commit_info_is_foreign(lake, capsys):
    """Finding 1: a commit without lakelog's commitInfo is not lakelog's."""
    uri = commit_uri(lake, 2)
    lines = [line for line in lake.io.read(uri).splitlines(keepends=True) if b"commitInfo" not in line]
    lake.io.write(uri, b"".join(lines))
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    assert ["topics/pay/0", "version 2", "foreign-commit"] in [row[:3] for row in findings(out)]


def test_transactional_data_with_no_coordinator_record_is_hanging(lake, capsys):
    log = open_partition(lake.uri, TOPIC, 1)
    log.append(payload_table([b"stray"]), BatchHeader(77, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    assert [row[:3] for row in findings(out)] == [["topics/pay/1", "offset 4", "hanging-transaction"]]
    assert "producer id 77" in findings(out)[0][3]


def test_transaction_open_past_its_timeout(lake):
    producer = Producer({"lakelog.root": lake.uri, "transactional.id": "slow", "transaction.timeout.ms": 60_000})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(TOPIC, value="late", partition=0)
    producer.flush()
    assert verify_root(lake.uri).clean
    later = verify_root(lake.uri, now_ms=wall_clock_ms() + 61_000)
    assert [(f.table, f.where, f.kind) for f in later.findings] == [("topics/pay/0", "offset 5", "transaction-timed-out")]
    producer.abort_transaction()
    producer.close()


def test_committed_offset_above_the_high_watermark(lake, capsys):
    consumer = Consumer({"lakelog.root": lake.uri, "group.id": "ahead", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 1, 9)], asynchronous=False)
    consumer.close()
    code, out = verify(lake, "--topic", TOPIC, capsys=capsys)
    assert code == 1
    assert [row[:3] for row in findings(out)] == [["topics/pay/1", "group ahead", "committed-offset-out-of-range"]]


def test_unknown_topic_is_bad_input(lake, capsys):
    assert main(["verify", "--topic", "nope", "--root", lake.uri]) == 2
    assert "UNKNOWN_TOPIC_OR_PART" in capsys.readouterr().err


def test_commit_of_another_table_is_named(lake, capsys):
    """Finding 3: a commit decided on another table of the same name (a deleted topic's late writer)."""
    uri = commit_uri(lake, 3)
    lines = [json.loads(line) for line in lake.io.read(uri).splitlines()]
    for action in lines:
        if "commitInfo" in action:
            action["commitInfo"][TABLE_ID_KEY] = "00000000-0000-0000-0000-000000000000"
    lake.io.write(uri, b"".join(json.dumps(action).encode() + b"\n" for action in lines))
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    assert ["topics/pay/0", "version 3", "other-table-commit"] in [row[:3] for row in findings(out)]


def test_a_deletion_mark_is_a_note(lake, capsys):
    Table.open(partition_log(lake, 1)).mark_deleted()
    code, out = verify(lake, capsys=capsys)
    assert code == 0, out
    assert re.search(r"\ntopics/pay/1\tversion 5\tmarked-deleted\t", out)


@pytest.mark.slow
def test_on_an_s3_root_through_the_file_io(s3_root, capsys):
    """The same checks on an object store: every byte read through the root's FileIO."""
    build_clean_root(s3_root)
    lake = Location.of(s3_root)
    code, out = verify(lake, "--deep", capsys=capsys)
    assert code == 0, out
    lake.io.delete(commit_uri(lake, 3, partition=1))
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    assert ["topics/pay/1", "version 3", "hole"] in [row[:3] for row in findings(out)]


def test_truncated_commit_is_named(lake, capsys):
    """Finding 10: a commit file cut short (a torn write)."""
    uri = commit_uri(lake, 3, partition=1)
    data = lake.io.read(uri)
    lake.io.write(uri, data[: len(data) // 2])
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    cut = [row for row in findings(out) if row[:3] == ["topics/pay/1", "version 3", "truncated-commit"]]
    assert cut and "(offsets lost: 2)" in cut[0][3]


def test_producer_epoch_going_back_is_named(lake, capsys):
    """A batch at an older epoch of a producer id than the partition already holds (written past the log's checks)."""
    log = open_partition(lake.uri, TOPIC, 1)
    log.append(payload_table([b"new epoch"]), BatchHeader(5, 1, 0))
    leo = log.log_end_offset()
    rows = stamp(conform_payload(payload_table([b"old epoch"])), leo, BatchHeader(5, 0, 0), wall_clock_ms() * 1000)
    log.table.append(rows, app_versions={LOG_END_OFFSET_APP_ID: leo + 1})
    code, out = verify(lake, capsys=capsys)
    assert code == 1
    assert [row[:3] for row in findings(out)] == [["topics/pay/1", f"offset {leo}", "epoch-backwards"]]
