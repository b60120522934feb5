"""The README's main job, run as CI would run it (smaller data): every stage must verify."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.soak]
REPO = Path(__file__).resolve().parents[2]


# The S3 run is the release tier's (`-m release`): CI runs the local one, the README's command.
@pytest.mark.parametrize("root_kind", ["local", pytest.param("s3", marks=pytest.mark.release)])
def test_main_job_runs_end_to_end(tmp_path, request, root_kind):
    # Locally a relative root, as `./dev demo` passes its default (demo-root); on S3 a prefix of the emulator,
    # reached through the AWS_* variables the session fixture exports (S12.1).
    # The S3 run is smaller: every commit there is a few round trips to one emulator process.
    root, rows, clicks = (request.getfixturevalue("s3_root"), 10_000, 2_000) if root_kind == "s3" else ("demo", 40_000, 20_000)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.demo",
            "--root",
            root,
            "--rows",
            str(rows),
            "--batch-records",
            "2000",
            "--clicks",
            str(clicks),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "each source row exactly once, in order" in result.stdout
    assert "ProducerFenced fatal=True" in result.stdout
    assert "verified: read_committed shows exactly the 18 messages of ['t1', 't3']" in result.stdout
    assert f"verified: read_committed shows each of the {clicks} clicks exactly once" in result.stdout
    # Stage 4: the view job killed before its commit left the view empty; the re-run and the incremental run
    # hold every committed row once; spark-sql and DuckDB agree over the view.
    assert "view of payments at version 0, 0 rows" in result.stdout
    assert "verified: view of payments holds its 18 read_committed rows, each once" in result.stdout
    assert "the next run appended 3 rows" in result.stdout
    assert "verified: view of payments holds its 21 read_committed rows, each once" in result.stdout
    assert "t1\t9\t9\nt3\t9\t9\nt4\t3\t3" in result.stdout
    assert "verified: lakelog sql (DuckDB) gives the same answer over the same view" in result.stdout
    # Stage 5: the streaming job killed mid-batch and restarted from its checkpoint wrote each committed record once.
    assert "verified: events-upper holds each of the 630 committed records of events once, none aborted" in result.stdout
