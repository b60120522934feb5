"""A maintenance step that fails leaves its commit standing and says so in one WARNING line (issue 12, item 7).

`maintain` never raises (a caller must not mistake a maintenance failure for a failed append): the failure used
to be kept only in `MaintenanceReport.errors`, which nothing read. Now every failed step logs a WARNING naming
the table and the version whose commit ran it, and the step is due again at a later commit.
"""

from __future__ import annotations

import logging

import pytest
from helpers import table_fingerprint

from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.partition_file import PARTITION_ORDER, partition_files
from lakelog.store.upkeep.maintenance import MaintenancePolicy, maintain

pytestmark = pytest.mark.roots("local", "s3")


def test_a_failed_compaction_logs_a_warning_naming_the_table_and_version_and_changes_nothing(root, caplog):
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    for batch in range(3):
        log.append(payload_table([f"v{batch}".encode()]))
    table = log.table
    # A data file goes missing behind the log's back: compaction cannot read it.
    victim = partition_files(table)[0]
    assert table.io.delete(table.child_uri(victim.path))
    before = table_fingerprint(table.uri)
    with caplog.at_level(logging.WARNING, logger="lakelog.store.upkeep.maintenance"):
        report = maintain(table, MaintenancePolicy(merge_order=PARTITION_ORDER, segment_files=2, check_every=1, fan_in=2))
    assert report.compaction is None and len(report.errors) == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "lakelog.store.upkeep.maintenance"]
    assert len(warnings) == 1, caplog.text
    message = warnings[0].getMessage()
    assert table.uri in message and f"compaction after version {table.version} failed" in message
    assert "\n" not in message
    assert table_fingerprint(table.uri) == before  # the failed step committed nothing (S8.3)


def test_maintenance_that_succeeds_logs_no_warning(root, caplog):
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    for batch in range(3):
        log.append(payload_table([f"v{batch}".encode()]))
    with caplog.at_level(logging.WARNING, logger="lakelog.store.upkeep.maintenance"):
        report = maintain(log.table, MaintenancePolicy(merge_order=PARTITION_ORDER, segment_files=2, check_every=1, fan_in=2))
    assert report.errors == [] and report.compaction is not None
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
