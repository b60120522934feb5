"""`lakelog topics describe` shows the LSO beside the HW; `lakelog consume --isolation-level` (S5.1, S5.2)."""

from __future__ import annotations

import json

from lakelog.log import BatchHeader, ControlType, create_topic, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED


def ok(result) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return result.stdout


def test_describe_and_consume_by_isolation_level(lakelog, lake):
    """Partition 0: v0, an aborted transaction (1-2), v3, an open transaction (4): LSO 4, HW 5."""
    ok(lakelog("init", "--root", lake))
    create_topic(lake, "txns", 1)
    log = open_partition(lake, "txns", 0)
    log.append(payload_table([b"v0"]))
    log.append(payload_table([b"aborted"]), BatchHeader(1, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    log.append_marker(1, 1, ControlType.ABORT)
    log.append(payload_table([b"v3"]))
    log.append(payload_table([b"open"]), BatchHeader(2, 0, 0, is_transactional=True), transaction=_UNVERIFIED)

    text = ok(lakelog("topics", "describe", "--topic", "txns", "--root", lake))
    header, row = text.splitlines()[-2:]
    assert header.split() == [
        "Partition",
        "LogStartOffset",
        "HighWatermark",
        "LastStableOffset",
        "LogEndOffset",
        "Files",
        "Version",
    ]
    assert row.split()[:5] == ["0", "0", "5", "4", "5"]
    [partition] = json.loads(ok(lakelog("topics", "describe", "--topic", "txns", "--json", "--root", lake)))["partitions"]
    assert (partition["high_watermark"], partition["last_stable_offset"]) == (5, 4)

    def consumed(*options: str) -> list[tuple[int, str]]:
        out = ok(lakelog("consume", "--topic", "txns", "--root", lake, *options))
        return [(line["offset"], line["value"]) for line in map(json.loads, out.splitlines())]

    assert consumed() == [(0, "v0"), (3, "v3")]
    assert consumed("--isolation-level", "read_committed") == [(0, "v0"), (3, "v3")]
    assert consumed("--isolation-level", "read_uncommitted") == [(0, "v0"), (1, "aborted"), (3, "v3"), (4, "open")]
    bad = lakelog("consume", "--topic", "txns", "--root", lake, "--isolation-level", "serializable")
    assert bad.returncode == 2 and "isolation-level" in bad.stderr
