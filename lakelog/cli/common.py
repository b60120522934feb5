"""What the `lakelog` command line's modules share: the bad-input error (exit 2), the parser that raises it, and
the way they print tables and one-line errors."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

logger = logging.getLogger(__name__)


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


def add_topic_argument(parser: argparse.ArgumentParser, help_text: str | None = None) -> None:
    """`--topic NAME`, as Kafka's tools take it; the older positional form is still accepted, with a deprecation
    line (`resolve_topic`)."""
    parser.add_argument("--topic", help=help_text or "the topic (required)")
    parser.add_argument("topic_positional", nargs="?", metavar="TOPIC", help=argparse.SUPPRESS)
    parser.set_defaults(topic_command=parser.prog)


def resolve_topic(args: argparse.Namespace) -> None:
    """`args.topic` from `--topic` or the deprecated positional topic: BadInput if neither or two different ones."""
    if not hasattr(args, "topic_positional"):
        return
    given, flag = args.topic_positional, args.topic
    del args.topic_positional
    command = getattr(args, "topic_command", "lakelog")
    if given is not None:
        if flag is not None and flag != given:
            raise BadInput(f"{command}: two topics given, --topic {flag} and {given}: give one, as --topic")
        if flag is None:
            logger.warning("the topic as a positional argument is deprecated: write `%s --topic %s`", command, given)
        args.topic = given
    if args.topic is None:
        raise BadInput(f"{command}: --topic is required")


__all__ = ["BadInput", "Parser", "add_topic_argument", "one_line", "print_rows", "resolve_topic"]


def wants_progress(args: argparse.Namespace) -> bool:
    """A progress bar on stderr only for a person at a terminal: never in a pipe, a log or with --no-progress."""
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (there is none unless stderr is a terminal)")


def progress(items: Iterable[T], enabled: bool, total: int | None, desc: str, unit: str) -> Iterator[T]:
    """`items`, with a bar on stderr (done, rate, time left) when `enabled`."""
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr)
