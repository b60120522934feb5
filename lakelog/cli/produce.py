"""`lakelog produce`: JSON lines read from stdin, produced to a topic. What it reads: one message per stdin line.

A line is a JSON object with `value` and/or `key`, and optionally `partition`, `headers`, `timestamp` and
`expected_offset`; any other JSON value is the message's value. A JSON string is stored as the string itself,
without its quotes, as a string `value` or `key` of an object is; any other JSON value is stored as JSON text.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lakelog.cli.common import BadInput, add_topic_argument, one_line
from lakelog.errors import KafkaError

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
  echo '{"key": "c1", "value": "hello"}' | lakelog produce --topic orders --root lake
  echo '{"value": "entry 0", "partition": 0, "expected_offset": 0, "headers": {"source": "cli"}}' | lakelog produce --topic ledger --root lake
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


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `produce` to the command line's subparsers."""
    produce = commands.add_parser(
        "produce",
        parents=[common],
        help="produce JSON lines read from stdin",
        epilog=STDIN_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_topic_argument(produce)
    produce.add_argument(
        "--partition", type=int, default=-1, help="partition of lines that name none (default -1: the Producer's partitioner)"
    )
    produce.add_argument("--linger-ms", type=int, default=50)
    produce.set_defaults(handler=_produce)


def _produce(args: argparse.Namespace) -> int:
    """Read and check every stdin line first, so bad input writes nothing at all."""
    from lakelog.client import Producer
    from lakelog.client.roots import partition_count

    num_partitions = partition_count(args.root, args.topic)
    messages = []
    for number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise BadInput(f"lakelog produce: stdin line {number} is not JSON: {error.msg}") from None
        fields = message_fields(record, number)
        fields.setdefault("partition", args.partition)
        if fields["partition"] != -1 and not 0 <= fields["partition"] < num_partitions:
            raise BadInput(
                f"lakelog produce: stdin line {number}: topic {args.topic} has partitions 0-{num_partitions - 1}, "
                f"not {fields['partition']}"
            )
        messages.append(fields)
    producer = Producer({"lakelog.root": args.root, "linger.ms": args.linger_ms})
    failures: list[KafkaError] = []
    delivered = 0

    def report(error: KafkaError | None, message: Any) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1
        else:
            failures.append(error)

    for fields in messages:
        producer.produce(args.topic, on_delivery=report, **fields)
        producer.poll(0)
    producer.flush()
    if not failures:
        print(f"delivered {delivered} message(s), 0 failed", file=sys.stderr)
        return 0
    # One line, with the first failure's Kafka code, as every CLI error.
    first = failures[0]
    others = sum(1 for failure in failures[1:] if failure.str() != first.str())
    print(
        f"lakelog: {first.name()}: delivered {delivered} message(s), {len(failures)} failed: {one_line(first.str())}"
        + (f" (and {others} other error(s))" if others else ""),
        file=sys.stderr,
    )
    return 1


__all__ = ["MESSAGE_FIELDS", "STDIN_FORMAT", "message_fields", "register"]
