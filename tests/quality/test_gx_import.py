"""Great Expectations as lakelog imports it: without the integrations GX's own datasources use (cloud clients,
PySpark, SQLAlchemy), with Altair and scipy.stats loaded only when an expectation uses them, and untouched when the
program imported GX itself.

Each case runs in a fresh interpreter, since an import happens once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

LEFT_OUT = ("azure.storage.blob", "google.cloud.storage", "pyspark", "sqlalchemy", "altair", "scipy.stats")


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


LOADED = f"""
import importlib.util, json, sys
def loaded(name):
    module = sys.modules.get(name)
    return module is not None and not isinstance(module, importlib.util._LazyModule)
print(json.dumps({{name: loaded(name) for name in {LEFT_OUT!r}}}))
"""


def test_a_validation_imports_no_datasource_integration_and_a_kl_divergence_still_runs():
    """The KL divergence expectation needs scipy.stats: it loads when that expectation runs, and its verdict is GX's."""
    before = run(
        textwrap.dedent(
            """
            from lakelog.quality.suites import require_great_expectations
            require_great_expectations()
            """
        )
        + LOADED
    )
    assert before == dict.fromkeys(LEFT_OUT, False)
    after = run(
        """
        import json, pyarrow as pa
        from lakelog.log.records import HEADER_TYPE
        from lakelog.quality import parse_suite, validate
        suite = parse_suite(json.dumps({"name": "kl", "expectations": [{
            "type": "expect_column_kl_divergence_to_be_less_than",
            "kwargs": {"column": "value.colour", "threshold": 0.1,
                       "partition_object": {"values": ["red", "blue"], "weights": [0.5, 0.5]}}}]}), "t")
        def rows(colours):
            n = len(colours)
            return pa.table({"key": pa.array([b"k"] * n, pa.binary()),
                             "value": pa.array([json.dumps({"colour": c}).encode() for c in colours], pa.binary()),
                             "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(n), pa.int64()),
                             "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
                             "headers": pa.array([[] for _ in range(n)], HEADER_TYPE)})
        even, skewed = validate(suite, rows(["red", "blue"] * 50)), validate(suite, rows(["red"] * 95 + ["blue"] * 5))
        print(json.dumps({"even": even.success, "skewed": skewed.success}))
        """
    )
    assert after == {"even": True, "skewed": False}


def test_a_program_that_imported_gx_or_a_cloud_client_first_keeps_all_of_gx():
    own = run(
        """
        import great_expectations
        from lakelog.quality.suites import require_great_expectations
        require_great_expectations()
        from great_expectations.compatibility import azure
        import json; print(json.dumps({"azure": not type(azure.BlobServiceClient).__name__ == "NotImported"}))
        """
    )
    assert own == {"azure": True}
    first = run(
        """
        import azure.storage.blob
        from lakelog.quality.suites import require_great_expectations
        require_great_expectations()
        from great_expectations.compatibility import azure
        import json; print(json.dumps({"azure": not type(azure.BlobServiceClient).__name__ == "NotImported"}))
        """
    )
    assert first == {"azure": True}
