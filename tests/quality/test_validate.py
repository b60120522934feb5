"""Validation of staged rows against a topic's suite (issue 13 items 1, 4): the Kafka-source columns, JSON value
fields flattened to `value.<field>`, or a parse function's output; GX's verdict as a ValidationResult."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lakelog.errors import InvalidConfig, InvalidRequest
from lakelog.log.records import HEADER_TYPE
from lakelog.quality import parse_suite, validate
from tests.quality.conftest import ORDERS_SUITE

pytestmark = pytest.mark.usefixtures("gx")

ROWS = 10_000
BAD_OFFSET = 4_321


def staged_rows(values: list[bytes], *, first_offset: int = 100, keys: list[bytes] | None = None) -> pa.Table:
    """Rows as a transaction stages them, in the Kafka source's columns."""
    count = len(values)
    return pa.table(
        {
            "key": pa.array(keys if keys is not None else [f"k{i}".encode() for i in range(count)], pa.binary()),
            "value": pa.array(values, pa.binary()),
            "partition": pa.array([i % 3 for i in range(count)], pa.int32()),
            "offset": pa.array(range(first_offset, first_offset + count), pa.int64()),
            "timestamp": pa.array([1_700_000_000_000_000 + i for i in range(count)], pa.timestamp("us", tz="UTC")),
            "headers": pa.array([[] for _ in range(count)], HEADER_TYPE),
        }
    )


def orders(count: int = ROWS, bad: dict[int, bytes] | None = None) -> pa.Table:
    values = [json.dumps({"customer": f"c{i % 97}", "amount_cents": i * 10}).encode() for i in range(count)]
    for index, value in (bad or {}).items():
        values[index] = value
    return staged_rows(values, first_offset=0)


@pytest.mark.parametrize("mode", ["enforce", "warn"])
def test_one_bad_value_in_10k_rows_is_found_with_its_offset(mode):
    suite = parse_suite(json.dumps(ORDERS_SUITE), "orders", mode=mode)
    bad = json.dumps({"customer": "c1", "amount_cents": -5}).encode()
    result = validate(suite, orders(bad={BAD_OFFSET: bad}))
    assert not result.success
    assert result.mode == mode
    assert result.row_count == ROWS
    assert result.statistics["evaluated_expectations"] == 4
    assert result.statistics["unsuccessful_expectations"] == 1
    [failure] = result.failures
    assert (failure.type, failure.column) == ("expect_column_values_to_be_between", "value.amount_cents")
    assert failure.unexpected_count == 1
    assert failure.unexpected_values == [-5]
    assert failure.unexpected_offsets == [BAD_OFFSET]
    assert json.loads(result.failures_json())[0]["unexpected_values"] == [-5]
    assert result.gx_result["success"] is False and len(result.gx_result["results"]) == 4
    assert "value.amount_cents" in result.describe()

    violation = result.violation("v-1")
    assert violation.error.name() == "POLICY_VIOLATION"
    assert "expect_column_values_to_be_between on value.amount_cents: 1 unexpected, e.g. [-5]" in str(violation)
    assert (violation.validation_id, violation.gx_result, violation.result) == ("v-1", result.gx_result, result)

    fixed = validate(suite, orders())
    assert fixed.success and fixed.failures == () and fixed.statistics["successful_expectations"] == 4


def test_a_value_that_is_not_json_has_null_fields():
    suite = parse_suite(json.dumps(ORDERS_SUITE), "orders")
    result = validate(suite, orders(count=100, bad={7: b"\xff not json"}))
    assert not result.success
    by_type = {failure.type: failure for failure in result.failures}
    # Its amount_cents is null too, which a range expectation leaves to the null check (GX's mostly/missing rule).
    assert set(by_type) == {"expect_column_values_to_not_be_null"}
    assert by_type["expect_column_values_to_not_be_null"].unexpected_offsets == [7]


def test_key_unique_within_the_load_and_row_count():
    suite = parse_suite(json.dumps(ORDERS_SUITE), "orders")
    values = [json.dumps({"customer": "c", "amount_cents": 1}).encode()] * 4
    result = validate(suite, staged_rows(values, keys=[b"a", b"b", b"a", b"c"]))
    [failure] = result.failures
    assert (failure.type, failure.column, failure.unexpected_values) == (
        "expect_column_values_to_be_unique", "key", ["a", "a"])
    empty = validate(suite, staged_rows([]))
    assert [failure.type for failure in empty.failures] == ["expect_table_row_count_to_be_between"]


def test_nested_json_fields_are_joined_with_dots():
    document = {"name": "nested", "expectations": [
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value.customer.tier", "value_set": ["gold"]}}
    ]}
    suite = parse_suite(json.dumps(document), "orders")
    values = [json.dumps({"customer": {"tier": tier}}).encode() for tier in ("gold", "gold", "tin")]
    [failure] = validate(suite, staged_rows(values)).failures
    assert failure.unexpected_values == ["tin"] and failure.unexpected_offsets == [102]


def amounts(rows: pa.Table) -> pa.Table:
    """A parse function: values are "customer,amount" text."""
    parts = [value.decode().split(",") for value in rows.column("value").to_pylist()]
    return pa.table({"customer": [p[0] for p in parts], "amount": [int(p[1]) for p in parts]})


def test_a_parse_function_output_is_validated():
    document = {"name": "csv", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 0}}
    ]}
    # A parse function's columns are not known when the suite is set, so they are not checked then.
    suite = parse_suite(json.dumps(document), "orders", parse=f"{__name__}:amounts")
    result = validate(suite, staged_rows([b"a,1", b"b,-2"]))
    assert [failure.unexpected_values for failure in result.failures] == [[-2]]

    missing = parse_suite(json.dumps({"name": "csv", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "currency"}}]}),
        "orders", parse=f"{__name__}:amounts")
    with pytest.raises(InvalidRequest, match="names column 'currency', which the rows do not have"):
        validate(missing, staged_rows([b"a,1"]))
    with pytest.raises(InvalidConfig, match="parse function .* failed: ValueError"):
        validate(suite, staged_rows([b"a,notanumber"]))


def test_a_kafka_column_the_rows_lack_is_a_clear_error():
    """A producer's rows in hand have no offsets yet: a suite on `offset` says so instead of a GX traceback."""
    document = {"name": "o", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "offset"}}]}
    suite = parse_suite(json.dumps(document), "orders")
    with pytest.raises(InvalidRequest, match="names column 'offset', which the rows do not have"):
        validate(suite, staged_rows([b"{}"]).drop(["offset"]))


@pytest.mark.parametrize(
    "values",
    [
        [b'{"customer": "a", "amount_cents": 1}', b'{"customer": null, "amount_cents": 2}', b'{"customer": "c"}'],
        [b'{"customer": {"tier": "gold"}, "amount_cents": 5}', b'{"amount_cents": -1}'],
        [b'{"customer": "a", "amount_cents": 1}', b'[1, 2]'],  # not an object: row by row
        [b'{"customer": "a",\n "amount_cents": 1}', b'{"customer": "b"}'],  # pretty-printed: row by row
    ],
    ids=["flat", "nested", "not-an-object", "multi-line"],
)
def test_arrow_json_reader_and_row_by_row_agree(values):
    from lakelog.quality.validate import _json_fields, _json_fields_python

    fields = ["customer", "customer.tier", "amount_cents"]
    column = pa.chunked_array([pa.array(values, pa.binary())])
    fast = {name: list(series) for name, series in _json_fields(column, fields).items()}
    slow = _json_fields_python(column, fields)
    assert fast.keys() == slow.keys()
    assert fast == slow
