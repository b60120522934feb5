"""The sweep's `spark-staging` step: a Spark write's staged files that no driver committed are removed once their
newest file is older than `staging.retention.ms`, on the passed-in clock, and never sooner (S9.5: tidiness only; the
files are in no commit, so nothing a reader sees changes, S4.4). The cluster test kills a real driver before its
commit and sweeps what it left (tests/spark/test_spark_cluster.py)."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidConfig
from lakelog.jobs import maintenance
from lakelog.jobs.maintenance import Sweeper
from lakelog.jobs.spark_staging import SPARK_STAGING_DIR, clean_spark_staging
from lakelog.log.partition import wall_clock_ms
from lakelog.store import Location

pytestmark = pytest.mark.roots("local", "s3")

DAY_MS = 86_400_000


def stage(root: str, write: str, names: tuple[str, ...] = ("a.parquet", "b.parquet")) -> Location:
    folder = Location.of(root) / SPARK_STAGING_DIR / write
    for name in names:
        folder.io.write((folder / name).uri, b"staged rows")
    return folder


def gone(folder: Location) -> bool:
    return not folder.exists() or not folder.list(recursive=True)


def test_S9_5_staged_files_past_the_retention_are_removed_and_younger_ones_kept(root):
    old, young = stage(root, "killed-driver"), stage(root, "live-write", ("c.parquet",))
    now = wall_clock_ms()
    assert clean_spark_staging(root, now + 60_000) == []  # a minute later: both are young
    assert old.exists() and young.exists()

    removed = clean_spark_staging(root, now + 2 * DAY_MS, retention_ms=2 * DAY_MS - 120_000)
    assert sorted(r.write for r in removed) == ["killed-driver", "live-write"]
    assert {r.write: r.files for r in removed} == {"killed-driver": 2, "live-write": 1}
    assert gone(old) and gone(young)


def test_S9_5_the_default_retention_is_a_day_and_the_sweep_runs_the_step(root):
    folder = stage(root, "killed-driver")
    now = wall_clock_ms()
    assert Sweeper(root).spark_staging(now + DAY_MS - 60_000) == []
    assert folder.list(recursive=True)
    (removed,) = Sweeper(root).spark_staging(now + DAY_MS + 60_000)
    assert (removed.write, removed.files, removed.bytes) == ("killed-driver", 2, 2 * len(b"staged rows"))
    assert gone(folder)
    assert maintenance.sweep(root)["spark_staging"] == []  # the whole sweep, on the wall clock: nothing left


def test_a_root_without_staging_and_a_bad_retention(root, monkeypatch, tmp_path):
    assert clean_spark_staging(root, wall_clock_ms()) == []
    conf = tmp_path / "conf"
    conf.mkdir()
    from lakelog.config.loader import conf_dir

    for source in conf_dir().iterdir():
        text = source.read_text()
        if source.name == "broker.properties":
            text = text.replace("staging.retention.ms=86400000", "staging.retention.ms=-1")
        (conf / source.name).write_text(text)
    monkeypatch.setenv("LAKELOG_CONF_DIR", str(conf))
    with pytest.raises(InvalidConfig, match="staging.retention.ms"):
        clean_spark_staging(root, wall_clock_ms())
