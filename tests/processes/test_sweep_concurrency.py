"""S8.2: coordinator sweeps run in parallel with each other and with clients, as real processes.

Eight producers (five on S3) leave transactions open past their timeout over three partitions:
they began them a minute and more ago by their passed-in clock, so the sweeps, on the wall
clock, find them timed out without the test waiting for it.
Three `lakelog coordinator sweep` processes and a client process that calls
init_transactions on two of the ids start at once. Whatever the interleaving:
each id's transaction is aborted exactly once (one PrepareAbort record, one
ABORT marker per partition), no two sweeps claim the same id, and every
partition's LSO is back at its high watermark. On a local folder and on an S3
prefix of the session's emulator (S12.1), whose AWS_* settings the processes inherit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import FakeClock

from lakelog import AdminClient, NewTopic, Producer
from lakelog.coordinator.transaction.coordinator import TRANSACTION_STATE_LOG, TransactionCoordinator
from lakelog.log import open_partition
from lakelog.log.partition import wall_clock_ms
from lakelog.log.topics import existing_internal_partitions, open_internal_partition

pytestmark = [pytest.mark.slow, pytest.mark.roots("local", "s3")]
REPO = Path(__file__).resolve().parents[2]
# Fewer ids on S3, where each commit costs several times more: still three for the sweeps alone.
ID_COUNTS = {"local": 8, "s3": 5}
CLIENT_IDS = ["job-0", "job-1"]
TIMEOUT_MS = 60_000

CLIENT = """
import sys
from lakelog import Producer
root = sys.argv[1]
for transactional_id in sys.argv[2:]:
    p = Producer({"lakelog.root": root, "transactional.id": transactional_id})
    p.init_transactions()
    print(transactional_id, p._producer_id, p._producer_epoch, flush=True)
"""


def state_records(root: str) -> list[dict]:
    found = []
    for partition in existing_internal_partitions(root, TRANSACTION_STATE_LOG):
        log = open_internal_partition(root, TRANSACTION_STATE_LOG, partition, 50)
        if log.log_end_offset():
            found.extend(json.loads(row["value"]) for row in log.fetch(0, max_records=1_000_000).rows.to_pylist())
    return found


def test_S8_2_parallel_sweeps_and_clients_abort_each_timed_out_transaction_once(root, root_kind):
    ids = [f"job-{n}" for n in range(ID_COUNTS[root_kind])]
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("work", num_partitions=3)])
    producer_ids = {}
    # S4.7: each transaction began TIMEOUT_MS and a second ago by its producer's clock.
    began = FakeClock(wall_clock_ms() - TIMEOUT_MS - 1_000)
    for transactional_id in ids:
        p = Producer(
            {"lakelog.root": root, "transactional.id": transactional_id, "transaction.timeout.ms": TIMEOUT_MS},
            clock=began,
        )
        p.init_transactions()
        p.begin_transaction()
        for partition in range(3):
            p.produce("work", value=f"{transactional_id}-{partition}", partition=partition)
        p.flush()
        producer_ids[transactional_id] = p._producer_id

    # The check below reads every record of __transaction_state, which the internal compaction (S9.3, tested
    # beside live clients in tests/client/test_coordinator_snapshots.py) would cut to the latest per id.
    sweeps = [
        subprocess.Popen(
            [sys.executable, "-m", "lakelog.cli", "coordinator", "sweep", "--root", root, "--skip", "internal-compaction"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, root, *CLIENT_IDS], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    reports = []
    for process in sweeps:
        out, err = process.communicate(timeout=180)
        assert process.returncode == 0, err
        reports.append(json.loads(out))
    out, err = client.communicate(timeout=180)
    assert client.returncode == 0, err
    print(f"sweep reports: {reports}\nclient: {out}")

    claimed = Counter(tid for report in reports for tid in report["aborted_timed_out"])
    assert all(count == 1 for count in claimed.values()), claimed  # no id aborted by two sweeps
    assert set(ids) - set(CLIENT_IDS) <= set(claimed)  # only the client may have beaten a sweep to an id

    records = state_records(root)
    for transactional_id in ids:
        states = [r["state"] for r in records if r["transactional_id"] == transactional_id]
        assert states.count("PrepareAbort") == 1 and states.count("CompleteAbort") == 1, (transactional_id, states)
    for partition in range(3):
        log = open_partition(root, "work", partition)
        rows = log.fetch(0, max_records=1_000_000).rows.to_pylist()
        aborts = Counter(row["producer_id"] for row in rows if row["control"] == "ABORT")
        assert aborts == Counter(producer_ids.values()), (partition, aborts)
        assert log.last_stable_offset() == log.high_watermark()
        assert log.fetch(0, isolation_level="read_committed").rows.num_rows == 0
    coordinator = TransactionCoordinator(root)
    assert {coordinator.describe(tid).state.value for tid in set(ids) - set(CLIENT_IDS)} == {"CompleteAbort"}
    assert {coordinator.describe(tid).state.value for tid in CLIENT_IDS} == {"Empty"}
