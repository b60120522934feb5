"""Validation results kept as rows (issue 13 item 3): the internal log __quality_results at `<root>/quality/results/0`,
read_committed (S11.2), read back by `lakelog quality report`, queried by `lakelog sql` and declared by
`lakelog spark-sql-init` as quality_results."""

from __future__ import annotations

import json

import pytest

from lakelog import catalog, sql
from lakelog.cli import main
from lakelog.quality import (
    OffsetRange,
    offset_ranges_of,
    open_results_log,
    parse_suite,
    read_results,
    record_result,
    result_payload,
    results_location,
)
from lakelog.quality.results import failed_expectations, results_log_exists
from tests.quality.conftest import ORDERS_SUITE
from tests.quality.test_validate import BAD_OFFSET, orders

pytestmark = [pytest.mark.roots("local", "s3"), pytest.mark.usefixtures("gx")]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([*args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def results():
    """A failed validation (warn) and a passed one (enforce) of the same 10k rows, once per module."""
    from lakelog.quality import validate

    bad = json.dumps({"customer": "c1", "amount_cents": -5}).encode()
    rows = orders(bad={BAD_OFFSET: bad})
    failed = validate(parse_suite(json.dumps(ORDERS_SUITE), "orders", mode="warn"), rows)
    passed = validate(parse_suite(json.dumps(ORDERS_SUITE), "orders"), orders())
    return failed, passed, offset_ranges_of(rows)


def test_result_rows_are_written_and_read_back_by_quality_report(root, topic, capsys, results):
    name = topic(name="orders")
    failed, passed, ranges = results
    assert ranges == [OffsetRange(0, 0, 9_999), OffsetRange(1, 1, 9_997), OffsetRange(2, 2, 9_998)]
    assert not results_log_exists(root)
    first = record_result(
        root, failed, transactional_id="loader-1", producer_id=7, producer_epoch=3, offset_ranges=ranges, now_ms=1_000
    )
    second = record_result(root, passed, load_unit="orders-2026-11-23", now_ms=2_000)
    log = open_results_log(root)
    assert log.log_end_offset() == 2  # one record per result
    assert log.table.location.uri == (results_location(root) / "0").uri
    assert results_location(root).uri.rstrip("/").endswith("quality/results")

    rows = read_results(root, topic=name).to_pylist()
    assert [row["validation_id"] for row in rows] == [second, first]  # latest first
    latest, earlier = rows
    assert (latest["success"], latest["mode"], latest["load_unit"]) == (True, "enforce", "orders-2026-11-23")
    assert (earlier["success"], earlier["mode"], earlier["transactional_id"]) == (False, "warn", "loader-1")
    assert (earlier["producer_id"], earlier["producer_epoch"], earlier["row_count"]) == (7, 3, 10_000)
    assert earlier["offset_ranges"][0] == {"partition": 0, "first_offset": 0, "last_offset": 9_999}
    assert json.loads(earlier["statistics"])["unsuccessful_expectations"] == 1
    [failure] = failed_expectations(earlier)
    assert (failure["type"], failure["column"], failure["unexpected_values"], failure["unexpected_offsets"]) == (
        "expect_column_values_to_be_between",
        "value.amount_cents",
        [-5],
        [BAD_OFFSET],
    )

    code, out, err = cli(capsys, "quality", "report", "--topic", name, "--json", "--root", root)
    assert code == 0, err
    reported = [json.loads(line) for line in out.splitlines()]
    assert [row["validation_id"] for row in reported] == [second, first]
    assert reported[1]["failed_expectations"][0]["unexpected_values"] == [-5]
    assert reported[1]["mode"] == "warn" and reported[0]["mode"] == "enforce"

    code, out, err = cli(capsys, "quality", "report", "--topic", name, "--root", root)
    assert code == 0, err
    lines = out.splitlines()
    assert "passed" in lines[0] and "mode=enforce" in lines[0]
    assert "producer=-" in lines[0]  # a load's result: no producer id (not "None/0")
    assert "FAILED" in lines[1] and "mode=warn" in lines[1] and "unit=loader-1" in lines[1] and "producer=7/3" in lines[1]
    assert "expect_column_values_to_be_between value.amount_cents: 1 unexpected, e.g. [-5]" in lines[2]

    code, out, err = cli(capsys, "quality", "report", "--topic", "other", "--root", root)
    assert (code, out) == (0, "") and "no validation results for topic other" in err


def test_sql_and_spark_sql_init_see_quality_results(root, topic, results):
    topic(name="orders")
    assert "quality_results" not in sql.tables(root)
    assert "quality_results" not in catalog.spark_sql_init(root)
    failed, passed, _ = results
    record_result(root, failed, now_ms=1_000)
    record_result(root, passed, now_ms=2_000)
    answer = sql.query(root, "SELECT mode, success, row_count FROM quality_results ORDER BY validated_at").to_pylist()
    assert answer == [
        {"mode": "warn", "success": False, "row_count": 10_000},
        {"mode": "enforce", "success": True, "row_count": 10_000},
    ]
    init = catalog.spark_sql_init(root)
    # Read through the lakelog source, which reads the log's read_committed rows decoded.
    assert (
        f"CREATE OR REPLACE TEMPORARY VIEW `quality_results` USING lakelog OPTIONS (`root` '{root}', `quality` 'results');"
        in init
    )
    assert catalog.quality_results_path(root).uri == results_location(root).uri


def test_report_joins_each_result_with_its_transactions_outcome(root, topic, capsys, results):
    """A result row records a validation; whether its rows were published is read from the transaction (S4.5, S5.1,
    S5.3): a passed verdict of a transaction that aborted or is still open never reads as committed."""
    from lakelog.log import BatchHeader, ControlType, open_partition, payload_table
    from lakelog.log.verification import _UNVERIFIED

    name = topic(name="orders")
    _, passed, _ = results
    log = open_partition(root, name, 0)
    units = {}
    for producer_id, end in ((11, ControlType.COMMIT), (12, ControlType.ABORT), (13, None)):
        first = log.append(
            payload_table([b"{}", b"{}"]), BatchHeader(producer_id, 0, 0, is_transactional=True), transaction=_UNVERIFIED
        ).base_offset
        if end is not None:
            log.append_marker(producer_id, 1, end)  # the end of a transaction bumps the epoch (S4.6)
        units[producer_id] = record_result(
            root,
            passed,
            transactional_id=f"t{producer_id}",
            producer_id=producer_id,
            producer_epoch=0,
            offset_ranges=[OffsetRange(0, first, first + 1)],
            now_ms=producer_id,
        )
    never_written = record_result(
        root,
        passed,
        transactional_id="t14",
        producer_id=14,
        producer_epoch=0,
        offset_ranges=[OffsetRange(0, 100, 101)],
        now_ms=14,
    )
    not_transactional = record_result(root, passed, load_unit="u", now_ms=15)

    code, out, err = cli(capsys, "quality", "report", "--topic", name, "--json", "--root", root)
    assert code == 0, err
    outcomes = {row["validation_id"]: row["outcome"] for row in map(json.loads, out.splitlines())}
    assert outcomes == {
        units[11]: "committed",
        units[12]: "aborted",
        units[13]: "open",
        never_written: "not written",
        not_transactional: "-",
    }


def test_S11_2_a_result_appended_in_a_transaction_is_read_only_once_it_commits(root, topic, results):
    """A result appended inside a writer's transaction shows in read_results only after its COMMIT marker; one of an
    aborted transaction never shows (S11.2), nor does one of a transaction still open (S5.1)."""
    from lakelog.log import BatchHeader, ControlType
    from lakelog.log.verification import _UNVERIFIED

    name = topic(name="orders")
    failed, passed, _ = results
    outside = record_result(root, failed, load_unit="u0", now_ms=1)
    log = open_results_log(root)
    ids = {}
    for producer_id, end in ((21, ControlType.COMMIT), (22, ControlType.ABORT), (23, None)):
        ids[producer_id] = f"v{producer_id}"
        log.append(
            result_payload(passed, validation_id=ids[producer_id], producer_id=producer_id, producer_epoch=0, now_ms=producer_id),
            BatchHeader(producer_id, 0, 0, is_transactional=True),
            transaction=_UNVERIFIED,
        )
        if producer_id == 21:
            assert [row["validation_id"] for row in read_results(root).to_pylist()] == [outside]  # open: not yet
        if end is not None:
            log.append_marker(producer_id, 1, end)
    # 23's transaction is still open: read_committed stops at it (its LSO), like any partition's readers.
    assert sorted(row["validation_id"] for row in read_results(root, topic=name).to_pylist()) == sorted([outside, ids[21]])
    log.append_marker(23, 1, ControlType.ABORT)
    assert sorted(row["validation_id"] for row in read_results(root).to_pylist()) == sorted([outside, ids[21]])
    assert sql.query(root, "SELECT count(*) AS n FROM quality_results").to_pylist() == [{"n": 2}]
