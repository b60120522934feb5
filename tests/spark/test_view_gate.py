"""Quality gates on view refreshes (issue 13 item 2): materialize_committed_view validates its new rows against the
topic's suite before it commits them (S11.1, S11.2, S8.3).

Here in tests/spark to share the session's Spark fixture. A refresh whose rows fail an enforce suite commits
nothing (the view's files byte-identical), records the failure and raises PolicyViolation; the job exits 2 with one
line. A pass or a warn failure commits with the validation id in the commit's metadata, and its result row is
recorded after the commit.
"""

from __future__ import annotations

import json

import pytest
from helpers import table_fingerprint

from lakelog import catalog
from lakelog.errors import PolicyViolation
from lakelog.jobs.batch_writer import TransactionalBatchWriter
from lakelog.log import create_topic, payload_table
from lakelog.quality import read_results, write_suite
from lakelog.quality.results import failed_expectations
from pipelines import materialize_committed_view as view_job
from pipelines.materialize_committed_view import VALIDATION_METADATA_KEY, materialize_committed_view, view_position
from tests.quality.conftest import ORDERS_SUITE

pytestmark = [pytest.mark.spark, pytest.mark.roots("local", "s3")]

ROWS = 10_000
BAD_ROW = 4_321


def orders(first: int, count: int, bad: int | None = None):
    values = [
        json.dumps({"customer": f"c{i % 97}", "amount_cents": -5 if i == bad else i * 10}).encode()
        for i in range(first, first + count)
    ]
    return payload_table(values, keys=[f"o{i}".encode() for i in range(first, first + count)])


def committed_metadata(view) -> str | None:
    view.refresh()
    [latest] = view.history(1)
    return latest.get(VALIDATION_METADATA_KEY)


def view_results(root: str) -> list[dict]:
    """The refreshes' result rows, latest first (the writes into the gated topic record theirs too)."""
    return [row for row in read_results(root, topic="orders").to_pylist() if (row["load_unit"] or "").startswith("view:")]


def suite(root: str, mode: str) -> None:
    write_suite(root, "orders", json.dumps(ORDERS_SUITE), mode=mode)


def test_S11_1_S11_2_S8_3_a_view_refresh_with_a_bad_row_does_not_commit_and_the_view_stays(spark, root, capsys):
    create_topic(root, "orders", 2)
    writer = TransactionalBatchWriter(root, "feed")
    suite(root, "enforce")
    writer.write({("orders", 0): [orders(0, 1_000)]}, 0)

    first = materialize_committed_view(spark, root, "orders")
    view = catalog.open_view(root, "orders")
    assert first.version == 1 and first.validation_id and committed_metadata(view) == first.validation_id
    [passed] = view_results(root)
    assert (passed["validation_id"], passed["success"], passed["load_unit"]) == (first.validation_id, True, "view:orders:v1")

    # A bad row reaches the topic through a warn suite; with the suite back at enforce the refresh is refused.
    suite(root, "warn")
    writer.write({("orders", 0): [orders(1_000, ROWS // 2, bad=BAD_ROW)], ("orders", 1): [orders(6_000, ROWS // 2)]}, 1)
    suite(root, "enforce")
    before = table_fingerprint(view.location.uri)
    with pytest.raises(PolicyViolation, match="expect_column_values_to_be_between on value.amount_cents") as raised:
        materialize_committed_view(spark, root, "orders")
    assert table_fingerprint(view.location.uri) == before  # nothing committed, the run's files deleted (S8.3)
    view.refresh()
    assert view.version == 1 and view_position(view, 1) == 0
    refused = view_results(root)[0]
    assert (refused["validation_id"], refused["success"]) == (raised.value.validation_id, False)
    assert refused["row_count"] == ROWS and refused["load_unit"] == "view:orders:v2"
    assert failed_expectations(refused)[0]["unexpected_values"] == [-5]
    # The job: exit 2 and one line.
    assert view_job.main(["--root", root, "--topic", "orders"]) == view_job.EXIT_REFUSED
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("materialize_committed_view: POLICY_VIOLATION: suite orders failed")

    # warn (and dead-letter, which a view treats as warn): the refresh commits and records the failure.
    suite(root, "warn")
    second = materialize_committed_view(spark, root, "orders")
    assert second.version == 2 and second.rows == ROWS and committed_metadata(view) == second.validation_id
    warned = view_results(root)[0]
    assert (warned["validation_id"], warned["success"], warned["mode"]) == (second.validation_id, False, "warn")
