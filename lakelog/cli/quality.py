"""`lakelog quality set|show|delete|report`: a topic's suite and its validation results.

Registered by lakelog.cli.main; errors leave as lakelog's Kafka-named exceptions,
which the CLI prints as one line (exit 2 for bad input).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from lakelog.cli.common import add_topic_argument
from lakelog.errors import InvalidRequest

logger = logging.getLogger(__name__)

REPORT_LIMIT = 20


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add the `quality` command group to the CLI's subcommands."""
    quality = commands.add_parser(
        "quality", help="Great Expectations suites gating topics, and their validation results"
    ).add_subparsers(metavar="ACTION", parser_class=parser_class)
    setting = quality.add_parser("set", parents=[common], help="attach (or replace) a topic's expectation suite")
    add_topic_argument(setting)
    setting.add_argument("--suite", required=True, metavar="FILE", help="a GX expectation suite as JSON ('-': stdin)")
    setting.add_argument(
        "--mode",
        choices=("enforce", "warn", "dead-letter"),
        help="what a failure does (default: the suite's meta.lakelog.mode, else enforce)",
    )
    setting.add_argument(
        "--parse",
        metavar="MODULE:FUNCTION",
        help="validate this function's output instead of the Kafka columns and value.<field>",
    )
    setting.set_defaults(handler=_set)
    show = quality.add_parser("show", parents=[common], help="print a topic's suite (GX JSON)")
    add_topic_argument(show)
    show.set_defaults(handler=_show)
    delete = quality.add_parser("delete", parents=[common], help="detach a topic's suite")
    add_topic_argument(delete)
    delete.set_defaults(handler=_delete)
    report = quality.add_parser("report", parents=[common], help="the latest validation results of a topic")
    add_topic_argument(report)
    report.add_argument("--limit", type=int, default=REPORT_LIMIT, help=f"results to print (default {REPORT_LIMIT})")
    report.add_argument("--json", action="store_true", help="one JSON object per result")
    report.set_defaults(handler=_report)


def _set(args: argparse.Namespace) -> int:
    from lakelog.quality.suites import write_suite

    try:
        if args.suite == "-":
            text = sys.stdin.read()
        else:
            with open(args.suite, "rb") as suite_file:
                text = suite_file.read()
    except OSError as error:
        raise InvalidRequest(f"cannot read the suite file {args.suite}: {error.strerror or error}") from None
    suite = write_suite(args.root, args.topic, text, mode=args.mode, parse=args.parse)
    _line(f"topic {args.topic} is gated by suite {suite.name} ({len(suite.expectations)} expectation(s), mode {suite.mode})")
    return 0


def _show(args: argparse.Namespace) -> int:
    from lakelog.client.roots import partition_count
    from lakelog.quality.suites import read_suite

    partition_count(args.root, args.topic)  # UnknownTopicOrPartition if there is no such topic
    suite = read_suite(args.root, args.topic)
    if suite is None:
        raise InvalidRequest(f"topic {args.topic} has no quality suite")
    sys.stdout.write(suite.to_json())
    return 0


def _delete(args: argparse.Namespace) -> int:
    from lakelog.quality.suites import delete_suite

    delete_suite(args.root, args.topic)
    _line(f"topic {args.topic} is no longer gated")
    return 0


def _report(args: argparse.Namespace) -> int:
    from lakelog.quality.results import outcome, read_results

    rows = read_results(args.root, topic=args.topic, limit=max(args.limit, 0)).to_pylist()
    for row in rows:
        row["validated_at"] = row["validated_at"].isoformat()
        row["statistics"] = json.loads(row["statistics"] or "{}")
        row["failed_expectations"] = json.loads(row["failed_expectations"] or "[]")
        row["outcome"] = outcome(args.root, row)
        if args.json:
            _line(json.dumps(row, default=str, sort_keys=True))
            continue
        verdict = "passed" if row["success"] else "FAILED"
        unit = row["transactional_id"] or row["load_unit"] or "-"
        # A batch refused before its producer's first append has no producer id yet (it is allocated with that append).
        producer = "-" if row["producer_id"] is None else f"{row['producer_id']}/{row['producer_epoch']}"
        _line(
            f"{row['validated_at']}  {row['validation_id']}  {verdict}  suite={row['suite_name']}  "
            f"mode={row['mode']}  rows={row['row_count']}  unit={unit}  producer={producer}  outcome={row['outcome']}"
        )
        for failure in row["failed_expectations"]:
            column = f" {failure['column']}" if failure.get("column") else ""
            detail = (
                f"error: {failure['error']}"
                if failure.get("error")
                else f"{failure.get('unexpected_count')} unexpected, e.g. {failure.get('unexpected_values')}"
                if failure.get("unexpected_count") is not None
                else f"observed {failure.get('observed_value')}"
            )
            _line(f"    {failure['type']}{column}: {detail}")
    if not rows and not args.json:
        _line(f"no validation results for topic {args.topic}", sys.stderr)
    return 0


def _line(text: str, stream: Any = None) -> None:
    """One line of the command's output (this module is part of the command line: its output is its result)."""
    (stream or sys.stdout).write(text + "\n")
