"""Fixtures for the CLI tests: run the real `lakelog` command line as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def lakelog() -> Callable[..., subprocess.CompletedProcess]:
    """`lakelog("topics", "list", "--root", root, stdin="...")`: run `python -m lakelog.cli` and capture it.

    $LAKELOG_ROOT is removed from the environment unless `env` sets it, so `--root` is what counts.
    """

    def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120):
        environment = {key: value for key, value in os.environ.items() if key != "LAKELOG_ROOT"}
        environment.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "lakelog.cli", *map(str, args)],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=REPO,
            env=environment,
            timeout=timeout,
        )

    return run


@pytest.fixture
def lake(tmp_path) -> str:
    """A root folder path that does not exist yet (`init` creates it)."""
    return str(tmp_path / "lake")
