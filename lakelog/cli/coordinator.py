"""`lakelog coordinator sweep`: one pass of the coordinator sweep over a root (lakelog.jobs.maintenance), as JSON.

Aborts timed-out transactions and rolls decided ones forward, expires idle transactional ids, removes dead group
members (S4.7, S6.5), cleans every topic's log (S9.1, S9.3), compacts the internal logs (S9.3), tombstones spent
batch records (S9.4) and removes the staged files of Spark writes that never committed (S9.5).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

# lakelog.jobs.maintenance.SWEEP_STEPS, written out so that building the parser (and `lakelog --help`) imports no
# coordinator; tests/cli/test_cli_startup.py checks they are the sweep's.
SWEEP_STEPS = ("transactions", "groups", "log-cleaner", "internal-compaction", "sink-records", "spark-staging")


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `coordinator` and its `sweep` action to the command line's subparsers."""
    coordinator = commands.add_parser("coordinator", help="coordinator jobs").add_subparsers(
        metavar="ACTION", parser_class=parser_class
    )
    sweeping = coordinator.add_parser(
        "sweep",
        parents=[common],
        help="abort timed-out transactions, roll decided ones forward, expire idle ids, remove dead group members",
    )
    sweeping.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=SWEEP_STEPS,
        metavar="STEP",
        help=f"leave out a step (repeatable): {', '.join(SWEEP_STEPS)}",
    )
    sweeping.set_defaults(handler=_coordinator_sweep)


def _coordinator_sweep(args: argparse.Namespace) -> int:
    from lakelog.jobs.maintenance import sweep

    print(json.dumps(sweep(args.root, args.skip)))
    return 0
