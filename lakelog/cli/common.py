"""What the `lakelog` command line's modules share: the bad-input error (exit 2), the parser that raises it, and
the way they print tables and one-line errors."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")


class BadInput(Exception):
    """A one-line complaint about the command line or its input."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are BadInput (one line, exit 2) instead of argparse's usage and exit."""

    def error(self, message: str) -> NoReturn:
        """Raise BadInput with argparse's message."""
        raise BadInput(f"{self.prog}: {message}")


def print_rows(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A tab-separated table with a header line, as kafka-transactions.sh prints."""
    print("\t".join(headers))
    for row in rows:
        print("\t".join(str(cell) for cell in row))


def one_line(text: str) -> str:
    """A multi-line message as one line, its lines joined by ` / `."""
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


__all__ = ["BadInput", "Parser", "one_line", "print_rows"]


def wants_progress(args: argparse.Namespace) -> bool:
    """A progress bar on stderr only for a person at a terminal: never in a pipe, a log or with --no-progress."""
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (there is none unless stderr is a terminal)")


def progress(items: Iterable[T], enabled: bool, total: int | None, desc: str, unit: str) -> Iterator[T]:
    """`items`, with a bar on stderr (done, rate, time left) when `enabled`."""
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr)
