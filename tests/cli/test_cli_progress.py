"""Long CLI work shows progress to a person at a terminal (done, rate, time left) and stays quiet in pipes and logs."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

from lakelog.log import create_topic, open_partition, payload_table


def on_a_terminal(*args: str) -> tuple[int, str, str]:
    """`python -m lakelog.cli ARGS` with stderr a terminal (a pty) and stdout a pipe: (exit code, stdout, stderr)."""
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal 120 columns wide
    process = subprocess.Popen(
        [sys.executable, "-m", "lakelog.cli", *args], stdout=subprocess.PIPE, stderr=child, stdin=subprocess.DEVNULL
    )
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(parent, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out = process.stdout.read().decode() if process.stdout else ""
    code = process.wait(60)
    os.close(parent)
    return code, out, seen.decode(errors="replace")


def topic_of(lake: str, partitions: int) -> None:
    create_topic(lake, "t", partitions)
    for partition in range(partitions):
        open_partition(lake, "t", partition).append(payload_table([b"a", b"b"]))


def test_delete_records_and_upgrade_protocol_show_progress_on_a_terminal_only(lakelog, lake):
    topic_of(lake, 3)
    code, out, err = on_a_terminal("topics", "delete-records", "--topic", "t", "--offset", "1", "--root", lake)
    assert code == 0 and out.count("low_watermark") == 3
    assert "delete-records t" in err and "3/3" in err and "partition/s" in err, err
    piped = lakelog("topics", "delete-records", "--topic", "t", "--offset", "2", "--root", lake)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr  # a pipe: no bar, nothing at all
    code, _, err = on_a_terminal("upgrade-protocol", "--root", lake)
    assert code == 0 and "upgrade-protocol" in err and "table/s" in err, err
    code, _, err = on_a_terminal("upgrade-protocol", "--no-progress", "--root", lake)
    assert code == 0 and "table/s" not in err, err


def test_load_shows_records_done_on_a_terminal_only(lakelog, lake, tmp_path):
    create_topic(lake, "loaded", 1)
    source = tmp_path / "rows.csv"
    source.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(50)))
    code, out, err = on_a_terminal("load", "--topic", "loaded", str(source), "--root", lake)
    assert code == 0 and "load loaded-0" in err and "50.0/50.0" in err and "rec/s" in err, err
    again = tmp_path / "more.csv"
    again.write_text("id,name\n1,x\n")
    piped = lakelog("load", "--topic", "loaded", str(again), "--root", lake)
    assert piped.returncode == 0 and "rec/s" not in piped.stderr and "\r" not in piped.stderr, piped.stderr
