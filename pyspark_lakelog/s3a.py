"""lakelog's S3 settings as Hadoop S3A properties: lakelog.s3a (the command line needs them without pyspark)."""

from lakelog.s3a import S3A, hadoop_s3a, spark_s3a

__all__ = ["S3A", "hadoop_s3a", "spark_s3a"]
