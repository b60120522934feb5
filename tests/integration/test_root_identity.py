"""A mistyped root is refused, not started: every client and command names it and says how a root is made.

A Kafka client given the wrong bootstrap servers finds no cluster; it does not start one. A lakelog root
carries an identity (`<root>/__cluster_metadata/`, a Delta table whose one row is the cluster id), written
only by `lakelog init` and the explicit admin path that creates topics. Everything else refuses a folder or
S3 prefix without it with UnresolvedRoot and writes nothing there. Roots of earlier versions (which have
`topics/`, `__transaction_state/` or `__consumer_offsets/` and no identity) stay roots.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lakelog import AdminClient, Consumer, KafkaException, NewTopic, Producer
from lakelog.cli.main import _build_parser
from lakelog.errors import KafkaError, UnresolvedRoot
from lakelog.jobs.load import load
from lakelog.store import Location, initialise_root, open_root
from lakelog.store.delta.cluster import CLUSTER_METADATA_DIR, cluster_id

pytestmark = pytest.mark.roots("local", "s3")

REPO = Path(__file__).resolve().parents[2]

# Every command that takes a root, with the arguments it needs to get past its parser.
CLI_COMMANDS = {
    "topics list": [],
    "topics describe": ["--topic", "orders"],
    "topics delete-records": ["--topic", "orders", "--offset", "1"],
    "produce": ["--topic", "orders"],
    "consume": ["--topic", "orders"],
    "load": ["--topic", "orders", "rows.parquet"],
    "transactions list": [],
    "transactions describe": ["--transactional-id", "t"],
    "transactions describe-producers": ["--topic", "orders", "--partition", "0"],
    "transactions find-hanging": [],
    "transactions abort": ["--topic", "orders", "--partition", "0"],
    "groups list": [],
    "groups describe": ["--group", "g"],
    "groups offsets": ["--group", "g"],
    "groups reset-offsets": ["--group", "g", "--topic", "orders", "--to-earliest"],
    "groups delete": ["--group", "g"],
    "coordinator sweep": [],
    "sql": ["SELECT 1"],
    "verify": [],
    "spark-sql-init": [],
    "upgrade-protocol": [],
    "quality set": ["--topic", "orders", "--suite", "suite.json"],
    "quality show": ["--topic", "orders"],
    "quality delete": ["--topic", "orders"],
    "quality report": ["--topic", "orders"],
    "console": ["--port", "0"],
    "sink postgres": ["--topic", "orders", "--dsn", "host=127.0.0.1 port=9", "--table", "t", "--columns", "a:text"],
    "sink duckdb": ["--topic", "orders", "--database", "sink.duckdb", "--table", "t", "--columns", "a:text"],
}
# The commands that make a root: init, and the explicit admin call that creates a topic.
MAKING_COMMANDS = ("init", "topics create")
# The commands that take no root: the JVM jars for Spark (lakelog.jars).
ROOTLESS_COMMANDS = ("jars fetch", "jars conf")


@pytest.fixture
def typo(root: str) -> str:
    """A root as it is mistyped: the initialised `root` with a letter more (a sibling folder or S3 prefix)."""
    return root + "TYPO"


def written(root: str) -> list[str]:
    """Everything under `root` (local folder or S3 prefix); [] if nothing is there."""
    location = Location.of(root)
    if location.is_local and not os.path.exists(location.uri):
        return []
    return [entry.uri for entry in location.io.list(location.uri, recursive=True)]


def assert_refused(raised: pytest.ExceptionInfo, typo: str) -> None:
    error = raised.value
    assert isinstance(error, UnresolvedRoot)
    assert error.error.code() == KafkaError._RESOLVE
    assert error.root == Location.of(typo).uri
    assert typo in str(error) and "lakelog init" in str(error) and "create_topics" in str(error)
    assert len(str(error).splitlines()) == 1


def test_the_root_fixture_is_initialised_and_its_typo_is_not(root, typo):
    assert open_root(root).uri == Location.of(root).uri
    assert len(cluster_id(root)) == 32
    with pytest.raises(UnresolvedRoot):
        open_root(typo)


@pytest.mark.parametrize(
    "make_client",
    [
        lambda typo: Producer({"lakelog.root": typo}),
        lambda typo: Producer({"lakelog.root": typo, "transactional.id": "t"}),
        lambda typo: Consumer({"lakelog.root": typo}),
        lambda typo: Consumer({"lakelog.root": typo, "group.id": "g"}),
    ],
    ids=["producer", "transactional-producer", "consumer", "group-consumer"],
)
def test_a_client_on_a_mistyped_root_is_refused_and_writes_nothing(root, typo, make_client):
    with pytest.raises(UnresolvedRoot) as raised:
        make_client(typo)
    assert_refused(raised, typo)
    assert written(typo) == []


def test_the_admin_client_refuses_every_call_but_create_topics_on_a_mistyped_root(root, typo):
    admin = AdminClient({"lakelog.root": typo})  # as confluent's: creating it contacts nothing
    calls = [
        lambda: admin.list_topics(),
        lambda: admin.describe_topics(["orders"]),
        lambda: admin.delete_topics(["orders"]),
        lambda: admin.list_groups(),
        lambda: admin.list_consumer_groups(),
        lambda: admin.list_transactions(),
        lambda: admin.describe_cluster(),
        lambda: admin.describe_consumer_groups(["g"]),
        lambda: admin.describe_transactions(["t"]),
    ]
    for call in calls:
        with pytest.raises(UnresolvedRoot) as raised:
            call()
        assert_refused(raised, typo)
    admin.create_topics([NewTopic("orders", 1)], validate_only=True)["orders"].result()
    with pytest.raises(KafkaException):  # an invalid topic makes no root either
        admin.create_topics([NewTopic("no/such name", 1)])["no/such name"].result()
    assert written(typo) == []


def test_the_loader_refuses_a_mistyped_root(root, typo, tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_text('{"key": "a", "value": "b"}\n')
    with pytest.raises(UnresolvedRoot) as raised:
        load(typo, "orders", str(source), progress=False)
    assert_refused(raised, typo)
    assert written(typo) == []


def test_every_cli_command_on_a_mistyped_root_says_so_and_writes_nothing(root, typo, tmp_path):
    every = set(CLI_COMMANDS) | set(MAKING_COMMANDS) | set(ROOTLESS_COMMANDS)
    assert every == set(cli_commands()), "a command is missing from CLI_COMMANDS"
    (tmp_path / "suite.json").write_text("{}")
    (tmp_path / "rows.parquet").write_text("")

    def run(command: str) -> subprocess.CompletedProcess:
        return cli(*command.split(), *CLI_COMMANDS[command], "--root", typo, cwd=tmp_path)

    with ThreadPoolExecutor(4) as pool:
        results = dict(zip(CLI_COMMANDS, pool.map(run, CLI_COMMANDS), strict=True))
    for command, result in results.items():
        lines = result.stderr.splitlines()
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert lines == [lines[0]] and lines[0].startswith("lakelog: _RESOLVE: lakelog.root "), (command, result.stderr)
        assert f"lakelog init --root {Location.of(typo).uri}" in lines[0], command
        assert result.stdout == "", command
    assert written(typo) == []
    assert not (tmp_path / "sink.duckdb").exists()  # the refused sink opened no database


def test_lakelog_init_makes_a_root_that_every_client_then_takes(typo):
    made = cli("init", "--root", typo)
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"root {Location.of(typo).uri} is ready (cluster id ")
    again = cli("init", "--root", typo)  # idempotent: the same identity
    assert again.returncode == 0 and again.stdout == made.stdout
    listed = cli("topics", "list", "--root", typo)
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "", "")
    producer = Producer({"lakelog.root": typo, "allow.auto.create.topics": True})
    producer.produce("orders", value=b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"lakelog.root": typo, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    message = None
    for _ in range(30):
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            break
    consumer.close()
    assert message is not None and message.value() == b"v"


def test_create_topics_is_the_explicit_admin_path_that_makes_a_root(typo):
    AdminClient({"lakelog.root": typo}).create_topics([NewTopic("orders", 2)])["orders"].result()
    assert any(CLUSTER_METADATA_DIR in uri for uri in written(typo))
    assert AdminClient({"lakelog.root": typo}).list_topics().topics.keys() == {"orders"}
    Producer({"lakelog.root": typo})  # a root now
    made = cli("topics", "create", "--topic", "payments", "--root", typo + "2")
    assert made.returncode == 0, made.stderr
    assert open_root(typo + "2")


@pytest.mark.parametrize("folder", ["topics", "__transaction_state", "__consumer_offsets"])
def test_a_root_of_an_earlier_version_stays_a_root_and_init_gives_it_its_identity(typo, folder):
    # An earlier version made a root by writing its first table: a folder (an S3 prefix) of one of these.
    location = Location.of(typo)
    location.io.write((location / folder / "0" / "_delta_log" / "placeholder").uri, b"")
    assert open_root(typo).uri == location.uri
    Consumer({"lakelog.root": typo, "group.id": "g"}).close()
    with pytest.raises(UnresolvedRoot, match="lakelog init"):
        cluster_id(typo)
    assert cli("init", "--root", typo).returncode == 0
    assert len(cluster_id(typo)) == 32


def test_initialisers_racing_agree_on_one_cluster_id(typo):
    barrier = threading.Barrier(4)

    def initialise(_: int) -> str:
        barrier.wait()
        return initialise_root(typo)

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(initialise, range(4)))
    assert ids == {cluster_id(typo)}


def cli_commands() -> list[str]:
    """Every leaf command of the `lakelog` parser, as `topics list`."""
    found: list[str] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
                return
        found.append(" ".join(prefix))

    walk(_build_parser(), [])
    return found


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != "LAKELOG_ROOT"}
    return subprocess.run(
        [sys.executable, "-m", "lakelog.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env={**environment, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
