"""The real `spark-sql` shell over a root, with the init file `lakelog spark-sql-init` writes.

The status table is made by `spark-submit pipelines/partition_status.py`, the
view by the view job; the shell then reads the topic (read_committed), the view
and the status table through the auto-registered `lakelog` data source.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from spark_histories import fetch_rows, random_history

from lakelog.log import READ_COMMITTED, open_partition
from pipelines.materialize_committed_view import materialize_committed_view

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.roots("local", "s3", release=("s3",))]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_spark_sql_shell_queries_topics_views_and_status_with_the_generated_init_file(spark, root, tmp_path):
    random_history(root, "orders", random.Random(12), partitions=2, steps=30)
    materialize_committed_view(spark, root, "orders")
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    submitted = subprocess.run(
        [
            BIN / "spark-submit",
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            REPO / "pipelines" / "partition_status.py",
            "--root",
            root,
            "--topic",
            "orders",
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    assert json.loads(submitted.stdout.strip().splitlines()[-1])["recomputed"] == [0, 1]

    init = tmp_path / "init.sql"
    made = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", "spark-sql-init", "--root", root, "--output", init],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    assert init.read_text().count("USING lakelog") == 3
    # The root is named by its URI; an S3 store's settings reach spark-sql through the AWS_* environment,
    # never through the file.
    assert "storage." not in init.read_text() and "secret" not in init.read_text().lower()

    query = (
        "SELECT 'topic', count(*), sum(offset) FROM orders "
        "UNION ALL SELECT 'view', count(*), sum(offset) FROM orders_view "
        "UNION ALL SELECT 'status', sum(last_stable_offset), sum(high_watermark) FROM orders_status"
    )
    shell = subprocess.run(
        [BIN / "spark-sql", "--master", "local[1]", "--conf", "spark.ui.enabled=false", "-i", init, "-e", query],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shell.returncode == 0, shell.stderr[-3000:]
    lines = {
        line.split("\t")[0]: [int(cell) for cell in line.split("\t")[1:]] for line in shell.stdout.splitlines() if "\t" in line
    }
    committed = fetch_rows(root, "orders", READ_COMMITTED)
    expected = [len(committed), sum(row[1] for row in committed)]
    assert lines["topic"] == expected
    assert lines["view"] == expected
    logs = [open_partition(root, "orders", p) for p in range(2)]
    assert lines["status"] == [sum(log.last_stable_offset() for log in logs), sum(log.high_watermark() for log in logs)]
