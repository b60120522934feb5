"""The local put-if-absent of a commit file (lakelog/store/io/local_put.py): whole or absent, never twice, nothing left over.

Both ways are checked: the unnamed file linked into place (Linux's O_TMPFILE) and the named temporary file
used where a file system refuses unnamed files.
"""

from __future__ import annotations

import os
import threading

import pytest

from lakelog.store.io import local_put


@pytest.fixture(params=["unnamed", "named"])
def way(request, tmp_path, monkeypatch):
    if request.param == "unnamed" and not local_put._O_TMPFILE:
        pytest.skip("no O_TMPFILE on this platform")
    if request.param == "named":
        monkeypatch.setattr(local_put, "_O_TMPFILE", 0)
    return request.param


def test_a_put_creates_the_file_whole_and_a_second_put_of_the_name_changes_nothing(way, tmp_path):
    target = str(tmp_path / "_delta_log" / f"{1:020d}.json")  # the folder does not exist yet: it is made
    first = b'{"commitInfo":{}}\n' * 10_000
    assert local_put.put_if_absent(target, first) is True
    assert local_put.put_if_absent(target, b"another writer's commit\n") is False
    with open(target, "rb") as written:
        assert written.read() == first
    assert os.listdir(tmp_path / "_delta_log") == [f"{1:020d}.json"], "a temporary file was left behind"


def test_of_writers_racing_for_one_name_exactly_one_wins_and_its_bytes_are_the_file(way, tmp_path):
    target = str(tmp_path / f"{7:020d}.json")
    won: list[int] = []
    start = threading.Barrier(8)

    def put(index: int) -> None:
        start.wait()
        if local_put.put_if_absent(target, f"writer {index}\n".encode() * 1000):
            won.append(index)

    threads = [threading.Thread(target=put, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1, won
    with open(target, "rb") as written:
        assert written.read() == f"writer {won[0]}\n".encode() * 1000
    assert os.listdir(tmp_path) == [f"{7:020d}.json"]


def test_a_folder_that_refuses_unnamed_files_gets_the_named_way(tmp_path, monkeypatch):
    """Where open(O_TMPFILE) is refused (EOPNOTSUPP from a file system without it), the put still happens."""
    if not local_put._O_TMPFILE:
        pytest.skip("no O_TMPFILE on this platform")
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if flags & local_put._O_TMPFILE == local_put._O_TMPFILE:
            raise OSError(95, "Operation not supported")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    monkeypatch.setattr(local_put, "_named_only", set())
    target = str(tmp_path / "a.json")
    assert local_put.put_if_absent(target, b"x") is True
    assert local_put.put_if_absent(target, b"y") is False
    assert str(tmp_path) in local_put._named_only
    assert os.listdir(tmp_path) == ["a.json"]
