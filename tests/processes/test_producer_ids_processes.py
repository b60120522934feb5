"""S4.1: processes allocating producer ids at once from one root get distinct ids, none skipped.

Each id is a commit of the counter alone (no row), decided on the snapshot that read it; the log of
`__producer_ids` is checkpointed and cleaned while they race (S9.5: a cleanup never lets a loser win).
"""

from __future__ import annotations

import multiprocessing

from processes.pause_workers import allocate_ids

PROCESSES = 3
EACH = 25


def test_S4_1_processes_racing_for_producer_ids_get_distinct_consecutive_ids(root):
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    workers = [context.Process(target=allocate_ids, args=(root, EACH, reports), daemon=True) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    try:
        allocated = []
        for _ in workers:
            report = reports.get(timeout=300)
            assert report[0] == "allocated", report[1]
            assert report[1] == sorted(report[1])
            allocated.extend(report[1])
        assert sorted(allocated) == list(range(PROCESSES * EACH))
    finally:
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
