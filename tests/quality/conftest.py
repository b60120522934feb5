"""Fixtures of the quality-gate tests: GX is imported, and its ephemeral context made, once per test process."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="session")
def gx():
    """Great Expectations, loaded once (2-7 s) for every test of tests/quality that needs it."""
    import importlib

    importlib.import_module("lakelog.quality.validate")._batch_definition()
    import great_expectations

    return great_expectations


ORDERS_SUITE = {
    "name": "orders",
    "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "value.customer"}},
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "value.amount_cents", "min_value": 0, "max_value": 10_000_000},
        },
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1, "max_value": 10_000_000}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "key"}},
    ],
    "meta": {},
}


@pytest.fixture
def orders_suite() -> str:
    """The issue's example suite, as GX JSON text."""
    return json.dumps(ORDERS_SUITE)
