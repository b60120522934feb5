"""Shared fixtures: a fresh root per test (a local folder, or a prefix on the S3 emulator) and topics in it.

A module runs its tests on both kinds of root with `pytestmark = pytest.mark.roots("local", "s3")`
(S12.1); without the marker, `root` is a local folder. The S3 emulator (moto's server on loopback,
tests/s3emulator.py) starts once per session, the first time a test needs it, and its AWS_* settings
go into the environment, so worker processes that tests start reach it too.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from cloud_emulators import Azurite, FakeGcs, available
from helpers import root_logger_state
from postgres_server import PostgresServer
from postgres_server import unavailable as postgres_unavailable
from s3emulator import S3Emulator

from lakelog.log import create_topic
from lakelog.store import initialise_root

ROOT_KINDS = ("local", "s3", "azure", "gcs")
TEST_BUCKET = "lakelog-tests"


# Before any test module is collected: a module that configures logging when imported changes it for every test.
ROOT_LOGGER_AT_START = root_logger_state()

# Every Spark JVM the tests start (the shared session, spark-submit and spark-sql children, the Airflow tasks' and
# the demo's jobs) is launched by spark-submit, which adds SPARK_SUBMIT_OPTS to its java command. The tests' JVMs
# live for seconds to minutes over little data: C1 alone and the serial collector cost a spark-sql shell about a
# third less CPU (220 -> 146 s for the two shell tests), and the shared session no more (272 -> 262 s for the
# read and write modules). A user's own setting is kept. The benchmarks in bench/ run without it.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "roots(*kinds, release=()): run the module's tests on these kinds of root (local, s3, azure, gcs); "
        "those named in release run in the release tier only",
    )


# -- running in parallel (pytest-xdist, `--dist loadgroup` in pyproject's addopts) ------------------------------------
#
# Every test runs in one of a few worker processes. A test that shares something costly with other tests is pinned,
# through an `xdist_group` mark, to the worker that runs them all:
# - "spark": every user of the session-scoped `spark` fixture, so one JVM (a cold start costs 7-10 s) serves them;
#   but not those marked slow (they start Spark processes of their own), which spread over the other workers;
# - "airflow-standalone" (marked in tests/airflow): the tests that start a real `airflow standalone` (scheduler, DAG
#   processor, API server, triggerer) with real heartbeat timeouts run one after another, as before: two of them at
#   once on a 2-core machine would starve each other's heartbeats;
# - a module whose tests share a module- or class-scoped fixture (a built wheel, a scheduler, an emulator) runs on
#   one worker, so that fixture is made once.
# Soak tests (`soak` marker), then slow ones (`slow`), are sent out first, so that no worker starts one of them near
# the end of the run (xdist hands out the groups first, largest first, then single tests in this order).


def xdist_group_of(item: pytest.Item) -> str | None:
    if "spark" in getattr(item, "fixturenames", ()):
        # Not the slow ones: minutes each, mostly in Spark JVMs of their own (spark-submit, spark-sql, killed
        # workers), they go to whichever worker is free, which starts a session of its own if it has none.
        return None if item.get_closest_marker("slow") else "spark"
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    if fixtureinfo is not None:
        for definitions in fixtureinfo.name2fixturedefs.values():
            if any(definition.scope in ("module", "class") for definition in definitions):
                return item.module.__name__ if getattr(item, "module", None) else item.path.as_posix()
    return None


def pytest_itemcollected(item: pytest.Item) -> None:
    # Here, not in pytest_collection_modifyitems: xdist's worker turns the marks into node ids in that hook.
    group = xdist_group_of(item)
    if group is not None and item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)  # after xdist's worker hook, which should have put the groups into the node ids
def pytest_collection_modifyitems(config, items: list[pytest.Item]) -> None:
    # Soak tests first, then slow ones; a stable sort keeps the collection order otherwise, and keeps each group's
    # tests together (a module's module-scoped fixture is then still made once without xdist too).
    def rank(item: pytest.Item) -> tuple[bool, bool]:
        if item.get_closest_marker("xdist_group") is not None:
            return (True, True)
        return (item.get_closest_marker("soak") is None, item.get_closest_marker("slow") is None)

    items.sort(key=rank)
    # The release tier runs only when asked for by name (`-m release`, or an expression naming it): CI's run leaves
    # it out for time, and each of its tests has a copy on the other root that CI runs.
    if "release" not in (config.getoption("markexpr") or ""):
        kept = [item for item in items if item.get_closest_marker("release") is None]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("release") is not None])
            items[:] = kept
    if getattr(config.option, "loadgroup", False):
        for item in items:
            name_groups_in_node_id(item)


def name_groups_in_node_id(item: pytest.Item) -> None:
    """`node id@group`, as xdist's loadgroup scheduler reads the groups (from node ids, on the controller).

    pytest-xdist 3.8 writes `item._nodeid`, which pytest 9.2 no longer reads (node ids are structured `NodeId`s in
    `item._id`): the groups were silently dropped (pytest-xdist issue 1386). Done here when xdist's did not take.
    """
    groups = sorted(
        {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) for mark in item.iter_markers("xdist_group")}
    )
    suffix = "@" + "_".join(groups)
    if not groups or item.nodeid.endswith(suffix) or not hasattr(item, "_id"):
        return
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(item.nodeid + suffix)


# Seconds spent per worker group (the `@group` suffix of node ids; tests of no group as "(none)"), printed after the
# slowest tests: a group runs on one worker, so the largest one is the least time the run can take.
# Then the 25 test files of most seconds: the run is bound by the CPU of all its tests, so these are where to cut.
GROUP_SECONDS: dict[str, list[float]] = {}
FILE_SECONDS: dict[str, list[float]] = {}
FILES_PRINTED = 25


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    group = report.nodeid.rsplit("@", 1)[1] if "@" in report.nodeid.rsplit("::", 1)[-1] else "(none)"
    for tallies, name in ((GROUP_SECONDS, group), (FILE_SECONDS, report.nodeid.split("::", 1)[0])):
        tally = tallies.setdefault(name, [0, 0.0])
        tally[0] += report.when == "call"
        tally[1] += report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    if not GROUP_SECONDS:
        return
    terminalreporter.write_sep("=", "seconds per worker group (a group runs on one worker)")
    for group, (tests, seconds) in sorted(GROUP_SECONDS.items(), key=lambda item: -item[1][1]):
        terminalreporter.write_line(f"{seconds:9.1f}s {tests:5d} tests  {group}")
    terminalreporter.write_sep("=", f"seconds per test file, the {FILES_PRINTED} largest")
    for name, (tests, seconds) in sorted(FILE_SECONDS.items(), key=lambda item: -item[1][1])[:FILES_PRINTED]:
        terminalreporter.write_line(f"{seconds:9.1f}s {tests:5d} tests  {name}")


def pytest_generate_tests(metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("roots")
    if "root_kind" in metafunc.fixturenames and marker is not None:
        kinds = marker.args
        unknown = set(kinds) - set(ROOT_KINDS)
        if unknown:
            raise ValueError(f"unknown root kinds {sorted(unknown)}")
        # `roots(..., release=("s3",))`: those kinds run in the release tier only (see `release` in pyproject's markers).
        release = set(marker.kwargs.get("release", ()))
        params = [pytest.param(kind, marks=pytest.mark.release) if kind in release else kind for kind in kinds]
        metafunc.parametrize("root_kind", params, scope="function")


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Emulator]:
    """The session's S3 emulator, with a bucket for tests; its settings are in os.environ while it runs."""
    with S3Emulator() as emulator, emulator.exported():
        emulator.create_bucket(TEST_BUCKET)
        yield emulator


