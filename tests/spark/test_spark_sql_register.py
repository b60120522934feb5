"""spark-sql with no init file: `lakelog spark-sql-init --register` registers views and status tables as Delta tables.

Run once with `spark-sql -f` (Delta Lake's Spark connector loaded from lakelog's JVM jars, `lakelog jars conf`), the
statements put `<topic>_view` and `<topic>_status` into the shell's persistent catalog (the metastore in its working
folder); a new shell then answers queries over them with no init file, read by Delta's own reader. On an S3 root
the shells take the properties `--register --properties-file` wrote (the jars, Delta, S3A with the root's keys, in a
file only its owner reads), and read through S3A.
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from spark_histories import fetch_rows, random_history

from lakelog import jars
from lakelog.log import READ_COMMITTED, open_partition
from pipelines.materialize_committed_view import materialize_committed_view
from pipelines.partition_status import partition_status

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.roots("local", "s3", release=("s3",))]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def spark_sql(folder: Path, *arguments: str | Path, properties: Path | None = None) -> subprocess.CompletedProcess:
    delta = [part for key, value in jars.spark_conf().items() for part in ("--conf", f"{key}={value}")]
    assert delta, jars.missing()
    if properties is not None:
        delta = ["--properties-file", str(properties)]
    command = [BIN / "spark-sql", "--master", "local[1]", "--conf", "spark.ui.enabled=false", *delta, *arguments]
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    if properties is not None:
        # The keys come from the properties file alone (S3A would read them from the environment too).
        for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            environment.pop(variable, None)
    return subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True, timeout=400)


def spark_sql_as_told(folder: Path, arguments: list[str], keys_in_file: bool) -> subprocess.CompletedProcess:
    command = [BIN / "spark-sql", "--master", "local[1]", "--conf", "spark.ui.enabled=false", *arguments]
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    if keys_in_file:
        for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            environment.pop(variable, None)
    return subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True, timeout=400)


def test_a_new_spark_sql_shell_queries_registered_views_and_status_tables(spark, root, root_kind, tmp_path):
    random_history(root, "orders", random.Random(25), partitions=2, steps=20)
    materialize_committed_view(spark, root, "orders")
    partition_status(spark, root, "orders")
    statements = tmp_path / "register.sql"
    properties = tmp_path / "lakelog.conf" if root_kind == "s3" else None
    extra = ["--properties-file", str(properties)] if properties is not None else []
    made = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", "spark-sql-init", "--register", "--root", root, "--output", statements, *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    text = statements.read_text()
    assert text.count("USING delta LOCATION") == 2 and "USING lakelog" not in text, text
    # The command the CLI says to run, as it says it (plus a small master and no UI).
    (hint,) = [line.split("run once: ", 1)[1] for line in made.stderr.splitlines() if "run once: " in line]
    hinted = shlex.split(hint)
    assert hinted[0] == "spark-sql" and hinted[-2:] == ["-f", str(statements)], hint
    registered = spark_sql_as_told(tmp_path, hinted[1:], properties is not None)
    assert registered.returncode == 0, registered.stderr[-3000:]

    query = (
        "SELECT 'view', count(*), sum(offset) FROM orders_view "
        "UNION ALL SELECT 'status', sum(last_stable_offset), sum(high_watermark) FROM orders_status"
    )
    shell = spark_sql(tmp_path, "-e", query, properties=properties)  # a new shell: no init file, the metastore in tmp_path
    assert shell.returncode == 0, shell.stderr[-3000:]
    lines = {
        line.split("\t")[0]: [int(cell) for cell in line.split("\t")[1:]] for line in shell.stdout.splitlines() if "\t" in line
    }
    committed = fetch_rows(root, "orders", READ_COMMITTED)
    assert lines["view"] == [len(committed), sum(row[1] for row in committed)]
    logs = [open_partition(root, "orders", p) for p in range(2)]
    assert lines["status"] == [sum(log.last_stable_offset() for log in logs), sum(log.high_watermark() for log in logs)]
