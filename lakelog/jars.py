"""The JVM jars lakelog's Spark sessions load: Delta Lake's Spark connector and Hadoop's S3A (jvm/pom.xml).

Maven fetches them (`mvn dependency:copy-dependencies` of the pom) into a folder, never Spark at run time
(`spark.jars.packages`): `./dev` fetches into the checkout's `.jars/` and names it in `$LAKELOG_JARS_DIR`; an
installed wheel fetches with `lakelog jars fetch`, into `$LAKELOG_JARS_DIR` or the user's cache folder
(`~/.cache/lakelog/jars`). A folder holds the jars when its stamp file is the pom's SHA-256, so a changed pom
(another Delta release) is fetched again rather than half used.

`spark_conf()` is what a session needs to use them: the jars on the driver's and executors' class path, Delta's SQL
extension and catalog. Class path, not `spark.jars`: Spark copies every `spark.jars` file into each session's
working folder through its file server (the AWS SDK bundle alone is 640 MB), while a class path is read in place.
Importing this module needs no pyspark.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

from lakelog.errors import KafkaError, KafkaException

logger = logging.getLogger(__name__)

POM = Path(__file__).resolve().parent / "jvm" / "pom.xml"
STAMP = ".lakelog-stamp"
JARS_DIR_VARIABLE = "LAKELOG_JARS_DIR"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
FETCH_HINT = "fetch them with `lakelog jars fetch` (Maven), or `./dev` in a checkout"


def jars_dir() -> Path:
    """`$LAKELOG_JARS_DIR`, else `$XDG_CACHE_HOME/lakelog/jars` (`~/.cache/lakelog/jars`)."""
    named = os.environ.get(JARS_DIR_VARIABLE)
    if named:
        return Path(named)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "lakelog" / "jars"


def pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def fetched_jars(folder: Path | None = None) -> list[Path] | None:
    """The jars in `folder` (default `jars_dir()`) if they were fetched from this pom, else None."""
    folder = folder if folder is not None else jars_dir()
    try:
        stamp = (folder / STAMP).read_text().strip()
    except OSError:
        return None
    if stamp != pom_digest():
        return None
    return sorted(folder.glob("*.jar"))


def missing(folder: Path | None = None) -> str:
    """One line: what is missing, and how to fetch it."""
    folder = folder if folder is not None else jars_dir()
    return (
        f"lakelog: Delta Lake's Spark jars are not in {folder} ({FETCH_HINT}): Spark reads lakelog's tables through "
        "lakelog's Python data source only, without format('delta') or s3a"
    )


def spark_conf(folder: Path | None = None) -> dict[str, str]:
    """The Spark properties that load the fetched jars and Delta; empty when they are absent."""
    jars = fetched_jars(folder)
    if not jars:
        return {}
    classpath = os.pathsep.join(str(jar) for jar in jars)
    return {
        "spark.driver.extraClassPath": classpath,
        "spark.executor.extraClassPath": classpath,
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    }


def fetch(folder: Path | None = None) -> list[Path]:
    """Fetch the pom's jars into `folder` with Maven (nothing to do when they are there); returns them.

    Into a fresh folder beside it, renamed into place: a fetch cut short leaves no half folder behind a good stamp.
    """
    folder = folder if folder is not None else jars_dir()
    jars = fetched_jars(folder)
    if jars:
        return jars
    maven = shutil.which("mvn")
    if maven is None:
        raise KafkaException(KafkaError(KafkaError._NOENT, "Maven (mvn) fetches lakelog's JVM jars and is not installed"))
    partial = folder.with_name(f"{folder.name}.partial.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    command = [maven, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime"]
    logger.info("fetching %s's jars into %s", POM, folder)
    result = subprocess.run([*command, f"-DoutputDirectory={partial}"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:3]
        raise KafkaException(KafkaError(KafkaError._FAIL, f"Maven could not fetch {POM}'s jars: {' / '.join(errors)}"))
    (partial / STAMP).write_text(pom_digest() + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return fetched_jars(folder) or []


__all__ = [
    "DELTA_CATALOG",
    "DELTA_EXTENSION",
    "JARS_DIR_VARIABLE",
    "POM",
    "fetch",
    "fetched_jars",
    "jars_dir",
    "missing",
    "pom_digest",
    "spark_conf",
]