@pytest.fixture
def s3_root(s3: S3Emulator) -> str:
    """A fresh, empty root on the S3 emulator, in a bucket of its own: `s3://t<unique>/lake`.

    moto lists a prefix by scanning every key of its bucket, so one bucket for the whole session
    would make every listing (each Delta commit makes some) slower as the session goes on.
    """
    bucket = f"t{uuid.uuid4().hex[:20]}"
    s3.create_bucket(bucket)
    return f"s3://{bucket}/lake"


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """The session's Azurite (Blob service, in memory); AZURE_STORAGE_CONNECTION_STRING is in os.environ while it runs."""
    reason = available("azure")
    if reason:
        pytest.skip(reason)
    with Azurite() as emulator, emulator.exported():
        yield emulator


@pytest.fixture
def azure_root(azurite: Azurite) -> str:
    """A fresh, empty root on Azurite, in a container of its own: `az://t<unique>/lake`."""
    container = f"t{uuid.uuid4().hex[:20]}"
    azurite.create_container(container)
    return f"az://{container}/lake"


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[FakeGcs]:
    """The session's fake-gcs-server (in memory); STORAGE_EMULATOR_HOST is in os.environ while it runs."""
    reason = available("gcs")
    if reason:
        pytest.skip(reason)
    with FakeGcs() as emulator, emulator.exported():
        yield emulator


@pytest.fixture
def gcs_root(fake_gcs: FakeGcs) -> str:
    """A fresh, empty root on fake-gcs-server, in a bucket of its own: `gs://t<unique>/lake`."""
    bucket = f"t{uuid.uuid4().hex[:20]}"
    fake_gcs.create_bucket(bucket)
    return f"gs://{bucket}/lake"


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (a cluster of its own on a loopback port); each test takes a database of it."""
    reason = postgres_unavailable()
    if reason:
        pytest.skip(reason)
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres: PostgresServer) -> str:
    """A fresh, empty database of the session's PostgreSQL server."""
    return postgres.new_database()


@pytest.fixture
def root_kind() -> str:
    return "local"


OBJECT_ROOTS = {"s3": "s3_root", "azure": "azure_root", "gcs": "gcs_root"}


@pytest.fixture
def root(request, tmp_path, root_kind: str) -> str:
    """A fresh root, as users pass it (a string), made as `lakelog init` makes one: a local folder, or a prefix on
    an object store's emulator (S3, Azure, GCS)."""
    root = request.getfixturevalue(OBJECT_ROOTS[root_kind]) if root_kind in OBJECT_ROOTS else str(tmp_path / "root")
    initialise_root(root)  # the clients refuse a folder or prefix that is no root (a typo)
    return root


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


@pytest.fixture
def root_logger_at_start() -> tuple[int, list[logging.Handler]]:
    """The root logger's level and handlers as they were before the session collected its first test module."""
    return ROOT_LOGGER_AT_START


@pytest.fixture(autouse=True)
def root_logger_kept() -> Iterator[None]:
    """What a test does to the root logger's level and handlers ends with it, so no test depends on what ran before.

    Airflow configures logging when first imported (airflow/__init__.py runs settings.initialize(), which sets the
    root logger to INFO with a stdout handler): a test that imports it (an operator, the provider's hook) would
    otherwise leave every later test of the session logging INFO to stdout. Test modules import Airflow inside
    their tests, never at collection, which no fixture could undo.
    """
    level, handlers = root_logger_state()
    yield
    root = logging.getLogger()
    root.setLevel(level)
    for handler in root.handlers[:]:
        if type(handler).__module__ != "_pytest.logging" and handler not in handlers:
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
