"""`lakelog upgrade-protocol`: give every table under a root the Delta protocol lakelog declares now.

Tables written before lakelog listed the `invariants` writer feature are refused by Delta's Spark connector; this
commits one protocol-only version on each such table (strict v+1) and prints what it did. See lakelog.jobs.protocol_upgrade.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from lakelog.cli.common import add_progress_flag, print_rows, progress, wants_progress

logger = logging.getLogger(__name__)


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `upgrade-protocol` to the command line's subparsers."""
    upgrade = commands.add_parser(
        "upgrade-protocol",
        parents=[common],
        help="add the Delta writer features lakelog declares now (invariants) to older tables, so delta-spark reads them",
    )
    add_progress_flag(upgrade)
    upgrade.set_defaults(handler=_upgrade_protocol)


def _upgrade_protocol(args: argparse.Namespace) -> int:
    from lakelog.jobs.protocol_upgrade import tables_under, upgrade_table

    tables = list(tables_under(args.root))
    done = {
        table.uri: upgrade_table(table)
        for table in progress(tables, wants_progress(args), len(tables), "upgrade-protocol", "table")
    }
    print_rows(["table", "upgraded at version"], [[uri, "-" if version is None else version] for uri, version in done.items()])
    return 0


__all__ = ["register"]
