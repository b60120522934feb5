"""Command-line arguments the pipelines share."""

from __future__ import annotations

import argparse


def storage_option_pairs(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    """`--storage-option KEY=VALUE` items as a dict; a malformed one ends the job with argparse's usage error."""
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--storage-option takes KEY=VALUE, not {item!r}")
        options[key.strip()] = value
    return options
