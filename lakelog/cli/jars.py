"""`lakelog jars`: fetch the JVM jars lakelog's Spark sessions load, and show where they are and how to use them.

`fetch` runs Maven on the pom the package carries (lakelog/jvm/pom.xml), into `$LAKELOG_JARS_DIR` or the user's
cache folder; `conf` prints the Spark properties that load them (spark-defaults.conf lines), for a session of your
own, spark-submit or spark-sql. See lakelog.jars.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from lakelog import jars

logger = logging.getLogger(__name__)


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `jars fetch` and `jars conf` to the command line's subparsers (neither takes a root)."""
    actions = commands.add_parser("jars", help="the JVM jars for Spark (Delta Lake's connector, S3A)").add_subparsers(
        metavar="ACTION", parser_class=parser_class
    )
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--into", type=Path, default=None, help="the jars' folder (default $LAKELOG_JARS_DIR or ~/.cache/lakelog/jars)"
    )
    fetch = actions.add_parser("fetch", parents=[where], help="fetch them with Maven (once; again when lakelog's pom changes)")
    fetch.set_defaults(handler=_fetch, takes_root=False)
    conf = actions.add_parser(
        "conf", parents=[where], help="print the Spark properties that load them (spark-defaults.conf lines)"
    )
    conf.set_defaults(handler=_conf, takes_root=False)


def _fetch(args: argparse.Namespace) -> int:
    fetched = jars.fetch(args.into)
    print(f"{len(fetched)} jar(s) in {args.into or jars.jars_dir()}", file=sys.stderr)
    return 0


def _conf(args: argparse.Namespace) -> int:
    conf = jars.spark_conf(args.into)
    if not conf:
        print(jars.missing(args.into), file=sys.stderr)
        return 1
    for key, value in conf.items():
        print(f"{key} {value}")
    return 0
