"""A gate keeps a unit's rows batch by batch in the columns its suite reads (issue 13, S11.1; StagedRows):
judging them gives the verdict, the failures and the offsets that validating the whole unit's rows at once gives."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakelog.log.records import HEADER_TYPE, PAYLOAD_SCHEMA
from lakelog.quality import parse_suite, validate
from lakelog.quality.fields import field_values, json_field_columns, merge_field_columns
from lakelog.quality.results import OffsetRange
from lakelog.quality.staged import StagedRows
from tests.quality.conftest import ORDERS_SUITE

FIELDS = ["a", "b", "c.d"]

scalars = st.one_of(
    st.none(), st.integers(-(2**40), 2**40), st.floats(-1e9, 1e9, allow_nan=False), st.text(max_size=4), st.booleans()
)
objects = st.dictionaries(st.sampled_from(["a", "b", "x"]), scalars, max_size=3).map(lambda doc: json.dumps(doc).encode())
# Mostly one-line objects (the Arrow path), sometimes a value that sends its batch row by row.
values_strategy = st.lists(
    st.one_of(objects, objects, objects, st.sampled_from([b"[1]", b"not json", b'{"a": 1,\n "b": 2}', b""])),
    min_size=1,
    max_size=40,
)


def as_lists(columns: dict) -> dict[str, list]:
    """The values the frame gets, a null of a float column (NaN there) as None: NaN is never equal to itself."""

    def plain(value):
        return None if isinstance(value, float) and math.isnan(value) else value

    return {name: [plain(value) for value in field_values(column)] for name, column in columns.items()}


@settings(max_examples=150, deadline=None)
@given(values=values_strategy, cuts=st.lists(st.integers(0, 40), max_size=4))
@example(values=[b"{}", b'{"a": 0.0}'], cuts=[])  # a null beside floats: NaN in the frame on both sides
def test_S11_1_fields_parsed_batch_by_batch_are_the_fields_of_the_whole_unit(values, cuts):
    """Invariant: merging the per-batch parses gives every field's values as parsing all values at once does
    (Arrow's types unified as its reader unifies its blocks; a conflict or a row-by-row batch gives Python values)."""
    bounds = sorted({0, len(values), *(cut for cut in cuts if cut <= len(values))})
    batches = [values[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]
    parts = [json_field_columns(pa.array(batch, pa.binary()), FIELDS) for batch in batches]
    whole = json_field_columns(pa.array(values, pa.binary()), FIELDS)
    assert as_lists(merge_field_columns(parts, FIELDS)) == as_lists(whole)


def test_S11_1_types_are_unified_across_batches_as_the_json_reader_does():
    parts = [
        json_field_columns(pa.array([b'{"a": 1, "c": {"d": 1}}'], pa.binary()), ["a", "c"]),
        json_field_columns(pa.array([b'{"a": 1.5, "c": {"e": "x"}}'], pa.binary()), ["a", "c"]),
        json_field_columns(pa.array([b'{"b": 2}'], pa.binary()), ["a", "c"]),
    ]
    merged = merge_field_columns(parts, ["a", "c"])
    assert merged["a"].type == pa.float64() and merged["a"].to_pylist() == [1.0, 1.5, None]
    assert merged["c"].type == pa.struct([("d", pa.int64()), ("e", pa.string())])
    conflicting = [
        json_field_columns(pa.array([b'{"a": 1}'], pa.binary()), ["a"]),
        json_field_columns(pa.array([b'{"a": "x"}'], pa.binary()), ["a"]),
    ]
    assert merge_field_columns(conflicting, ["a"]) == {"a": [1, "x"]}
    assert merge_field_columns([], ["a"]) == {"a": []}


def payload(values: list[bytes], first_key: int) -> pa.Table:
    count = len(values)
    return pa.table(
        {
            "timestamp": pa.array([1_700_000_000_000_000 + i for i in range(count)], pa.timestamp("us", tz="UTC")),
            "key": pa.array([f"k{first_key + i}".encode() for i in range(count)], pa.binary()),
            "value": pa.array(values, pa.binary()),
            "headers": pa.array([[] for _ in range(count)], HEADER_TYPE),
        },
        schema=PAYLOAD_SCHEMA,
    )


def test_only_the_columns_the_suite_reads_are_kept():
    """The unit's JSON values are not held: the suite names value fields and key, so key, partition and offset."""
    staged = StagedRows(parse_suite(json.dumps(ORDERS_SUITE), "orders"), "orders")
    staged.add(payload([b'{"customer": "c", "amount_cents": 1}'] * 3, 0), 2, 10)
    assert staged.rows().column_names == ["key", "partition", "offset"]
    assert staged.rows().column("offset").to_pylist() == [10, 11, 12]
    assert staged.offset_ranges() == [OffsetRange(2, 10, 12)]
    empty = StagedRows(parse_suite(json.dumps(ORDERS_SUITE), "orders", mode="dead-letter"), "orders")
    assert empty.rows().column_names == ["key", "partition"] and empty.rows().num_rows == 0


@pytest.mark.usefixtures("gx")
def test_S11_1_a_unit_judged_batch_by_batch_gets_the_verdict_of_the_whole_unit():
    """10 batches of 1,000 rows in 2 partitions, one bad amount and one repeated key across batches: the failures,
    their values and offsets are those of validating every row at once; the fixed unit passes."""
    suite = parse_suite(json.dumps(ORDERS_SUITE), "orders")
    staged, whole = StagedRows(suite, "orders"), []
    for batch in range(10):
        values = [
            json.dumps({"customer": f"c{i}", "amount_cents": -7 if batch * 1000 + i == 4321 else i}).encode() for i in range(1000)
        ]
        rows = payload(values, first_key=batch * 1000 if batch != 9 else 0)  # batch 9 repeats keys k0..k999
        partition, base = batch % 2, (batch // 2) * 1000
        staged.add(rows, partition, base)
        whole.append(
            rows.append_column("partition", pa.repeat(pa.scalar(partition, pa.int32()), 1000)).append_column(
                "offset", pa.arange(base, base + 1000)
            )
        )
    verdict = staged.judge()
    expected = validate(suite, pa.concat_tables(whole))
    assert not verdict.result.success
    assert verdict.result.failures == expected.failures
    assert verdict.result.statistics == expected.statistics
    amounts = next(f for f in verdict.result.failures if f.column == "value.amount_cents")
    assert amounts.unexpected_values == [-7] and amounts.unexpected_offsets == [2321]
    assert staged.offset_ranges() == [OffsetRange(0, 0, 4999), OffsetRange(1, 0, 4999)]
