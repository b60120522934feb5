"""The simulated power loss (tests/chaos/power_loss.py): what a synced local root keeps, and what it drops unsynced.

A child process produces one record and reports it acknowledged; it is SIGKILLed and the power "goes out":
every name and byte its syncs did not make durable is dropped or cut. With lakelog's syncs the record is
there after the loss; with the child's syncs turned into no-ops the simulator drops the acknowledged commit
(it sees what it is meant to see). The model's rules each have a small in-process case first.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from chaos import power_loss
from lakelog.log import open_partition

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the journal names descriptors through /proc")

# The child: one record produced and acknowledged, the offset printed, then it waits for its SIGKILL.
PRODUCE_ONE = """
import sys, time
from lakelog import Producer
reports = []
producer = Producer({"lakelog.root": sys.argv[1], "linger.ms": 0})
producer.produce(sys.argv[2], value=b"acknowledged", partition=0, on_delivery=lambda error, message: reports.append((error, message)))
producer.flush()
error, message = reports[0]
assert error is None, error
print("acknowledged", message.offset(), flush=True)
time.sleep(60)
"""


def produce_and_kill(root: str, topic: str, journal: power_loss.Journal) -> int:
    """The offset the journaled child was acknowledged at; the child is dead when this returns."""
    child = subprocess.Popen(
        [sys.executable, "-c", PRODUCE_ONE, root, topic], stdout=subprocess.PIPE, env=power_loss.environment(journal)
    )
    try:
        line = child.stdout.readline().decode().split()
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert line[:1] == ["acknowledged"], line
    return int(line[1])


def commits(root: str, topic: str) -> set[str]:
    folder = f"topics/{topic}/0/_delta_log"
    return {f"{folder}/{name}" for name in os.listdir(f"{root}/{folder}") if name.endswith(".json")}


@pytest.mark.slow
def test_an_acknowledged_record_survives_a_power_loss_and_the_partition_opens_with_it(root, topic, tmp_path):
    name = topic()
    before = commits(root, name)
    journal = power_loss.start(root, tmp_path / "journal")
    offset = produce_and_kill(root, name, journal)
    acknowledged = commits(root, name) - before
    report = power_loss.lose_power(journal)
    assert acknowledged and not any(report.touched(commit) for commit in acknowledged), report
    partition = open_partition(root, name, 0)
    assert partition.high_watermark() == offset + 1, report
    assert partition.fetch(offset).rows.column("value").to_pylist() == [b"acknowledged"], report


@pytest.mark.slow
def test_with_the_syncs_turned_off_the_power_loss_drops_the_acknowledged_commit(root, topic, tmp_path):
    """Finding 1's cause, the simulator's proof: an acknowledged commit never synced is gone after the loss."""
    name = topic()
    before = commits(root, name)
    journal = power_loss.start(root, tmp_path / "journal", syncs=False)
    assert produce_and_kill(root, name, journal) == 0
    acknowledged = commits(root, name) - before
    report = power_loss.lose_power(journal)
    assert acknowledged and all(report.touched(commit) for commit in acknowledged), report
    assert commits(root, name) == before, report
    assert open_partition(root, name, 0).high_watermark() == 0, report


@pytest.fixture
def journaled(tmp_path):
    """A root journaled in this process: yields (root, journal, stop journaling)."""
    root = tmp_path / "root"
    (root / "old").mkdir(parents=True)
    (root / "old" / "kept.json").write_bytes(b"old and durable")
    journal = power_loss.start(root, tmp_path / "journal")
    uninstall = power_loss.install(journal)
    yield str(os.path.realpath(root)), journal, uninstall
    uninstall()


def sync_folder(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(descriptor)
    os.close(descriptor)


def test_a_new_name_is_durable_only_once_its_folder_is_synced(journaled):
    root, journal, uninstall = journaled
    with open(f"{root}/old/synced-name.json", "wb") as out:
        out.write(b"x" * 10)
        out.flush()
        os.fdatasync(out.fileno())
    sync_folder(f"{root}/old")
    with open(f"{root}/old/unsynced-name.json", "wb") as out:
        out.write(b"y" * 10)
        out.flush()
        os.fdatasync(out.fileno())
    os.makedirs(f"{root}/new/deeper")
    uninstall()
    report = power_loss.lose_power(journal)
    assert report.dropped == ["new/", "old/unsynced-name.json"], report
    assert sorted(os.listdir(f"{root}/old")) == ["kept.json", "synced-name.json"]
    assert open(f"{root}/old/synced-name.json", "rb").read() == b"x" * 10


def test_a_durable_name_whose_bytes_were_never_synced_names_an_empty_file(journaled):
    """Finding 1: a link of an unsynced file, its folder synced: an empty commit file after the loss."""
    root, journal, uninstall = journaled
    with open(f"{root}/old/1.json", "wb") as out:
        out.write(b'{"commitInfo":{}}\n')
    sync_folder(f"{root}/old")
    uninstall()
    report = power_loss.lose_power(journal)
    assert report.truncated == [("old/1.json", 18, 0)], report
    assert os.path.getsize(f"{root}/old/1.json") == 0


def test_a_rename_over_a_file_not_followed_by_a_folder_sync_is_undone(journaled):
    root, journal, uninstall = journaled
    with open(f"{root}/old/kept.json.tmp", "wb") as out:
        out.write(b"new")
        out.flush()
        os.fsync(out.fileno())
    os.replace(f"{root}/old/kept.json.tmp", f"{root}/old/kept.json")
    uninstall()
    report = power_loss.lose_power(journal)
    assert report.restored == ["old/kept.json"], report
    assert open(f"{root}/old/kept.json", "rb").read() == b"old and durable"
    assert os.listdir(f"{root}/old") == ["kept.json"]
