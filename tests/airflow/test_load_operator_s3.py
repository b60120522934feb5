"""LakelogLoadOperator on an S3 root, the store reached only through the connection (`airflow dags test`).

The Airflow processes get no AWS_* variables: the endpoint, region and keys come
from the `lakelog` connection (storage options in its extra, the keys as its
login and password), for the root and for a source on the same store (S12.1).
A second run of the same day loads nothing (S2.4).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lakelog import AdminClient, NewTopic
from lakelog.log import READ_COMMITTED, open_partition
from lakelog.store import Location

pytestmark = [pytest.mark.slow]
DAGS = Path(__file__).parent / "dags"
DAY = "2026-01-05"


def test_S12_1_the_load_operator_reaches_an_s3_root_and_source_through_the_connection_alone(tmp_path, s3, s3_root):
    AdminClient({"lakelog.root": s3_root}).create_topics([NewTopic("days", num_partitions=2)])
    landing = Location.of(s3_root.rsplit("/", 1)[0] + "/landing")
    ids = [f"{DAY}/{i}" for i in range(120)]
    landing.io.write_parquet(pa.table({"id": ids}), (landing / f"{DAY}.parquet").uri)
    connection = {
        "conn_type": "lakelog",
        "login": s3.credentials.access_key_id,
        "password": s3.credentials.secret_access_key,
        "extra": {
            "root": s3_root,
            "storage_options": {"endpoint_url": s3.endpoint_url, "region": s3.credentials.region, "allow_http": "true"},
        },
    }
    home = tmp_path / "airflow"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS / "lakelog_test_load.py"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_LAKELOG_DEFAULT": json.dumps(connection),
            "LAKELOG_TEST_SOURCE": landing.uri,
            "LAKELOG_TEST_FAULTS": str(tmp_path),
        }
    )
    airflow = str(Path(sys.executable).with_name("airflow"))

    def run(*args: str) -> str:
        done = subprocess.run([airflow, *args], env=env, cwd=home, capture_output=True, text=True, timeout=300)
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-3000:]
        return output

    run("db", "migrate")
    first = run("dags", "test", "lakelog_test_load", DAY)
    assert "loaded unit lakelog_test_load.load_day.-1." in first, first[-3000:]
    second = run("dags", "test", "lakelog_test_load", DAY)
    assert "was loaded before by an earlier attempt" in second, second[-3000:]

    loaded = []
    for partition in range(2):
        rows = open_partition(s3_root, "days", partition).fetch(0, max_records=1000, isolation_level=READ_COMMITTED).rows
        loaded += [json.loads(value)["id"] for value in rows.column("value").to_pylist()]
    assert sorted(loaded) == sorted(ids)
