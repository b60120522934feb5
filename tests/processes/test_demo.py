"""The README's main job, run as CI would run it (smaller data): both stages must verify."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_main_job_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.demo", "--root", str(tmp_path / "demo"), "--rows", "40000", "--batch-records", "2000"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "each source row exactly once, in order" in result.stdout
    assert "ProducerFenced fatal=True" in result.stdout
    assert "verified: read_committed shows exactly the 18 messages of ['t1', 't3']" in result.stdout
    assert "verified: read_committed shows each of the 20000 clicks exactly once" in result.stdout
