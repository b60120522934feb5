"""lakelog for Spark: the `lakelog` data source (auto-registered) and DataFrame readers for jobs.

Spark registers any installed top-level module named `pyspark_*` that exposes
`DefaultSource`, so `spark.read.format("lakelog")` and
`CREATE TEMPORARY VIEW t USING lakelog OPTIONS (root '...', topic '...')` work
with no registration code. `read_topic` reads the same rows through Spark's
Parquet reader, for large scans (see frames.py).
"""

from pyspark_lakelog.frames import read_table, read_topic, scan_dataframe
from pyspark_lakelog.session import local_session
from pyspark_lakelog.source import LakelogDataSource

DefaultSource = LakelogDataSource

__all__ = ["DefaultSource", "LakelogDataSource", "local_session", "read_table", "read_topic", "scan_dataframe"]
