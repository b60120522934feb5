"""lakelog's tables through Delta Lake's own Spark reader, pinned to the version lakelog decided on.

Where the session has Delta's Spark connector (lakelog's JVM jars, pyspark_lakelog.session), a partition, a view or
a status table is read as `spark.read.format("delta").option("versionAsOf", v).load(uri)`: v is the snapshot the
caller planned on (lakelog.log.scan.plan_scan for a topic, so the LSO cut and the aborted transactions of that
snapshot apply to exactly the rows read, S5.2/S5.3). On S3 roots the files are read through Hadoop's S3A, set for
each read from the root's own storage settings (`fs.*` reader options, which Delta hands to the Hadoop
configuration of that read), so `storage.*` options and the `AWS_*` environment reach Spark as they reach lakelog's
file IO. Without the connector (no jars, or a session that lacks it), callers read as before (pyspark_lakelog.frames).

Only reads go this way: every byte lakelog writes still goes through lakelog's file IO and commits (S12.2).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lakelog.store import Location
from pyspark_lakelog.s3a import S3A, hadoop_s3a

logger = logging.getLogger(__name__)

DELTA_SOURCE = "org.apache.spark.sql.delta.sources.DeltaDataSource"
# What each session's JVM can load, by application id: a class lookup costs a Py4J round trip per read otherwise.
_loadable: dict[tuple[str, str], bool] = {}


def jvm_has(spark: SparkSession, class_name: str) -> bool:
    """Whether the session's driver JVM loads `class_name` (False for a session without a local JVM: Spark Connect)."""
    context = getattr(spark, "sparkContext", None)
    jvm = getattr(spark, "_jvm", None)
    if context is None or jvm is None:
        return False
    key = (context.applicationId, class_name)
    if key not in _loadable:
        try:
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            jvm.java.lang.Class.forName(class_name, False, loader)
            _loadable[key] = True
        except Exception:  # noqa: BLE001 - Py4J's error for a missing class: the answer is no
            _loadable[key] = False
    return _loadable[key]


def reads_through_delta(spark: SparkSession, location: Location) -> bool:
    """Whether `spark` reads tables under `location` with Delta's reader: it has Delta, and S3A for an S3 root.

    Azure and GCS roots are read by lakelog's own reader: the jars hold no Hadoop connector for them yet."""
    if not jvm_has(spark, DELTA_SOURCE):
        return False
    return location.is_local or (location.scheme == "s3" and jvm_has(spark, S3A))


def delta_uri(location: Location) -> str:
    """The URI Spark reads: a local path as `file:` (never resolved against a default HDFS), S3 as it is (`s3://`,
    served by S3A through the `fs.s3.impl` the read's options set)."""
    return f"file://{location.uri}" if location.is_local else location.uri


def fs_options(location: Location) -> dict[str, str]:
    """Hadoop properties for a read of `location`: S3A from the root's storage settings; none for a local root."""
    if location.scheme != "s3":
        return {}
    return hadoop_s3a(location.io.settings)


def read_delta(spark: SparkSession, location: Location, version: int, options: Mapping[str, Any] | None = None) -> DataFrame:
    """The table at `location` as of `version`, through Delta's reader."""
    reader = spark.read.format("delta").option("versionAsOf", version)
    for key, value in {**fs_options(location), **(options or {})}.items():
        reader = reader.option(key, value)
    return reader.load(delta_uri(location))


__all__ = ["delta_uri", "fs_options", "jvm_has", "read_delta", "reads_through_delta"]
