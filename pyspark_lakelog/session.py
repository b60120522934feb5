"""A small local Spark session for lakelog's jobs, demo, tests and benchmarks (2-core machines).

With lakelog's JVM jars fetched (lakelog.jars: `./dev`, or `lakelog jars fetch`), the session loads Delta Lake's
Spark connector and S3A (set from lakelog's S3 settings, pyspark_lakelog.s3a), so `spark.read.format("delta")`
reads lakelog's tables, on S3 roots too; without them, one log line says
what is missing and the session reads through lakelog's Python data source as before. A session of your own gets
the same from `delta_conf()` (or `lakelog jars conf`, as spark-defaults.conf lines).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from lakelog import jars
from lakelog.catalog import SPARK_HIDE_TRACEBACK
from lakelog.store.io.s3_settings import s3_settings
from pyspark_lakelog.s3a import spark_s3a

logger = logging.getLogger(__name__)


def delta_conf(storage_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The Spark properties that load lakelog's fetched JVM jars and Delta, with S3A set from lakelog's S3 settings
    (the `AWS_*` environment under `storage_options`); empty (and one warning) without the jars."""
    conf = jars.spark_conf()
    if not conf:
        logger.warning("%s", jars.missing())
        return conf
    return {**conf, **spark_s3a(s3_settings(storage_options))}


def local_session(app: str, master: str = "local[2]", driver_memory: str = "2g") -> Any:
    """A quiet local session: no UI, two shuffle partitions, UTC, Python workers on this interpreter; Delta if fetched;
    the lakelog data source's errors show as lakelog's one line (`lakelog.errors.<Code>: ...`), no Python traceback."""
    # Python workers must run this interpreter, or they miss pyarrow and lakelog.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config(SPARK_HIDE_TRACEBACK, "true")
        # Delta rebuilds a snapshot's state in this many tasks (default 50): two, as the shuffles, on two cores.
        .config("spark.databricks.delta.snapshotPartitions", "2")
    )
    for key, value in delta_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
