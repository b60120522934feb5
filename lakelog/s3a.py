"""lakelog's S3 settings as Hadoop S3A properties, so Spark's own readers (Delta's among them) reach S3 roots.

The settings are lakelog's own (lakelog.store.io.s3_settings: the `AWS_*` environment under explicit `storage.*`
options), so one set of connection settings serves lakelog's file IO, delta-rs and Spark. `s3://` URIs, as lakelog
names roots, go through S3A too (`fs.s3.impl`); an endpoint of its own (an S3-compatible store) is addressed
path-style. Needs hadoop-aws on the class path (lakelog's JVM jars, lakelog.jars). Here, not in pyspark_lakelog, so the
command line (spark-sql properties for a shell) has it without pyspark.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

logger = logging.getLogger(__name__)

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
# lakelog's key -> S3A's property (without the `spark.hadoop.` prefix a Spark conf gives it).
PROPERTIES = {
    "endpoint_url": "fs.s3a.endpoint",
    "region": "fs.s3a.endpoint.region",
    "access_key_id": "fs.s3a.access.key",
    "secret_access_key": "fs.s3a.secret.key",
    "session_token": "fs.s3a.session.token",
}


def hadoop_s3a(settings: Mapping[str, str]) -> dict[str, str]:
    """The Hadoop properties for these S3 settings (keys of lakelog.store.io.s3_settings.S3_KEYS)."""
    properties = {"fs.s3.impl": S3A, "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A"}
    for key, name in PROPERTIES.items():
        if settings.get(key):
            properties[name] = settings[key]
    if settings.get("session_token"):
        properties["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    if settings.get("endpoint_url"):
        properties["fs.s3a.path.style.access"] = "true"
        plain = settings["endpoint_url"].startswith("http://")
        properties["fs.s3a.connection.ssl.enabled"] = "false" if plain else "true"
    return properties


def spark_s3a(settings: Mapping[str, str]) -> dict[str, str]:
    """The same as Spark properties (`spark.hadoop.*`), for a session's builder."""
    return {f"spark.hadoop.{name}": value for name, value in hadoop_s3a(settings).items()}


def is_secret(name: str) -> bool:
    """Whether an S3A property (with or without `spark.hadoop.`) holds a secret: a key or a session token."""
    return name.removeprefix("spark.hadoop.") in SECRET_PROPERTIES


SECRET_PROPERTIES = ("fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token")

__all__ = ["S3A", "SECRET_PROPERTIES", "hadoop_s3a", "is_secret", "spark_s3a"]
