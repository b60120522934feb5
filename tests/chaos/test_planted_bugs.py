"""The history checker against real clients on real tables: the in-process workload's history is
clean on the real code, and each planted bug (a test-only misuse of the clients, workload.BUGS) is
found as its anomaly class: the checker can fail, and does where it must."""

from __future__ import annotations

import re

import pytest

from chaos.checker import ANOMALIES, check, found
from chaos.generator import plan_transactions
from chaos.history import read_history
from chaos.workload import BUGS, run_workload


def run(tmp_path, rng, bug=None) -> dict[str, int]:
    root, history_dir = tmp_path / "root", tmp_path / "history"
    root.mkdir()
    history_dir.mkdir()
    run_workload(str(root), str(history_dir), plan_transactions(rng, 4), bug)
    return found(check(read_history(history_dir)))


def test_S5_2_S1_1_the_real_clients_history_has_no_anomaly(tmp_path, rng):
    assert run(tmp_path, rng) == {}


def expected_class(bug: str) -> str:
    return re.search(r"\(([a-z-]+)\)$", BUGS[bug]).group(1)


def test_every_anomaly_class_has_a_planted_bug():
    assert sorted(expected_class(bug) for bug in BUGS) == sorted(ANOMALIES)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_planted_bug_is_found(tmp_path, rng, bug):
    anomalies = run(tmp_path, rng, bug)
    assert expected_class(bug) in anomalies, anomalies
