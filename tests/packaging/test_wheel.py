"""The built wheel, installed with its `spark` extra into a fresh virtualenv, works without the checkout (issue 9).

Every command runs in the test's own folder with no PYTHONPATH and no $LAKELOG_CONF_DIR, so lakelog, its
defaults (package data in `lakelog/conf/`) and `pyspark_lakelog` can only come from the venv's site-packages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.soak]

CHECKOUT = Path(__file__).resolve().parents[2]
# Variables that could lead a child to the checkout or its environment instead of the installed wheel.
LEAKS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LAKELOG_CONF_DIR", "LAKELOG_ROOT", "LAKELOG_JARS_DIR", "SPARK_HOME")


@dataclass(frozen=True)
class Venv:
    """A fresh virtualenv holding the wheel, the folder to run in and the environment to run with."""

    folder: Path
    bin: Path
    work: Path
    env: dict[str, str]

    def run(self, *command: str | Path, stdin: str | None = None, timeout: float = 300) -> str:
        """Run a command in `work` with the venv's environment; its stdout, or fail with its stderr."""
        result = subprocess.run(
            [str(part) for part in command],
            cwd=self.work,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"{command[0]} exited {result.returncode}:\n{result.stderr[-4000:]}"
        return result.stdout


def find_uv() -> str:
    beside_python = Path(sys.executable).parent / "uv"
    found = str(beside_python) if beside_python.exists() else shutil.which("uv")
    if found is None:
        pytest.fail("uv is needed to build and install the wheel (./dev installs it into .venv)")
    return found


def clean_environment(venv_bin: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in LEAKS}
    # Only the new venv's bin and the system's: nothing on PATH may lead back into the checkout.
    outside = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry and not entry.startswith(str(CHECKOUT))]
    env["PATH"] = os.pathsep.join([str(venv_bin), *outside])
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(venv_bin / "python")
    # The first command writes the bytecode of what it imports, cheaper than compiling all of pyspark at install.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Iterator[Venv]:
    """Build the wheel (through an sdist, as a release would) and install it with `[spark]` into a new venv."""
    folder = tmp_path_factory.mktemp("wheel")
    uv = find_uv()
    bare = {key: value for key, value in os.environ.items() if key not in LEAKS}

    def run(*command: str | Path, timeout: float = 600, check: bool = True) -> bool:
        result = subprocess.run(
            [str(part) for part in command], cwd=folder, env=bare, capture_output=True, text=True, timeout=timeout
        )
        assert not check or result.returncode == 0, f"{command[:3]} exited {result.returncode}:\n{result.stderr[-4000:]}"
        return result.returncode == 0

    run(uv, "build", CHECKOUT, "--out-dir", folder / "dist")
    [wheel] = (folder / "dist").glob("lakelog-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("producer", "consumer", "admin", "topic", "broker"):
        assert f"lakelog/conf/{kind}.properties" in names
    assert "pyspark_lakelog/__init__.py" in names
    assert "lakelog/jvm/pom.xml" in names, "`lakelog jars fetch` fetches the JVM jars of the pom the wheel carries"
    # The console's pages, script and style ship inside the package: nothing is fetched at run time.
    for asset in ("templates/base.html", "templates/transactions.html", "static/console.js", "static/console.css"):
        assert f"lakelog/console/{asset}" in names, asset
    # The Spark applications and the main job ship under lakelog's namespace, not as a top-level `pipelines`.
    for module in ("__init__", "demo", "consume_transform_produce", "materialize_committed_view", "partition_status"):
        assert f"lakelog/pipelines/{module}.py" in names
    assert not [name for name in names if name.startswith("pipelines/")], "no top-level pipelines package in the wheel"

    run(uv, "venv", "--python", sys.executable, folder / "venv")
    venv_bin = folder / "venv" / "bin"
    install = [
        "pip",
        "install",
        "--python",
        venv_bin / "python",
        "-c",
        CHECKOUT / "constraints.txt",
        f"lakelog[spark] @ {wheel.as_uri()}",
    ]
    # Offline first: the index serves pyspark's sdist without cache validators, so online uv rebuilds it each time (30 s).
    if not run(uv, *install, "--offline", check=False):
        run(uv, *install)
    work = folder / "work"
    work.mkdir()
    yield Venv(folder / "venv", venv_bin, work, clean_environment(venv_bin))
    # A venv with pyspark is 1.1 GB, and pytest keeps the folders of the last three runs.
    shutil.rmtree(folder / "venv", ignore_errors=True)


def lakelog_command(venv: Venv) -> str:
    found = shutil.which("lakelog", path=venv.env["PATH"])
    assert found == str(venv.bin / "lakelog")
    return found


def test_cli_creates_produces_and_consumes(venv):
    lakelog = lakelog_command(venv)
    assert "created topic orders" in venv.run(
        lakelog, "topics", "create", "--topic", "orders", "--partitions", "2", "--root", "cli"
    )
    lines = "".join(json.dumps({"key": f"c{n}", "value": f"order {n}"}) + "\n" for n in range(5))
    venv.run(lakelog, "produce", "--topic", "orders", "--root", "cli", stdin=lines)
    consumed = [json.loads(line) for line in venv.run(lakelog, "consume", "--topic", "orders", "--root", "cli").splitlines()]
    assert sorted((m["key"], m["value"]) for m in consumed) == [(f"c{n}", f"order {n}") for n in range(5)]
    assert {m["topic"] for m in consumed} == {"orders"}


TRANSACTION = textwrap.dedent(
    """
    import json, sys
    import lakelog
    from lakelog import AdminClient, Consumer, NewTopic, Producer, TopicPartition, config

    root = sys.argv[1]
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("payments", num_partitions=1)])["payments"].result()
    producer = Producer({"lakelog.root": root, "transactional.id": "wheel-test"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce("payments", key="p0", value=b"aborted")
    producer.abort_transaction()
    producer.begin_transaction()
    for n in range(3):
        producer.produce("payments", key=f"p{n}", value=f"paid {n}".encode())
    producer.commit_transaction()
    consumer = Consumer({"lakelog.root": root, "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("payments", 0)])
    values = [m.value().decode() for m in consumer.consume(100, timeout=5.0) if m.error() is None]
    consumer.close()
    print(json.dumps({"file": lakelog.__file__, "conf": str(config.conf_dir()), "values": values}))
    """
)


def test_transaction_through_the_api_imports_from_site_packages(venv):
    (venv.work / "transaction.py").write_text(TRANSACTION)
    report = json.loads(venv.run(venv.bin / "python", "transaction.py", "api").splitlines()[-1])
    assert report["values"] == ["paid 0", "paid 1", "paid 2"]
    site_packages = str(venv.folder / "lib")
    for where in (report["file"], report["conf"]):
        assert where.startswith(site_packages) and "site-packages" in where, where
        assert not where.startswith(str(CHECKOUT)), where


def test_the_pipelines_run_from_lakelogs_namespace(venv):
    """The spark-submit applications import their helpers as lakelog.pipelines: they run from site-packages."""
    for application in ("partition_status", "materialize_committed_view"):
        usage = venv.run(venv.bin / "python", "-m", f"lakelog.pipelines.{application}", "--help")
        assert "--topic" in usage, usage
    found = venv.run(venv.bin / "python", "-c", "import lakelog.pipelines.demo as m; print(m.__file__)").strip()
    assert "site-packages" in found and not found.startswith(str(CHECKOUT)), found


def test_spark_sql_reads_a_topic_through_pyspark_lakelog(venv):
    lakelog = lakelog_command(venv)
    venv.run(lakelog, "topics", "create", "--topic", "clicks", "--partitions", "3", "--root", "spark")
    venv.run(
        lakelog,
        "produce",
        "--topic",
        "clicks",
        "--root",
        "spark",
        stdin="".join(json.dumps({"key": f"u{n}", "value": "click"}) + "\n" for n in range(7)),
    )
    venv.run(lakelog, "spark-sql-init", "--root", "spark", "--output", "init.sql")
    out = venv.run(
        venv.bin / "spark-sql",
        "--master",
        "local[1]",
        "--driver-memory",
        "1g",
        "--conf",
        "spark.ui.enabled=false",
        "-i",
        "init.sql",
        "-e",
        "SELECT count(*) FROM clicks",
        timeout=600,
    )
    assert [line.strip() for line in out.splitlines() if line.strip()][-1] == "7"
