"""A small local Spark session for lakelog's jobs, demo, tests and benchmarks (2-core machines)."""

from __future__ import annotations

import os
import sys
from typing import Any

from lakelog.catalog import SPARK_HIDE_TRACEBACK


def local_session(app: str, master: str = "local[2]", driver_memory: str = "2g") -> Any:
    """A quiet local session: no UI, two shuffle partitions, UTC, Python workers on this interpreter; the
    lakelog data source's errors show as lakelog's one line (`lakelog.errors.<Code>: ...`), no Python traceback."""
    # Python workers must run this interpreter, or they miss pyarrow and lakelog.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config(SPARK_HIDE_TRACEBACK, "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
