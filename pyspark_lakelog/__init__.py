"""lakelog for Spark: the `lakelog` data source (auto-registered) and DataFrame readers for jobs.

Spark registers any installed top-level module named `pyspark_*` that exposes
`DefaultSource`, so `spark.read.format("lakelog")` and
`CREATE TEMPORARY VIEW t USING lakelog OPTIONS (root '...', topic '...')` work
with no registration code. `read(spark, **options)` (the data source's options)
and `read_topic` read the same rows through Delta Lake's reader, pinned to the
planned snapshot, where the session has Delta's connector (local roots, and S3
roots through S3A); without it, through Spark's Parquet reader on local roots
and lakelog's file IO in Spark tasks elsewhere (see frames.py).
"""

try:
    import pyspark  # noqa: F401
except ModuleNotFoundError as error:
    if error.name != "pyspark":
        raise
    from lakelog.errors import NotImplementedWithoutExtra

    raise NotImplementedWithoutExtra.missing("pyspark_lakelog", "PySpark", "spark") from None

from pyspark_lakelog.delta_reads import reads_through_delta  # noqa: E402 - after the check of PySpark
from pyspark_lakelog.frames import read, read_table, read_topic, reads_natively, scan_dataframe
from pyspark_lakelog.session import delta_conf, local_session
from pyspark_lakelog.source import LakelogDataSource

DefaultSource = LakelogDataSource

__all__ = [
    "DefaultSource",
    "LakelogDataSource",
    "delta_conf",
    "local_session",
    "read",
    "read_table",
    "read_topic",
    "reads_natively",
    "reads_through_delta",
    "scan_dataframe",
]
