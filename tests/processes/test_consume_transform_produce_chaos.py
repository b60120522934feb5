"""Chaos for the exactly-once consume-transform-produce job (S7.4, with S6.5, S7.2, S7.3, S4.7 underneath).

Three worker processes of `pipelines.consume_transform_produce` share a group over
four input partitions. A nemesis driven by one seeded generator SIGKILLs workers
(and starts their slot again) and pauses them with SIGSTOP/SIGCONT, some past
their session timeout so that they come back as zombies; the test process runs
the combined coordinator sweep meanwhile. When the group has caught up, two
checkers judge the run: the history checker (tests/chaos/checker.py: no anomaly
of any class in what every client did), and the output against the input (every
input record exactly once, transformed, and the group's committed offsets equal
the input's end offsets).

The split is Jepsen's (tests/chaos/): generator (the input), client (the job's
workers, recorded), nemesis (kills and pauses), checker (the history, the output).

$LAKELOG_TEST_SEED replays a run; $LAKELOG_CHAOS_RECORDS makes it smaller (the
default is the issue's 100,000 records).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from chaos.checker import check, found, table
from chaos.generator import value_of
from chaos.job import JobChaos, run_job_chaos

from pipelines.consume_transform_produce import SOURCE_HEADER

pytestmark = [pytest.mark.slow, pytest.mark.soak]

RECORDS = int(os.environ.get("LAKELOG_CHAOS_RECORDS", "100000"))
CHAOS = JobChaos(records=RECORDS)


def test_S7_4_chaos_every_input_record_is_in_the_output_exactly_once(tmp_path, rng):
    run = run_job_chaos(tmp_path, rng, CHAOS)
    print(run.summary())
    anomalies = check(run.history)
    print(table(found(anomalies)))
    assert found(anomalies) == {}, {name: examples[:3] for name, examples in anomalies.items() if examples}

    # Checker: every input record once in the read_committed output, transformed, and nothing else.
    partitions = CHAOS.partitions
    sources = Counter(dict(message.headers())[SOURCE_HEADER] for message in run.output)
    expected = {f"in:{index % partitions}:{index // partitions}".encode() for index in range(RECORDS)}
    assert set(sources) == expected, (
        f"missing {len(expected - set(sources))} (e.g. {sorted(expected - set(sources))[:3]}), "
        f"foreign {sorted(set(sources) - expected)[:3]}"
    )
    assert [source for source, seen in sources.items() if seen != 1] == []
    assert len(run.output) == RECORDS
    for message in run.output:
        _, partition, offset = dict(message.headers())[SOURCE_HEADER].decode().split(":")
        assert message.value() == value_of(int(offset) * partitions + int(partition)).upper()
        assert message.partition() == int(partition)
    # The group's committed offsets are the input's end offsets.
    assert run.committed == run.input_end == {p: len(range(p, RECORDS, partitions)) for p in range(partitions)}
    assert run.faults["kills"] >= 1 and run.faults["zombie pauses"] >= 1
    # Every worker slot owned partitions: the uniform assignor gives each a share (S6.2). (Committing is not
    # certain: a slot may be killed or paused before its first commit, and find nothing left when it is back.)
    for slot in range(CHAOS.workers):
        slot_events = [json.loads(line) for line in (run.events_dir / f"slot-{slot}.jsonl").read_text().splitlines()]
        assert any(e["event"] == "assigned" and e["partitions"] for e in slot_events), f"slot {slot} never owned a partition"
