"""The order of a local root's syncs (lakelog/store/io/local_sync.py): a file's bytes before its name, its folder after.

A unit test of the store's ordering: the real calls run on a real folder, and each sync, link and rename is
recorded as it happens (which inode or folder it touched). A name made before its bytes are synced can name
an empty file after a power loss (finding 1: an empty commit read as a valid one); a folder synced before
the name is made, or never, can lose the name. tests/chaos/test_power_loss.py shows the same on a whole
produce, with a simulated power loss.
"""

from __future__ import annotations

import os
import stat
import sys

import pyarrow as pa
import pytest

from lakelog.store.io import local_put, local_sync
from lakelog.store.io.fileio import LocalFileIO

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/fd to name what was synced")


class Recorder:
    """Records ("data", inode), ("folder", path), ("link", path) and ("rename", path) in call order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, object]] = []
        real_fsync, real_fdatasync, real_link, real_replace = os.fsync, os.fdatasync, os.link, os.replace

        def synced(real):
            def call(descriptor):
                self.events.append(self._synced(descriptor))
                return real(descriptor)

            return call

        def link(source, target, *args, **kwargs):
            real_link(source, target, *args, **kwargs)
            self.events.append(("link", str(target)))

        def replace(source, target, *args, **kwargs):
            real_replace(source, target, *args, **kwargs)
            self.events.append(("rename", str(target)))

        monkeypatch.setattr(os, "fsync", synced(real_fsync))
        monkeypatch.setattr(os, "fdatasync", synced(real_fdatasync))
        monkeypatch.setattr(os, "link", link)
        monkeypatch.setattr(os, "replace", replace)

    @staticmethod
    def _synced(descriptor: int) -> tuple[str, object]:
        found = os.fstat(descriptor)
        if stat.S_ISDIR(found.st_mode):
            return ("folder", os.readlink(f"/proc/self/fd/{descriptor}"))
        return ("data", found.st_ino)


def inode(path) -> int:
    return os.stat(path).st_ino


@pytest.fixture(params=["unnamed", "named"])
def way(request, monkeypatch):
    if request.param == "unnamed" and not local_put._O_TMPFILE:
        pytest.skip("no O_TMPFILE on this platform")
    if request.param == "named":
        monkeypatch.setattr(local_put, "_O_TMPFILE", 0)
    return request.param


def test_a_put_syncs_the_bytes_before_the_link_and_the_folder_after(way, tmp_path, monkeypatch):
    """finding 1: the commit's name is made only once its bytes are durable, and is durable when the put returns."""
    folder = tmp_path / "_delta_log"
    folder.mkdir()
    target = str(folder / f"{1:020d}.json")
    recorded = Recorder(monkeypatch)
    assert local_put.put_if_absent(target, b'{"commitInfo":{}}\n') is True
    assert recorded.events == [("data", inode(target)), ("link", target), ("folder", str(folder))]


def test_a_put_that_loses_its_race_links_nothing_and_syncs_no_folder(way, tmp_path, monkeypatch):
    target = str(tmp_path / f"{1:020d}.json")
    assert local_put.put_if_absent(target, b"first\n") is True
    recorded = Recorder(monkeypatch)
    assert local_put.put_if_absent(target, b"second\n") is False
    assert [kind for kind, _ in recorded.events] == ["data"]


def test_a_put_into_a_new_folder_syncs_the_folder_s_name_before_the_file_is_linked(way, tmp_path, monkeypatch):
    """A name in a folder that may vanish is no durable name: the folder's own entry is synced first."""
    folder = tmp_path / "table" / "_delta_log"
    target = str(folder / f"{0:020d}.json")
    recorded = Recorder(monkeypatch)
    assert local_put.put_if_absent(target, b"x") is True
    link = recorded.events.index(("link", target))
    before = recorded.events[:link]
    assert ("folder", str(tmp_path)) in before, "the new folder table/ is not durable in its parent"
    assert ("folder", str(tmp_path / "table")) in before, "the new folder _delta_log/ is not durable in table/"
    assert recorded.events[link - 1] == ("data", inode(target))
    assert recorded.events[link + 1 :] == [("folder", str(folder))]


def test_a_write_syncs_the_temporary_file_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    """A checkpoint and `_last_checkpoint` (FileIO.write): a rename never names an unsynced file."""
    target = str(tmp_path / "_last_checkpoint")
    LocalFileIO().write(target, b'{"version": 10}')
    recorded = Recorder(monkeypatch)
    LocalFileIO().write(target, b'{"version": 20}')
    assert recorded.events == [("data", inode(target)), ("rename", target), ("folder", str(tmp_path))]


def test_a_fresh_parquet_file_is_synced_and_so_is_its_name_before_the_write_returns(tmp_path, monkeypatch):
    """A data file is durable under its name before the commit that names it is made."""
    target = str(tmp_path / "part-1.parquet")
    recorded = Recorder(monkeypatch)
    LocalFileIO().write_parquet(pa.table({"offset": [1, 2]}), target, fresh=True)
    assert recorded.events == [("data", inode(target)), ("folder", str(tmp_path))]


def test_make_dirs_syncs_every_folder_that_holds_a_new_name_from_the_top(tmp_path, monkeypatch):
    recorded = Recorder(monkeypatch)
    local_sync.make_dirs(str(tmp_path / "a" / "b" / "c"))
    assert recorded.events == [
        ("folder", str(tmp_path.parent)),  # tmp_path may have been made by another writer that has not synced it
        ("folder", str(tmp_path)),
        ("folder", str(tmp_path / "a")),
        ("folder", str(tmp_path / "a" / "b")),
    ]
    recorded.events.clear()
    local_sync.make_dirs(str(tmp_path / "a" / "b" / "c"))
    assert recorded.events == [("folder", str(tmp_path / "a" / "b"))], "a folder found in place: its name, once"
