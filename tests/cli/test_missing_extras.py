"""A feature whose extra is not installed names the extra, in one line, and changes nothing (S8.3).

The extras are installed here, so the test hides one module from a fresh interpreter (`sys.modules[name] = None`
makes its import fail as an absent package does) and runs the real command there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import table_fingerprint

from lakelog.log import create_topic

REPO = Path(__file__).resolve().parents[2]


def without(module: str, code: str, *, cwd: Path) -> subprocess.CompletedProcess:
    hide = f"import sys; sys.modules[{module!r}] = None\n"
    return subprocess.run([sys.executable, "-c", hide + code], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_a_quality_suite_without_great_expectations_names_the_quality_extra_and_stores_nothing(tmp_path):
    root = tmp_path / "lake"
    create_topic(str(root), "orders", 1, None)
    suite = tmp_path / "orders.json"
    suite.write_text(
        '{"name": "orders", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key"}}]}'
    )
    before = table_fingerprint(root)
    arguments = ["quality", "set", "--topic", "orders", "--suite", str(suite), "--mode", "enforce", "--root", str(root)]
    refused = without(
        "great_expectations",
        f"import runpy, sys; sys.argv = ['lakelog', *{arguments!r}]; runpy.run_module('lakelog.cli', run_name='__main__')",
        cwd=tmp_path,
    )
    assert refused.returncode != 0
    assert refused.stderr.splitlines() == [
        "lakelog: _NOT_IMPLEMENTED: a quality suite needs Great Expectations, which is not installed: "
        "pip install 'lakelog[quality]' (from a checkout: pip install '.[quality]')"
    ], refused.stderr
    assert table_fingerprint(root) == before


def test_pyspark_lakelog_without_pyspark_names_the_spark_extra(tmp_path):
    failed = without("pyspark", "import pyspark_lakelog", cwd=REPO)
    assert failed.returncode == 1
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("lakelog.errors.NotImplementedWithoutExtra: pyspark_lakelog needs PySpark, which is not installed"), (
        last
    )
    assert "pip install 'lakelog[spark]'" in last
    from lakelog.errors import NotImplementedWithoutExtra

    assert issubclass(NotImplementedWithoutExtra, ImportError)
