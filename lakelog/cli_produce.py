"""What `lakelog produce` reads: one message per stdin line, and the help text that says so.

A line is a JSON object with `value` and/or `key`, and optionally `partition`, `headers`, `timestamp` and
`expected_offset`; any other JSON value is the message's value. A JSON string is stored as the string itself,
without its quotes, as a string `value` or `key` of an object is; any other JSON value is stored as JSON text.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lakelog.cli_common import BadInput

logger = logging.getLogger(__name__)

MESSAGE_FIELDS = ("value", "key", "partition", "headers", "timestamp", "expected_offset")

STDIN_FORMAT = """\
stdin: one message per line, either a JSON object with "value" and/or "key" and these optional fields:
  value, key        a string is stored as it is, any other JSON value as JSON text; null: a null key, a tombstone
  partition         a partition (default --partition; -1: the Producer's partitioner picks it by key)
  headers           an object of strings (or null values)
  timestamp         the record's time, milliseconds since the epoch (default: now)
  expected_offset   KIP-27: the offset the record must land at, else OFFSET_MISMATCH; a topic with
                    check.expected.offsets=true refuses a record without one
or any other JSON value, which is the message's value: "hello world" is stored as hello world, 42 as 42.
Every line is checked before anything is sent: a bad line writes nothing.

examples:
  echo '{"key": "c1", "value": "hello"}' | lakelog produce orders --root lake
  echo '{"value": "entry 0", "partition": 0, "expected_offset": 0, "headers": {"source": "cli"}}' | lakelog produce ledger --root lake
"""

_FIELD_CHECKS = {
    "partition": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= -1, "an integer >= -1"),
    "expected_offset": (lambda v: v is None or isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an offset >= 0"),
    "timestamp": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "milliseconds >= 0"),
    "headers": (
        lambda v: v is None or isinstance(v, dict) and all(x is None or isinstance(x, str) for x in v.values()),
        "an object of strings",
    ),
}


def message_fields(record: Any, number: int) -> dict[str, Any]:
    """The Producer.produce keywords of stdin line `number`, parsed as JSON into `record`."""
    if isinstance(record, str):
        return {"value": record}
    if not isinstance(record, dict) or not set(record) & {"value", "key"}:
        return {"value": json.dumps(record)}
    unknown = set(record) - set(MESSAGE_FIELDS)
    if unknown:
        raise BadInput(
            f"lakelog produce: stdin line {number} has unknown field(s) {sorted(unknown)}; known: {', '.join(MESSAGE_FIELDS)}"
        )
    fields = dict(record)
    for name, (check, wanted) in _FIELD_CHECKS.items():
        if name in fields and not check(fields[name]):
            raise BadInput(f"lakelog produce: stdin line {number}: {name} must be {wanted}, not {fields[name]!r}")
    for name in ("value", "key"):
        if fields.get(name) is not None and not isinstance(fields[name], str):
            fields[name] = json.dumps(fields[name])
    return fields


__all__ = ["MESSAGE_FIELDS", "STDIN_FORMAT", "message_fields"]
