"""Quality gates: Great Expectations suites attached to topics, validation, results as rows.

Importing this package imports no Great Expectations: GX is loaded by the
first `parse_suite`/`write_suite` or `validate` of the process.
"""

from lakelog.quality.dead_letter import DLQ_HEADER, DLQ_SUFFIX, dlq_topic, ensure_dlq_topic
from lakelog.quality.gate import Verdict, gated_suites, judge
from lakelog.quality.results import (
    RESULTS_LOG,
    RESULTS_SCHEMA,
    OffsetRange,
    new_validation_id,
    offset_ranges_of,
    open_results_log,
    read_results,
    record_result,
    result_payload,
    result_row,
    results_location,
)
from lakelog.quality.suites import MODES, Suite, delete_suite, parse_suite, read_suite, suite_location, write_suite
from lakelog.quality.validate import FailedExpectation, ValidationResult, validate

__all__ = [
    "DLQ_HEADER",
    "DLQ_SUFFIX",
    "MODES",
    "RESULTS_LOG",
    "RESULTS_SCHEMA",
    "FailedExpectation",
    "OffsetRange",
    "Suite",
    "ValidationResult",
    "Verdict",
    "delete_suite",
    "dlq_topic",
    "ensure_dlq_topic",
    "gated_suites",
    "judge",
    "new_validation_id",
    "offset_ranges_of",
    "open_results_log",
    "parse_suite",
    "read_results",
    "read_suite",
    "record_result",
    "result_payload",
    "result_row",
    "results_location",
    "suite_location",
    "validate",
    "write_suite",
]
