"""Quality gates (issue 13): Great Expectations suites attached to topics, validation, results as rows.

Importing this package imports no Great Expectations: GX is loaded by the
first `parse_suite`/`write_suite` or `validate` of the process.
"""

from lakelog.quality.results import (
    RESULTS_SCHEMA,
    OffsetRange,
    offset_ranges_of,
    read_results,
    record_result,
    result_row,
    results_location,
)
from lakelog.quality.suites import MODES, Suite, delete_suite, parse_suite, read_suite, suite_location, write_suite
from lakelog.quality.validate import FailedExpectation, ValidationResult, validate

__all__ = [
    "MODES",
    "RESULTS_SCHEMA",
    "FailedExpectation",
    "OffsetRange",
    "Suite",
    "ValidationResult",
    "delete_suite",
    "offset_ranges_of",
    "parse_suite",
    "read_results",
    "read_suite",
    "record_result",
    "result_row",
    "results_location",
    "suite_location",
    "validate",
    "write_suite",
]
