"""The `lakelog` command: its common options, its commands (one module each) and how errors leave it.

Every command takes `--root` (or $LAKELOG_ROOT): a folder, `file:///path`,
`s3://bucket/prefix`, `az://container/prefix` or `gs://bucket/prefix`, with
`--storage-option KEY=VALUE` overriding the store's environment (`AWS_*`, `AZURE_STORAGE_*`, `GOOGLE_*`). Bad input exits with code 2, any other failure with code 1, each
with one line on stderr naming the Kafka error code; never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from lakelog import version
from lakelog.cli import (
    console,
    consume,
    coordinator,
    groups,
    jars,
    load,
    produce,
    quality,
    sink,
    sql,
    topics,
    transactions,
    upgrade,
    verify,
)
from lakelog.cli.common import BadInput, Parser, one_line, resolve_topic
from lakelog.config.secrets import RedactingFilter, environment_secrets, redact
from lakelog.errors import (
    GroupIdNotFound,
    InvalidRequest,
    InvalidTxnState,
    KafkaException,
    NonEmptyGroup,
    OffsetOutOfRange,
    SaslAuthenticationFailed,
    TopicAlreadyExists,
    TransactionalIdNotFound,
    UnknownTopicOrPartition,
    UnresolvedRoot,
)

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1
# Errors that say the command asked for something wrong (exit 2); every other error is a failure (exit 1).
BAD_INPUT_ERRORS = (
    InvalidRequest,
    InvalidTxnState,
    UnknownTopicOrPartition,
    TopicAlreadyExists,
    OffsetOutOfRange,
    GroupIdNotFound,
    NonEmptyGroup,
    SaslAuthenticationFailed,
    TransactionalIdNotFound,
    UnresolvedRoot,
)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The command modules, in the order `lakelog --help` lists their commands.
COMMANDS = (
    topics,
    produce,
    consume,
    load,
    transactions,
    groups,
    jars,
    upgrade,
    coordinator,
    sql,
    quality,
    verify,
    console,
    sink,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `lakelog` command line on `argv` (default sys.argv[1:]); its exit code."""
    # Errors reach the user as one line below; log lines (WARNING and up by default, --log-level INFO shows what
    # lakelog does on the way) go to stderr too.
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        _configure_logging(getattr(args, "log_level", None) or _env_log_level(), _storage_options(args).values())
        if not getattr(args, "handler", None):
            raise BadInput(args.missing)
        resolve_topic(args)
        if getattr(args, "takes_root", True):
            from lakelog.client.roots import check_root, open_root

            if not args.root:
                raise BadInput("lakelog: --root (or $LAKELOG_ROOT) is required")
            # Only the commands that make a root take one that is none yet (a typo is UnresolvedRoot, exit 2).
            opening = check_root if getattr(args, "makes_root", False) else open_root
            args.given_root = args.root  # as typed: what a page or a message shows the user
            args.root = opening(args.root, _storage_options(args))
        return args.handler(args)
    except BadInput as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KafkaException as error:
        print(f"lakelog: {error.error.name()}: {redact(one_line(str(error)), environment_secrets())}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(error, BAD_INPUT_ERRORS) else EXIT_FAILURE
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("lakelog: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the CLI never prints a traceback
        print(f"lakelog: UNKNOWN: {type(error).__name__}: {redact(one_line(str(error)), environment_secrets())}", file=sys.stderr)
        return EXIT_FAILURE


def _env_log_level() -> str:
    level = os.environ.get("LAKELOG_LOG_LEVEL", "WARNING").strip().upper()
    if level not in LOG_LEVELS:
        raise BadInput(f"lakelog: $LAKELOG_LOG_LEVEL={level!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


def _configure_logging(level: str, secrets: Iterable[str] = ()) -> None:
    """The CLI's log lines go to stderr as `lakelog: LEVEL logger: message`, credentials redacted; library code
    never prints."""
    logging.basicConfig(level=level, format="lakelog: %(levelname)s %(name)s: %(message)s", force=True)
    # The handler keeps the level too: a library that sets its own logger's level (Great Expectations sets INFO)
    # still shows nothing below the CLI's level. Its filter redacts what botocore and urllib3 log of each request
    # at DEBUG (session token, signature, credential scope) and every credential value the command was given.
    redacting = RedactingFilter([*environment_secrets(), *secrets])
    for handler in logging.getLogger().handlers:
        handler.setLevel(level)
        handler.addFilter(redacting)


def _storage_options(args: argparse.Namespace) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in getattr(args, "storage_option", None) or []:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise BadInput(f"lakelog: --storage-option takes KEY=VALUE, not {item!r}")
        options[key] = value
    return options


def _build_parser() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    common.add_argument(
        "--root",
        default=os.environ.get("LAKELOG_ROOT"),
        help="root: a folder, file:///path, s3://bucket/prefix, az://container/prefix or gs://bucket/prefix (default $LAKELOG_ROOT)",
    )
    common.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a connection setting of the root's store, overriding its AWS_* variable (endpoint_url, region, "
        "access_key_id, secret_access_key, session_token, allow_http, timeout, ...); repeatable",
    )
    common.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=None,
        help="show log lines from this level up on stderr (default $LAKELOG_LOG_LEVEL or WARNING)",
    )
    parser = Parser(prog="lakelog", description="Kafka's exactly-once semantics on Delta Lake tables")
    parser.add_argument("--version", action="version", version=f"lakelog {version()}")
    commands = parser.add_subparsers(metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        module.register(commands, common, Parser)
    _say_what_is_missing(parser, commands)
    return parser


def _say_what_is_missing(parser: argparse.ArgumentParser, commands: Any) -> None:
    """`lakelog` alone names the commands; `lakelog topics` alone names the topics actions, and so on."""
    parser.set_defaults(missing=f"lakelog: a command is required ({', '.join(commands.choices)}); see lakelog --help")
    for name, command in commands.choices.items():
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                command.set_defaults(
                    missing=f"lakelog {name}: an action is required ({', '.join(action.choices)}); see lakelog {name} --help"
                )


if __name__ == "__main__":
    sys.exit(main())
