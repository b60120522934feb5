"""Validating the rows a write stages against its topic's suite, with Great Expectations (pandas datasource).

The rows are in the Kafka source's columns (lakelog.log.scan.KAFKA_SCHEMA, or
the payload columns a producer holds before offsets exist); `key` and `value`
are validated as UTF-8 text. `value.<field>` columns are the fields of JSON
object values, nested objects joined with dots (`value.customer.id`); a value
that is not a JSON object has every field null. A suite with `parse`
("module:function") validates that function's output instead: it gets the
rows (pyarrow.Table) and returns a pyarrow.Table or a pandas DataFrame.

Only the columns the suite names are converted (plus the row index, so table
expectations such as a row count see every row). GX is imported on the first
validation of the process (about 2 s, lakelog.quality.gx_import) and its ephemeral context is kept for the
next ones; importing lakelog, or producing to an ungated topic, never imports it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakelog.errors import InvalidConfig, InvalidRequest, PolicyViolation
from lakelog.quality.fields import FieldColumns, arrow_strings, field_values, json_field_columns, suite_columns, value_field_names
from lakelog.quality.suites import Suite, expectation_columns, require_great_expectations

logger = logging.getLogger(__name__)

# Unexpected values kept per failed expectation (GX's partial_unexpected_count).
UNEXPECTED_SAMPLE = 5
_TEXT_COLUMNS = ("key", "value")
# Expectations on text whose verdict and result are the same on Arrow-backed and on Python-object columns (checked
# one by one in tests/quality/test_validate.py). A text column another expectation names (the type checks see
# "string" where they saw "str", column pairs compare pd.NA) holds Python objects.
ARROW_STRING_EXPECTATIONS = frozenset(
    {
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_null",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_not_be_in_set",
        "expect_column_values_to_be_unique",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_value_lengths_to_be_between",
        "expect_column_value_lengths_to_equal",
        "expect_column_distinct_values_to_be_in_set",
        "expect_column_distinct_values_to_contain_set",
        "expect_column_distinct_values_to_equal_set",
        "expect_column_unique_value_count_to_be_between",
        "expect_column_proportion_of_unique_values_to_be_between",
        "expect_column_most_common_value_to_be_in_set",
        "expect_compound_columns_to_be_unique",
        "expect_select_column_values_to_be_unique_within_record",
    }
)

_gx_lock = threading.Lock()
_gx_batches: Any = None


@dataclass(frozen=True)
class FailedExpectation:
    """One expectation the rows broke: what it checks, how often it failed, a few of the values (and their offsets)."""

    type: str
    column: str | None
    kwargs: dict[str, Any]
    unexpected_count: int | None = None
    unexpected_values: list[Any] = field(default_factory=list)
    unexpected_offsets: list[int] = field(default_factory=list)
    observed_value: Any = None
    error: str | None = None

    def describe(self) -> str:
        where = f" on {self.column}" if self.column else ""
        if self.error:
            return f"{self.type}{where} raised: {self.error}"
        if self.unexpected_count is not None:
            return f"{self.type}{where}: {self.unexpected_count} unexpected, e.g. {self.unexpected_values[:3]}"
        return f"{self.type}{where}: observed {self.observed_value}"


@dataclass(frozen=True)
class ValidationResult:
    """GX's verdict on one unit of rows: success, its statistics, each failed expectation, and GX's result JSON."""

    suite_name: str
    topic: str
    mode: str
    success: bool
    row_count: int
    statistics: dict[str, Any]
    failures: tuple[FailedExpectation, ...]
    gx_result: dict[str, Any] = field(repr=False)

    def failures_json(self) -> str:
        return json.dumps([_failure_dict(failure) for failure in self.failures], default=str, sort_keys=True)

    def violation(self, validation_id: str | None = None) -> PolicyViolation:
        """The PolicyViolation an enforcing gate raises for this failed result: it names the failed expectations
        and carries `result` (this), `gx_result` (GX's JSON) and `validation_id` (its row in quality/results)."""
        return PolicyViolation(
            self.describe(), result=self, gx_result=self.gx_result, validation_id=validation_id, topic=self.topic
        )

    def describe(self) -> str:
        if self.success:
            return f"suite {self.suite_name} passed on {self.row_count} rows of {self.topic}"
        return f"suite {self.suite_name} failed on {self.row_count} rows of {self.topic}: " + "; ".join(
            failure.describe() for failure in self.failures
        )


def validate(suite: Suite, rows: pa.Table, value_fields: FieldColumns | None = None) -> ValidationResult:
    """Validate `rows` (one write's staged records of `suite.topic`) against `suite`; raises only for a suite that
    does not fit the rows (InvalidRequest: a column they do not have; InvalidConfig: a parse function that fails).

    `value_fields`: the `value.<field>` columns already parsed (json_field_columns, merged with
    merge_field_columns), for a gate that parsed each batch as it went by; else they are parsed from `value`.
    An expectation that raises inside GX is a failure of the result, not an exception.
    """
    require_great_expectations()
    frame = validation_frame(suite, rows, value_fields)
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    gx_suite = ExpectationSuite(
        name=suite.name,
        expectations=[
            ExpectationConfiguration(type=item["type"], kwargs=dict(item.get("kwargs") or {}), meta=item.get("meta"))
            for item in suite.expectations
        ],
    )
    with _gx_lock, _no_batch_fingerprint():
        outcome = _validator(frame).validate_expectation_suite(gx_suite)
    gx_result = json.loads(json.dumps(outcome.to_json_dict(), default=str))
    offsets = rows.column("offset") if "offset" in rows.column_names and not suite.parse else None
    failures = tuple(_failure(item, offsets) for item in gx_result.get("results", []) if not item.get("success"))
    result = ValidationResult(
        suite_name=suite.name,
        topic=suite.topic,
        mode=suite.mode,
        success=bool(gx_result.get("success")),
        row_count=len(frame),
        statistics=dict(gx_result.get("statistics") or {}),
        failures=failures,
        gx_result=gx_result,
    )
    # A WARNING only when the failure is let through (warn): an enforce failure reaches the writer as its error
    # (PolicyViolation, one line in the CLI) and a dead-letter one is logged where the gate routes it.
    (logger.warning if not result.success and suite.mode == "warn" else logger.info)("%s", result.describe())
    return result


def validation_frame(suite: Suite, rows: pa.Table, value_fields: FieldColumns | None = None) -> Any:
    """The pandas DataFrame GX validates: the columns the suite names, from the rows or the parse function
    (`value_fields`: see validate)."""
    import pandas as pd

    named = suite_columns(suite)
    if suite.parse:
        frame = _parsed(suite, rows)
    else:
        columns: dict[str, Any] = {}
        arrow_text = _arrow_text_columns(suite)
        fields = value_field_names(suite)
        if fields and value_fields is None and "value" in rows.column_names:
            value_fields = json_field_columns(rows.column("value"), fields)
        for field_name, column in (value_fields or {}).items():
            name = f"value.{field_name}"
            columns[name] = field_values(column, name in arrow_text)
        for column in named:
            if column in columns or column not in rows.column_names:
                continue
            values = rows.column(column)
            columns[column] = _text(values, column in arrow_text) if column in _TEXT_COLUMNS else values.to_pandas()
        frame = pd.DataFrame(columns, index=pd.RangeIndex(rows.num_rows))
    for index, item in enumerate(suite.expectations):
        for column in expectation_columns(item):
            if column not in frame.columns:
                raise InvalidRequest(
                    f"suite {suite.name} of topic {suite.topic}: expectation {index} ({item['type']}) names column "
                    f"{column!r}, which the rows do not have (they have: {', '.join(map(str, frame.columns)) or 'none'})",
                    topic=suite.topic,
                    column=column,
                )
    return frame


def _parsed(suite: Suite, rows: pa.Table) -> Any:
    import pandas as pd

    module_name, _, function_name = (suite.parse or "").partition(":")  # called only for a suite with `parse`
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        output = function(rows)
    except Exception as error:  # noqa: BLE001 - the user's function; the caller gets one clear error
        raise InvalidConfig(
            f"suite {suite.name} of topic {suite.topic}: parse function {suite.parse} failed: {type(error).__name__}: {error}",
            key="parse",
        ) from None
    if isinstance(output, pa.Table):
        return output.to_pandas()
    if isinstance(output, pd.DataFrame):
        return output
    raise InvalidConfig(
        f"suite {suite.name} of topic {suite.topic}: parse function {suite.parse} returned {type(output).__name__}, "
        f"not a pyarrow.Table or pandas.DataFrame",
        key="parse",
    )


def _text(values: pa.ChunkedArray, arrow: bool = False) -> Any:
    """Binary key/value as UTF-8 text (undecodable bytes replaced), as a pandas Series (Arrow-backed if `arrow`)."""
    import pandas as pd

    try:
        return values.cast(pa.string()).to_pandas(types_mapper=arrow_strings if arrow else None)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.Series([None if v is None else v.decode("utf-8", "replace") for v in values.to_pylist()], dtype=object)


def _arrow_text_columns(suite: Suite) -> frozenset[str]:
    """The columns whose text may stay Arrow-backed (pandas' string[pyarrow]: no Python object per value, and GX's
    null and uniqueness checks run on Arrow's buffers, 3x faster at 1 M rows): those that only expectations of
    ARROW_STRING_EXPECTATIONS name. The others hold Python str objects."""
    named = {column for item in suite.expectations for column in expectation_columns(item)}
    held_back = {
        column
        for item in suite.expectations
        if item["type"] not in ARROW_STRING_EXPECTATIONS
        for column in expectation_columns(item)
    }
    return frozenset(named - held_back)


def _validator(frame: Any) -> Any:
    """GX's validator of one whole-DataFrame batch (its v1 Validator: the batch is loaded once, where
    `Batch.validate` would load it a second time)."""
    from great_expectations.validator.v1_validator import Validator

    return Validator(
        batch_definition=_batch_definition(),
        batch_parameters={"dataframe": frame},
        result_format={"result_format": "SUMMARY", "partial_unexpected_count": UNEXPECTED_SAMPLE},
    )


@contextlib.contextmanager
def _no_batch_fingerprint() -> Iterator[None]:
    """GX fingerprints each pandas batch under HASH_THRESHOLD bytes (an md5 of pandas' hash of every cell, about
    1 s per million rows, a third of a validation); the fingerprint is only a marker in the result's meta, which
    no gate reads, so it is skipped while lakelog's batch loads (under _gx_lock). Harmless if GX drops the knob."""
    from great_expectations.execution_engine import pandas_execution_engine as engine

    threshold = getattr(engine, "HASH_THRESHOLD", None)
    engine.HASH_THRESHOLD = 0
    try:
        yield
    finally:
        if threshold is None:
            del engine.HASH_THRESHOLD
        else:
            engine.HASH_THRESHOLD = threshold


def _batch_definition() -> Any:
    """One ephemeral GX context per process, with a pandas datasource whose batches are whole DataFrames."""
    global _gx_batches
    if _gx_batches is None:
        import great_expectations as gx

        context = gx.get_context(mode="ephemeral")
        try:
            from great_expectations.data_context.types.base import ProgressBarsConfig

            context.variables.progress_bars = ProgressBarsConfig(globally=False)
        except Exception:  # noqa: BLE001 - progress bars are cosmetic
            logger.debug("could not turn GX's progress bars off", exc_info=True)
        asset = context.data_sources.add_pandas("lakelog").add_dataframe_asset("staged_rows")
        _gx_batches = asset.add_batch_definition_whole_dataframe("whole")
        logger.info("Great Expectations %s loaded (ephemeral context)", gx.__version__)
    return _gx_batches


def _failure(item: dict[str, Any], offsets: pa.ChunkedArray | None) -> FailedExpectation:
    config = item.get("expectation_config") or {}
    kwargs = {key: value for key, value in (config.get("kwargs") or {}).items() if key != "batch_id"}
    result = item.get("result") or {}
    exception = item.get("exception_info") or {}
    indexes = result.get("partial_unexpected_index_list") or []
    return FailedExpectation(
        type=config.get("type", "?"),
        column=kwargs.get("column"),
        kwargs=kwargs,
        unexpected_count=result.get("unexpected_count"),
        unexpected_values=list(result.get("partial_unexpected_list") or []),
        unexpected_offsets=_offsets_at(offsets, indexes),
        observed_value=result.get("observed_value"),
        error=exception.get("exception_message") if exception.get("raised_exception") else None,
    )


def _offsets_at(offsets: pa.ChunkedArray | None, indexes: list[Any]) -> list[int]:
    """The offsets of the rows GX names by index (only these are taken: not a Python list of every offset)."""
    if offsets is None:
        return []
    wanted = [i for i in indexes if isinstance(i, int) and 0 <= i < len(offsets)]
    return offsets.take(pa.array(wanted, pa.int64())).to_pylist() if wanted else []


def _failure_dict(failure: FailedExpectation) -> dict[str, Any]:
    return {
        "type": failure.type,
        "column": failure.column,
        "kwargs": failure.kwargs,
        "unexpected_count": failure.unexpected_count,
        "unexpected_values": failure.unexpected_values,
        "unexpected_offsets": failure.unexpected_offsets,
        "observed_value": failure.observed_value,
        "error": failure.error,
    }


__all__ = [
    "ARROW_STRING_EXPECTATIONS",
    "UNEXPECTED_SAMPLE",
    "FailedExpectation",
    "ValidationResult",
    "validate",
    "validation_frame",
]
