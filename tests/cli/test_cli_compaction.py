"""Compaction by key in `lakelog coordinator sweep`, run for real: compacted topics and the internal logs (S9.3, S8.2)."""

from __future__ import annotations

import json

from lakelog import Producer
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.log import create_topic, open_partition


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_S9_3_S8_2_coordinator_sweep_compacts_compact_topics_and_the_internal_logs_once(lakelog, lake):
    create_topic(lake, "prices", 1, {"cleanup.policy": "compact"})
    producer = Producer({"lakelog.root": lake, "linger.ms": 600_000})
    for n in range(6):
        producer.produce("prices", f"p{n}", key=f"sku{n % 2}", partition=0)
        producer.flush()
    groups = GroupCoordinator(lake)
    for n in range(5):
        groups.commit_offsets("billing", "", -1, {("prices", 0): (n, "")})  # outside the group protocol

    report = json.loads(ok(lakelog("coordinator", "sweep", "--root", lake)))
    [cleaned] = report["log_cleaner"]
    assert cleaned["topic"] == "prices" and cleaned["compaction"]["records_after"] < cleaned["compaction"]["records_before"]
    assert [item["log_name"] for item in report["internal_compaction"]] == ["__consumer_offsets"]
    values = [row["value"] for row in open_partition(lake, "prices", 0).fetch(0, max_records=100).rows.to_pylist()]
    assert values == [b"p4", b"p5"]
    assert GroupCoordinator(lake).fetch_offsets("billing", [("prices", 0)])[("prices", 0)].offset == 4
    # Idempotent: the next sweep has nothing to compact.
    again = json.loads(ok(lakelog("coordinator", "sweep", "--root", lake)))
    assert again["internal_compaction"] == [] and all(item["compaction"] is None for item in again["log_cleaner"])


def test_S8_2_coordinator_sweep_skips_the_steps_it_is_told_to(lakelog, lake):
    create_topic(lake, "prices", 1, {"cleanup.policy": "compact"})
    producer = Producer({"lakelog.root": lake, "linger.ms": 600_000})
    for n in range(4):
        producer.produce("prices", f"p{n}", key="sku", partition=0)
        producer.flush()
    before = open_partition(lake, "prices", 0).version

    report = json.loads(
        ok(
            lakelog(
                "coordinator",
                "sweep",
                "--root",
                lake,
                "--skip",
                "log-cleaner",
                "--skip",
                "internal-compaction",
                "--skip",
                "groups",
            )
        )
    )
    assert "aborted_timed_out" in report
    assert not {"log_cleaner", "internal_compaction", "members_expired"} & set(report)
    assert open_partition(lake, "prices", 0).version == before  # nothing compacted
    bad = lakelog("coordinator", "sweep", "--root", lake, "--skip", "everything")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
