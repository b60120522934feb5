"""`lakelog console`: serve the web console of one root (lakelog.console), on loopback unless told otherwise.

Read-only by default: `--allow-actions` lets a person abort a hanging transaction, reset an empty group's offsets
and delete records, each with the token printed at start-up.
"""

from __future__ import annotations

import argparse
import logging
import socket
from typing import Any

from lakelog.errors import NotImplementedWithoutExtra

logger = logging.getLogger(__name__)
DEFAULT_PORT = 8089


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `console` to the command line's subparsers."""
    console = commands.add_parser("console", parents=[common], help="serve a web console of the root (read-only by default)")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    console.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free port)")
    mode = console.add_mutually_exclusive_group()
    mode.add_argument("--read-only", dest="allow_actions", action="store_false", help="show, never act (the default)")
    mode.add_argument(
        "--allow-actions",
        dest="allow_actions",
        action="store_true",
        help="allow aborting hanging transactions, resetting empty groups' offsets and deleting records, with the "
        "token printed at start-up",
    )
    console.add_argument("--refresh-ms", type=int, default=5000, help="how often a page refreshes itself (0: never)")
    console.set_defaults(handler=_console, allow_actions=False)


def _console(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from lakelog.console.app import ConsoleSettings, create_app
    except ImportError as error:
        raise NotImplementedWithoutExtra.missing("lakelog console", error.name or "starlette", "console") from None
    settings = ConsoleSettings.of(args.root, args.allow_actions, args.refresh_ms, shown_root=args.given_root)
    listener = socket.create_server((args.host, args.port), family=socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    mode = "actions allowed" if args.allow_actions else "read-only"
    print(f"lakelog console of {settings.root.uri} at http://{shown}:{port}/ ({mode})", flush=True)
    if args.allow_actions:
        print(f"action token: {settings.token}", flush=True)
    if host not in ("127.0.0.1", "::1", "localhost"):
        logger.warning("console: listening on %s, reachable from other machines", host)
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning", access_log=False))
    server.run(sockets=[listener])
    return 0
