"""`lakelog verify`: check every partition and internal log of a root (or one topic's) and exit 1 on any finding.

See docs/verify.md and lakelog.jobs.verify. `--repair` rebuilds what the commits can rebuild (checkpoints), then
checks again; the exit code is that of the second check.
"""

from __future__ import annotations

import argparse
from typing import Any

EXIT_FINDINGS = 1


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `verify` to the command line's subparsers."""
    verify = commands.add_parser(
        "verify",
        parents=[common],
        help="check every commit chain, data file, transaction and committed offset (kafka-dump-log and fsck in one)",
    )
    verify.add_argument("--topic", default=None, help="check this topic's partitions only (and the internal logs)")
    verify.add_argument("--deep", action="store_true", help="also read every row, verifying the page checksums")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="rebuild unreadable checkpoints from the commits (never touching a commit file), then check again",
    )
    verify.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace) -> int:
    from lakelog.jobs.verify import report_lines, verify_root

    report = verify_root(args.root, args.topic, deep=args.deep, repair=args.repair)
    for line in report_lines(report):
        print(line)
    return 0 if report.clean else EXIT_FINDINGS


__all__ = ["register"]
