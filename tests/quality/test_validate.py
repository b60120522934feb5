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


def fast_fields(column: pa.ChunkedArray, fields: list[str]) -> dict[str, list]:
    """The fields as the frame gets them from json_field_columns (Arrow columns through pandas), as lists."""
    from lakelog.quality.fields import field_values, json_field_columns

    return {name: list(field_values(values)) for name, values in json_field_columns(column, fields).items()}


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
    assert (failure.type, failure.column, failure.unexpected_values) == ("expect_column_values_to_be_unique", "key", ["a", "a"])
    empty = validate(suite, staged_rows([]))
    assert [failure.type for failure in empty.failures] == ["expect_table_row_count_to_be_between"]


def test_nested_json_fields_are_joined_with_dots():
    document = {
        "name": "nested",
        "expectations": [
            {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value.customer.tier", "value_set": ["gold"]}}
        ],
    }
    suite = parse_suite(json.dumps(document), "orders")
    values = [json.dumps({"customer": {"tier": tier}}).encode() for tier in ("gold", "gold", "tin")]
    [failure] = validate(suite, staged_rows(values)).failures
    assert failure.unexpected_values == ["tin"] and failure.unexpected_offsets == [102]


def amounts(rows: pa.Table) -> pa.Table:
    """A parse function: values are "customer,amount" text."""
    parts = [value.decode().split(",") for value in rows.column("value").to_pylist()]
    return pa.table({"customer": [p[0] for p in parts], "amount": [int(p[1]) for p in parts]})


def test_a_parse_function_output_is_validated():
    document = {
        "name": "csv",
        "expectations": [{"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 0}}],
    }
    # A parse function's columns are not known when the suite is set, so they are not checked then.
    suite = parse_suite(json.dumps(document), "orders", parse=f"{__name__}:amounts")
    result = validate(suite, staged_rows([b"a,1", b"b,-2"]))
    assert [failure.unexpected_values for failure in result.failures] == [[-2]]

    missing = parse_suite(
        json.dumps(
            {"name": "csv", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "currency"}}]}
        ),
        "orders",
        parse=f"{__name__}:amounts",
    )
    with pytest.raises(InvalidRequest, match="names column 'currency', which the rows do not have"):
        validate(missing, staged_rows([b"a,1"]))
    with pytest.raises(InvalidConfig, match="parse function .* failed: ValueError"):
        validate(suite, staged_rows([b"a,notanumber"]))


def test_a_kafka_column_the_rows_lack_is_a_clear_error():
    """A producer's rows in hand have no offsets yet: a suite on `offset` says so instead of a GX traceback."""
    document = {"name": "o", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "offset"}}]}
    suite = parse_suite(json.dumps(document), "orders")
    with pytest.raises(InvalidRequest, match="names column 'offset', which the rows do not have"):
        validate(suite, staged_rows([b"{}"]).drop(["offset"]))


@pytest.mark.parametrize(
    "values",
    [
        [b'{"customer": "a", "amount_cents": 1}', b'{"customer": null, "amount_cents": 2}', b'{"customer": "c"}'],
        [b'{"customer": {"tier": "gold"}, "amount_cents": 5}', b'{"amount_cents": -1}'],
        [b'{"customer": "a", "amount_cents": 1}', b"[1, 2]"],  # not an object: row by row
        [b'{"customer": "a",\n "amount_cents": 1}', b'{"customer": "b"}'],  # pretty-printed: row by row
        # Each of these is one top-level object per line only if read value by value: the Arrow path must decline.
        [b'{"customer": {}', b'{"amount_cents": 1}}'],
        [b'{"customer": "a"}{"customer": "b"}', b'{"amount_cents": 1}', b'{"customer": "c"}'],
        [b'{"customer": "a"}{"customer": "b"}', b"", b'{"customer": "c"}'],
        [b' {"customer": "a"}', b'{"customer": "b"} '],
    ],
    ids=["flat", "nested", "not-an-object", "multi-line", "object-split", "two-objects", "two-and-empty", "spaces"],
)
def test_arrow_json_reader_and_row_by_row_agree(values):
    from lakelog.quality.fields import _json_fields_python

    fields = ["customer", "customer.tier", "amount_cents"]
    column = pa.chunked_array([pa.array(values, pa.binary())])
    fast = {name: list(series) for name, series in fast_fields(column, fields).items()}
    slow = _json_fields_python(column, fields)
    assert fast.keys() == slow.keys()
    assert fast == slow


