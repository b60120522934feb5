"""Shared fixtures: a fresh root folder per test and a factory for topics in it."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from lakelog.log import create_topic


@pytest.fixture
def root(tmp_path) -> str:
    """A fresh, empty root folder (as a string, as users pass it)."""
    folder = tmp_path / "root"
    folder.mkdir()
    return str(folder)


@pytest.fixture
def topic(root: str) -> Callable[..., str]:
    """Create a topic under `root` and return its name: `topic({"check.expected.offsets": True})`."""
    names = itertools.count()

    def make(config: Mapping[str, Any] | None = None, *, name: str | None = None, partitions: int = 1) -> str:
        name = name if name is not None else f"topic-{next(names)}"
        create_topic(root, name, partitions, config)
        return name

    return make


@pytest.fixture
def rng(request) -> random.Random:
    """One seeded generator per test; the seed is printed, and $LAKELOG_TEST_SEED replays a run."""
    seed = int(os.environ.get("LAKELOG_TEST_SEED", random.SystemRandom().randrange(2**32)))
    print(f"{request.node.name}: LAKELOG_TEST_SEED={seed}")
    return random.Random(seed)
