"""The jobs import no Spark: the view and status jobs take their engine as a parameter, and Spark's side of them is
in pyspark_lakelog and the pipelines, so a process that runs a load, a sweep or a transform never starts pyspark.

Checked in a fresh interpreter, so nothing this session imported already counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOBS = sorted(f"lakelog.jobs.{path.stem}" for path in (REPO / "lakelog" / "jobs").glob("*.py") if path.stem != "__init__")

IMPORT_AND_LIST_SPARK = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(sorted(name for name in sys.modules if name.split(".")[0] in ("pyspark", "pyspark_lakelog", "py4j")))
"""


def spark_modules_after_importing(*names: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_AND_LIST_SPARK, *names], capture_output=True, text=True, cwd=REPO, check=True
    )
    return result.stdout.strip()


def test_importing_every_job_imports_no_spark():
    assert "lakelog.jobs.views" in JOBS and "lakelog.jobs.status" in JOBS
    assert spark_modules_after_importing(*JOBS) == "[]"


def test_the_check_sees_a_spark_import():
    """The check itself: a module that imports pyspark_lakelog is caught."""
    assert "pyspark_lakelog" in spark_modules_after_importing("pyspark_lakelog.view_files")