def test_arrow_path_reads_chunked_and_sliced_values():
    """The joined buffer is built from the Arrow offsets: chunks and a slice's offset must not shift a row."""
    from lakelog.quality.fields import _json_fields_python

    values = [json.dumps({"customer": f"c{i}", "amount_cents": i}).encode() for i in range(10)]
    column = pa.chunked_array([pa.array(values[:4], pa.binary()), pa.array(values[4:], pa.binary()).slice(2)])
    fast = {name: list(series) for name, series in fast_fields(column, ["customer", "amount_cents"]).items()}
    assert fast == _json_fields_python(column, ["customer", "amount_cents"])
    assert fast["customer"] == ["c0", "c1", "c2", "c3", "c6", "c7", "c8", "c9"]


CURRENCY_SUITE = {
    **ORDERS_SUITE,
    "expectations": [
        *ORDERS_SUITE["expectations"],
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value.currency", "value_set": ["EUR", "USD"]}},
    ],
}


def test_the_arrow_path_and_the_row_by_row_path_give_the_same_result():
    """The same documents, compact (Arrow's reader, Arrow-backed text) and pretty-printed (row by row, Python
    objects): GX's verdict, statistics and failures are the same."""
    suite = parse_suite(json.dumps(CURRENCY_SUITE), "orders")
    documents = [{"customer": f"c{i % 7}", "amount_cents": i, "currency": "EUR"} for i in range(200)]
    documents[3]["customer"] = None
    documents[50]["amount_cents"] = -1
    documents[70]["currency"] = "XXX"
    keys = [f"k{i}".encode() for i in range(199)] + [b"k5"]

    def result(indent):
        rows = staged_rows([json.dumps(doc, indent=indent).encode() for doc in documents], keys=keys)
        return validate(suite, rows)

    from lakelog.quality.validate import validation_frame

    compact_frame = validation_frame(suite, staged_rows([json.dumps(doc).encode() for doc in documents], keys=keys))
    assert str(compact_frame["value.currency"].dtype) == "string"  # the Arrow path was taken
    compact, pretty = result(None), result(2)
    assert (compact.success, compact.statistics) == (pretty.success, pretty.statistics)
    assert compact.failures == pretty.failures
    assert {(failure.column, tuple(failure.unexpected_offsets)) for failure in compact.failures} == {
        ("value.customer", (103,)),
        ("value.amount_cents", (150,)),
        ("value.currency", (170,)),
        ("key", (105, 299)),
    }


# One example per expectation of ARROW_STRING_EXPECTATIONS, on the text columns of ARROW_ROWS.
ARROW_EXAMPLES = {
    "expect_column_values_to_not_be_null": {"column": "value.customer"},
    "expect_column_values_to_be_null": {"column": "value.customer"},
    "expect_column_values_to_be_in_set": {"column": "value.currency", "value_set": ["EUR", "USD", "GBP"]},
    "expect_column_values_to_not_be_in_set": {"column": "value.currency", "value_set": ["XXX"]},
    "expect_column_values_to_be_unique": {"column": "key"},
    "expect_column_values_to_match_regex": {"column": "value.customer", "regex": "^c[0-9]$"},
    "expect_column_values_to_not_match_regex": {"column": "key", "regex": "1"},
    "expect_column_value_lengths_to_be_between": {"column": "value.customer", "min_value": 1, "max_value": 3},
    "expect_column_value_lengths_to_equal": {"column": "value.currency", "value": 3},
    "expect_column_distinct_values_to_be_in_set": {"column": "value.currency", "value_set": ["EUR", "USD", "GBP"]},
    "expect_column_distinct_values_to_contain_set": {"column": "value.currency", "value_set": ["EUR", "YEN"]},
    "expect_column_distinct_values_to_equal_set": {"column": "value.currency", "value_set": ["EUR", "USD", "GBP"]},
    "expect_column_unique_value_count_to_be_between": {"column": "value.customer", "min_value": 1, "max_value": 5},
    "expect_column_proportion_of_unique_values_to_be_between": {"column": "value.customer", "min_value": 0.5},
    "expect_column_most_common_value_to_be_in_set": {"column": "value.currency", "value_set": ["EUR"]},
    "expect_compound_columns_to_be_unique": {"column_list": ["value.customer", "value.currency"]},
    "expect_select_column_values_to_be_unique_within_record": {"column_list": ["value.customer", "value.currency"]},
}


def arrow_rows() -> pa.Table:
    documents = [{"customer": f"c{i % 7}", "amount_cents": i * 10, "currency": ["EUR", "USD", "GBP"][i % 3]} for i in range(60)]
    documents[3]["customer"] = None
    documents[4]["currency"] = "XXX"
    documents[6]["customer"] = "a very long customer name"
    documents[7]["currency"] = ""
    return staged_rows([json.dumps(doc).encode() for doc in documents], keys=[f"k{i % 50}".encode() for i in range(60)])


