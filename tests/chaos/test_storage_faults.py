"""The storage-fault round (chaos.storage.run_storage_workload): real clients on a real root while
the storage nemesis damages one partition per kind between their operations (an emptied, deleted and
torn commit, a flipped byte, a data file copied over another, a torn data file). The history checker
finds no record lost and no offset reused, and each fault was survived or refused as CorruptRecord
(findings 1, 2, 4 and 10)."""

from __future__ import annotations

import sys

import pytest

from chaos.checker import check, fault_outcomes, found
from chaos.history import read_history
from chaos.nemesis import STORAGE_FAULTS
from chaos.storage import run_power_loss_workload, run_storage_workload


def judged(history_dir) -> tuple[dict[str, int], list[dict]]:
    """The anomalies of the round's history, and each fault with its outcome."""
    history = read_history(history_dir)
    result = check(history)
    return found(result), fault_outcomes(history, result)


def assert_survived_or_refused(root: str, history_dir, rng) -> None:
    injected = run_storage_workload(root, str(history_dir), rng)
    assert sorted(fault.kind for fault in injected) == sorted(STORAGE_FAULTS)
    anomalies, outcomes = judged(history_dir)
    print("\n".join(f"{fault['kind']}: {fault['outcome']} {fault['errors']} ({fault['detail']})" for fault in outcomes))
    assert anomalies == {}
    assert [fault for fault in outcomes if fault["outcome"] not in ("survived", "refused")] == []


def test_every_store_damage_is_survived_or_refused_and_loses_nothing(root, tmp_path, rng):
    (tmp_path / "history").mkdir()
    assert_survived_or_refused(root, tmp_path / "history", rng)


@pytest.mark.slow
@pytest.mark.roots("s3", "azure", "gcs", release=("azure", "gcs"))
def test_every_store_damage_on_s3_is_survived_or_refused_and_loses_nothing(root, tmp_path, rng):
    """The same damage through an object store's FileIO (S3, Azure, GCS), on its emulator."""
    (tmp_path / "history").mkdir()
    assert_survived_or_refused(root, tmp_path / "history", rng)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the power-loss journal names descriptors through /proc")
def test_a_power_loss_after_a_kill_loses_no_acknowledged_record(tmp_path, rng):
    """The clients' process is SIGKILLed mid-run and what it never synced is dropped or cut (build 1)."""
    pytest.importorskip("chaos.power_loss")
    root, history_dir = tmp_path / "root", tmp_path / "history"
    root.mkdir()
    history_dir.mkdir()
    fault = run_power_loss_workload(str(root), str(history_dir), rng, str(tmp_path / "journal"))
    anomalies, outcomes = judged(history_dir)
    print(fault.detail, outcomes)
    assert anomalies == {}
    assert [fault["outcome"] for fault in outcomes] in (["survived"], ["refused"])
