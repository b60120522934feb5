"""Fixtures for the client API tests: a fresh root, topics in it, and reading a partition back."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from lakelog.log import create_topic, open_partition


@pytest.fixture
def lake(root: str) -> str:
    """A fresh, empty root, as users pass it (a string): local, or on the S3 emulator in modules marked `roots`."""
    return root


@pytest.fixture
def make_topic(lake: str) -> Callable[..., str]:
    """Create a topic under `lake` and return its name: `make_topic(partitions=4, config={...})`."""
    names = itertools.count()

    def make(*, partitions: int = 1, config: Mapping[str, Any] | None = None, name: str | None = None) -> str:
        name = name if name is not None else f"topic-{next(names)}"
        create_topic(lake, name, partitions, config)
        return name

    return make


@pytest.fixture
def log_rows(lake: str) -> Callable[..., list[dict[str, Any]]]:
    """Every row of a partition table (data and control), in offset order, read through the log itself."""

    def read(topic: str, partition: int = 0) -> list[dict[str, Any]]:
        log = open_partition(lake, topic, partition)
        rows: list[dict[str, Any]] = []
        offset = log.log_start_offset()
        while offset < log.log_end_offset():
            fetched = log.fetch(offset, max_records=100_000)
            rows.extend(fetched.rows.to_pylist())
            offset = fetched.next_offset
        return rows

    return read
