"""lakelog for Spark: the `lakelog` data source (auto-registered) and DataFrame readers for jobs.

Spark registers any installed top-level module named `pyspark_*` that exposes
`DefaultSource`, so `spark.read.format("lakelog")` and
`CREATE TEMPORARY VIEW t USING lakelog OPTIONS (root '...', topic '...')` work
with no registration code. `read_topic` reads the same rows through Spark's
Parquet reader where Spark reads the root natively (`reads_natively`: local
roots), and through lakelog's file IO in Spark tasks elsewhere (S3 roots; see
frames.py).
"""

from pyspark_lakelog.frames import read_table, read_topic, reads_natively, scan_dataframe
from pyspark_lakelog.session import delta_conf, local_session
from pyspark_lakelog.source import LakelogDataSource

DefaultSource = LakelogDataSource

__all__ = [
    "DefaultSource",
    "LakelogDataSource",
    "delta_conf",
    "local_session",
    "read_table",
    "read_topic",
    "reads_natively",
    "scan_dataframe",
]
