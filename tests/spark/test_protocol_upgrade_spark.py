"""delta-spark refuses to read tables written before lakelog declared the `invariants` writer feature, and reads
them, with lakelog's rows, once `lakelog upgrade-protocol` (lakelog.jobs.protocol_upgrade) has upgraded them; it is
still refused as their writer (lakelogStrictCommit stays)."""

from __future__ import annotations

import pytest
from lake_kinds import lakelog_rows, tables_under, write_every_kind
from test_delta_spark_conformance import read_delta, rows_of

from lakelog.jobs.protocol_upgrade import upgrade_root
from lakelog.store import Table
from lakelog.store.delta.actions import LAKELOG_WRITER_FEATURE, PROTOCOL

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.roots("local", "s3")]


def test_old_tables_become_readable_by_delta_spark_after_the_upgrade(spark, root, monkeypatch):
    delta = spark
    assert delta.conf.get("spark.sql.extensions", "") == "io.delta.sql.DeltaSparkSessionExtension", "no Delta Lake"
    with monkeypatch.context() as old:
        old.setitem(PROTOCOL, "writerFeatures", [LAKELOG_WRITER_FEATURE])
        write_every_kind(root)
    partition = next(location for location in tables_under(root) if location.uri.endswith("/topics/events/0"))
    version = Table.open(partition).version
    with pytest.raises(Exception, match="DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH"):
        read_delta(delta, partition, version)

    done = upgrade_root(root)

    assert done[partition.uri] == version + 1
    # Every table was upgraded (delta-rs and lakelog read all of them: tests/integration/test_protocol_upgrade.py);
    # delta-spark reads a partition table and an internal log here (a read costs 1-3 s).
    internal = next(location for location in tables_under(root) if "/__" in location.uri and done[location.uri] is not None)
    for location in (partition, internal):
        table = Table.open(location)
        assert rows_of(read_delta(delta, location, table.version)) == rows_of(lakelog_rows(table)), location.uri
    rows = delta.read.format("delta").load(partition.uri)
    with pytest.raises(Exception, match="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE.*lakelogStrictCommit"):
        rows.limit(1).write.format("delta").mode("append").save(partition.uri)
    assert Table.open(partition).version == version + 1