def test_every_arrow_string_expectation_has_an_example():
    from lakelog.quality.validate import ARROW_STRING_EXPECTATIONS

    assert set(ARROW_EXAMPLES) == ARROW_STRING_EXPECTATIONS


@pytest.mark.parametrize("expectation", sorted(ARROW_EXAMPLES))
def test_arrow_backed_text_gives_gx_the_result_python_text_gives(expectation):
    """Text stays Arrow-backed only for expectations whose GX result is the same on Python str objects."""
    import pandas as pd

    from lakelog.quality.validate import validation_frame

    suite = parse_suite(
        json.dumps({"name": "one", "expectations": [{"type": expectation, "kwargs": ARROW_EXAMPLES[expectation]}]}), "orders"
    )
    arrow_frame = validation_frame(suite, arrow_rows())
    text = [name for name in arrow_frame.columns if isinstance(arrow_frame[name].dtype, pd.StringDtype)]
    assert text
    python_frame = arrow_frame.copy()
    for name in text:
        python_frame[name] = pd.Series([None if v is pd.NA else v for v in arrow_frame[name]], dtype=object)
    assert gx_result(suite, arrow_frame) == gx_result(suite, python_frame)


def gx_result(suite, frame) -> dict:
    """GX's result of `suite` on `frame`, as validate() runs it."""
    import importlib

    from lakelog.quality import validate as _  # noqa: F401 - the module, below

    module = importlib.import_module("lakelog.quality.validate")
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    gx_suite = ExpectationSuite(
        name=suite.name,
        expectations=[ExpectationConfiguration(type=item["type"], kwargs=item["kwargs"]) for item in suite.expectations],
    )
    with module._gx_lock, module._no_batch_fingerprint():
        outcome = module._validator(frame).validate_expectation_suite(gx_suite)
    [item] = json.loads(json.dumps(outcome.to_json_dict(), default=str))["results"]
    return {"success": item["success"], "result": item["result"], "exception": item["exception_info"]}


def test_a_type_expectation_sees_python_text():
    """GX's type checks read "str" from Python objects and "string" from Arrow's dtype: their columns stay Python."""
    from lakelog.quality.validate import validation_frame

    suite = parse_suite(
        json.dumps(
            {
                "name": "types",
                "expectations": [
                    {
                        "type": "expect_column_values_to_be_in_type_list",
                        "kwargs": {"column": "value.customer", "type_list": ["str"]},
                    },
                    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "value.currency"}},
                    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "key"}},
                ],
            }
        ),
        "orders",
    )
    rows = arrow_rows()
    frame = validation_frame(suite, rows)
    assert {name: str(frame[name].dtype) for name in frame.columns} == {
        "value.customer": "object",
        "value.currency": "string",
        "key": "string",
    }
    assert [failure.type for failure in validate(suite, rows).failures] == ["expect_column_values_to_be_unique"]


def test_gx_batch_fingerprint_is_skipped_only_while_lakelog_validates():
    from great_expectations.execution_engine import pandas_execution_engine

    before = pandas_execution_engine.HASH_THRESHOLD
    validate(parse_suite(json.dumps(ORDERS_SUITE), "orders"), orders(count=10))
    assert pandas_execution_engine.HASH_THRESHOLD == before


def test_iso_looking_strings_stay_text_on_the_arrow_path():
    """Arrow's reader types "2026-11-24" as a timestamp; a suite sees the string the JSON holds, on both paths."""
    from lakelog.quality.fields import _json_fields_python

    values = [
        b'{"created": "2026-11-24T01:00:00Z", "customer": {"since": "2026-11-24"}, "days": ["2026-01-01"]}',
        b'{"created": "2026-11-25", "customer": {"since": null}, "days": []}',
    ]
    column = pa.chunked_array([pa.array(values, pa.binary())])
    fields = ["created", "customer.since", "days"]
    fast = {name: list(series) for name, series in fast_fields(column, fields).items()}
    assert fast["created"] == ["2026-11-24T01:00:00Z", "2026-11-25"]
    assert fast["customer.since"] == ["2026-11-24", None]
    assert [list(days) for days in fast["days"]] == [["2026-01-01"], []]
    assert {name: column for name, column in fast.items() if name != "days"} == {
        name: column for name, column in _json_fields_python(column, fields).items() if name != "days"
    }
