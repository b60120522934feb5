"""What the `lakelog` command line's modules share: the bad-input error (exit 2) and its table printing.

Its own module so that lakelog.cli, run as `python -m lakelog.cli` (a second module object), and the command
modules it registers (lakelog.cli_groups) raise and catch one BadInput class.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)


class BadInput(Exception):
    """A one-line complaint about the command line or its input."""


def print_rows(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A tab-separated table with a header line, as kafka-transactions.sh prints."""
    print("\t".join(headers))
    for row in rows:
        print("\t".join(str(cell) for cell in row))


__all__ = ["BadInput", "print_rows"]
