"""A short recorded chaos run of the consume-transform-produce job (S7.4 with S7.2, S6.5, S4.7):
worker processes killed and paused, zombies among them; the history checker finds no anomaly.
The long run is tests/processes/test_consume_transform_produce_chaos.py (slow) and `tests/chaos/run.py`."""

from __future__ import annotations

from collections import Counter

from chaos.checker import check, found
from chaos.job import JobChaos, run_job_chaos

SHORT = JobChaos(records=1200, workers=3, batch_records=60, max_faults=4, chaos_until=0.8, deadline_s=150)


def test_S7_4_a_short_chaos_run_has_no_anomaly_in_its_history(tmp_path, rng):
    run = run_job_chaos(tmp_path, rng, SHORT)
    print(run.summary())
    assert found(check(run.history)) == {}
    # The history saw the run: the input sent, the workers' transactions, the output read.
    processes = Counter(op.process.split("-")[0] for op in run.history)
    assert processes["generator"] == 1 and processes["worker"] > 0 and processes["final"] > 0
    sources = Counter(dict(message.headers())["lakelog.source"] for message in run.output)
    assert len(sources) == SHORT.records and set(sources.values()) == {1}
    assert run.faults["kills"] + run.faults["pauses"] >= 1
