"""The Spark properties a spark-sql shell needs to query a root's registered tables, without secrets in clear text.

A table registered in a persistent catalog (lakelog.catalog.spark_sql_register) is read by every later shell, so
every shell needs Delta's connector (lakelog's JVM jars: `lakelog jars conf`) and, on an S3 root, S3A set for the
root's store. Two ways, neither of which writes a key where the user did not ask for one:

- `shell_arguments`: `--conf` options without secrets (endpoint, region, path-style, `s3://` through S3A). S3A's
  default credential chain reads the keys from the `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
  `AWS_SESSION_TOKEN` environment of the shell when it runs;
- `write_properties_file`: every property, keys included, in a file only its owner can read (0600), for
  `spark-sql --properties-file FILE` (which takes the place of spark-defaults.conf, so the jars are in it too).
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping

from lakelog import jars
from lakelog.s3a import is_secret, spark_s3a
from lakelog.store import Location

logger = logging.getLogger(__name__)

FILE_MODE = 0o600


def shell_properties(root: Location, *, secrets: bool) -> dict[str, str]:
    """lakelog's jars and Delta (if fetched), and for an S3 root S3A from its settings; keys only if `secrets`."""
    properties = dict(jars.spark_conf())
    if root.scheme == "s3":
        properties.update(spark_s3a(root.io.settings))
    if not secrets:
        properties = {key: value for key, value in properties.items() if not is_secret(key)}
    return properties


def shell_arguments(properties: Mapping[str, str]) -> str:
    """`--conf key=value ...`, quoted for a POSIX shell."""
    return " ".join(f"--conf {shlex.quote(f'{key}={value}')}" for key, value in properties.items())


def write_properties_file(path: str | os.PathLike[str], properties: Mapping[str, str]) -> None:
    """`properties` as spark-defaults.conf lines in `path`, made (or reset) readable and writable by its owner only,
    before a byte is written."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(descriptor, FILE_MODE)  # an existing file keeps its mode through os.open
        with os.fdopen(descriptor, "w") as output:
            descriptor = -1
            for key, value in properties.items():
                output.write(f"{key} {value}\n")
    finally:
        if descriptor >= 0:
            os.close(descriptor)


__all__ = ["FILE_MODE", "shell_arguments", "shell_properties", "write_properties_file"]
