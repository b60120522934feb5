"""The staged files of Spark writes that never committed: what the sweep's `spark-staging` step removes.

A `format("lakelog")` write stages Parquet files under `<root>/_spark_staging/<write>/` from its tasks; the driver
reads them into one transaction and deletes the folder (pyspark_lakelog.source). A driver killed between the two
leaves the folder behind. Its rows are in no commit, so they are invisible (S4.4, S5.2), and a rerun of the write
(the same `transactional.id` and `batch.id`) stages its own files and commits the unit once (S10.2): the folder is
litter. The sweep removes a write's folder once its newest file is older than `staging.retention.ms` (broker config,
a day by default). That is tidiness, never safety (S9.5): a live write whose folder were removed under it fails its
commit reading a missing file, and commits nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lakelog import config
from lakelog.store import Location, open_root

logger = logging.getLogger(__name__)

SPARK_STAGING_DIR = "_spark_staging"


@dataclass(frozen=True)
class StagingRemoval:
    """One write's staging folder the sweep removed: its name, its files and bytes, its newest file's age."""

    write: str
    files: int
    bytes: int
    age_ms: int


def clean_spark_staging(root: str | Location, now_ms: int, retention_ms: int | None = None) -> list[StagingRemoval]:
    """Remove every `<root>/_spark_staging/<write>/` whose newest file is older than `retention_ms` (by default the
    broker config's `staging.retention.ms`) at `now_ms`; an empty folder counts from its own time."""
    location = open_root(root)
    if retention_ms is None:
        retention_ms = config.load("broker")["staging.retention.ms"]
    staging = location / SPARK_STAGING_DIR
    if not staging.exists():
        return []
    removed: list[StagingRemoval] = []
    for entry in staging.list():
        if not entry.is_dir:
            continue
        write = staging / entry.name
        files = [info for info in write.list(recursive=True) if not info.is_dir]
        times = [info.mtime for info in files if info.mtime is not None]
        if not files and entry.mtime is not None:
            times = [entry.mtime]
        if not times:
            continue  # a store that gives no times: never guess an age
        age_ms = now_ms - int(max(times) * 1000)
        if age_ms <= retention_ms:
            continue
        write.io.delete_tree(write.uri)
        size = sum(info.size for info in files)
        logger.info(
            "sweep: removed %s (%d staged files, %d bytes, %d s old), a Spark write that never committed",
            write.uri,
            len(files),
            size,
            age_ms // 1000,
        )
        removed.append(StagingRemoval(entry.name, len(files), size, age_ms))
    return removed


__all__ = ["SPARK_STAGING_DIR", "StagingRemoval", "clean_spark_staging"]
