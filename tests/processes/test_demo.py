"""The README's main job, run as CI would run it (smaller data): every stage must verify."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]


def test_main_job_runs_end_to_end(tmp_path):
    # A relative root, as `./dev demo` passes its default (demo-root).
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.demo", "--root", "demo", "--rows", "40000", "--batch-records", "2000"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "each source row exactly once, in order" in result.stdout
    assert "ProducerFenced fatal=True" in result.stdout
    assert "verified: read_committed shows exactly the 18 messages of ['t1', 't3']" in result.stdout
    assert "verified: read_committed shows each of the 20000 clicks exactly once" in result.stdout
    # Stage 4: the view job killed before its commit left the view empty; the re-run and the incremental run
    # hold every committed row once; spark-sql and DuckDB agree over the view.
    assert "view of payments at version 0, 0 rows" in result.stdout
    assert "verified: view of payments holds its 18 read_committed rows, each once" in result.stdout
    assert "the next run appended 3 rows" in result.stdout
    assert "verified: view of payments holds its 21 read_committed rows, each once" in result.stdout
    assert "t1\t9\t9\nt3\t9\t9\nt4\t3\t3" in result.stdout
    assert "verified: lakelog sql (DuckDB) gives the same answer over the same view" in result.stdout
