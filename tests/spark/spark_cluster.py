"""A Spark standalone cluster on loopback for the cluster tests: one master and two workers, each its own JVM.

Started from the pyspark package's own launcher (`bin/spark-class`), on free ports, each worker with one core, its
own work folder and local dirs, and its own loopback address (127.0.0.2, 127.0.0.3: Spark never runs a speculative
copy of a task on the host of the first attempt). Every process starts with a scrubbed environment (PATH, HOME,
JAVA_HOME and the launcher's SPARK_* settings): no AWS_* and no LAKELOG_* reaches an executor, so what a task needs
must come from the application (its conf, `--jars`, `--py-files`). Readiness is the master's JSON status showing both
workers alive. Kept free of pytest: the fixture is in the test module.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
MASTER_HOST = "127.0.0.1"
WORKER_HOSTS = ("127.0.0.2", "127.0.0.3")
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
READY_TIMEOUT_S = 120.0


def free_port(host: str = MASTER_HOST) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def scrubbed_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Only what the launcher needs: never the test process's AWS_* (the S3 emulator's) or LAKELOG_* settings."""
    kept = {name: os.environ[name] for name in ("PATH", "HOME", "JAVA_HOME", "LANG") if os.environ.get(name)}
    return {**kept, "SPARK_HOME": str(SPARK_HOME), **(extra or {})}


@dataclass
class SparkCluster:
    """One master and two one-core workers under `folder` (logs, work folders, local dirs, an empty conf dir)."""

    folder: Path
    worker_memory: str = "1g"
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.master_port = free_port()
        self.webui_port = free_port()
        self.conf_dir = self.folder / "conf"  # empty: no spark-defaults.conf or spark-env.sh of this machine

    @property
    def master_url(self) -> str:
        return f"spark://{MASTER_HOST}:{self.master_port}"

    def start(self) -> SparkCluster:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self._launch(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", MASTER_HOST, "--port", str(self.master_port)]
            + ["--webui-port", str(self.webui_port)],
            {"SPARK_LOCAL_IP": MASTER_HOST},
        )
        for index, host in enumerate(WORKER_HOSTS):
            work = self.folder / f"worker-{index}"
            (work / "work").mkdir(parents=True, exist_ok=True)
            (work / "local").mkdir(parents=True, exist_ok=True)
            self._launch(
                f"worker-{index}",
                ["org.apache.spark.deploy.worker.Worker", "--host", host, "--port", str(free_port(host))]
                + ["--webui-port", str(free_port(host)), "--cores", "1", "--memory", self.worker_memory]
                + ["--work-dir", str(work / "work"), self.master_url],
                {"SPARK_LOCAL_IP": host, "SPARK_LOCAL_DIRS": str(work / "local")},
            )
        self.wait_for(lambda status: status.get("aliveworkers", 0) == len(WORKER_HOSTS), "both workers alive")
        return self

    def _launch(self, name: str, arguments: list[str], extra: Mapping[str, str]) -> None:
        log = (self.folder / f"{name}.log").open("wb")
        env = scrubbed_env({"SPARK_CONF_DIR": str(self.conf_dir), "SPARK_DAEMON_MEMORY": "256m", **extra})
        self.processes[name] = subprocess.Popen(
            [str(SPARK_CLASS), *arguments],
            env=env,
            cwd=self.folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the executors it starts are killed with it
        )
        log.close()

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://{MASTER_HOST}:{self.webui_port}/json/", timeout=5) as answer:
            return json.loads(answer.read())

    def wait_for(self, condition, what: str, timeout_s: float = READY_TIMEOUT_S) -> dict:
        """Poll the master's JSON status until `condition(status)` holds; RuntimeError with the logs' tails if not."""
        deadline = time.monotonic() + timeout_s
        while True:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"spark {name} exited with {process.returncode}\n{self.log_tails()}")
            try:
                status = self.status()
                if condition(status):
                    return status
            except OSError:
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"spark cluster: no {what} after {timeout_s:.0f} s\n{self.log_tails()}")
            time.sleep(0.2)

    def worker_pids(self) -> list[int]:
        return [process.pid for name, process in self.processes.items() if name.startswith("worker")]

    def executor_pids(self) -> dict[int, int]:
        """The executor JVMs the workers run now: {pid: worker pid}."""
        workers = set(self.worker_pids())
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes()
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if EXECUTOR_CLASS.encode() in command and parent in workers:
                found[int(entry.name)] = parent
        return found

    def log_tails(self, lines: int = 30) -> str:
        parts = []
        for log in sorted(self.folder.glob("*.log")) + sorted(self.folder.glob("worker-*/work/*/*/stderr")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.relative_to(self.folder)} ---\n" + "\n".join(text))
        return "\n".join(parts)

    def stop(self) -> None:
        """Kill every process group (workers first, then the master); waits for each."""
        for name in sorted(self.processes, reverse=True):
            process = self.processes[name]
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue
            # The executors share the worker's group; make sure none is left behind by a worker that died first.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def ancestors(pid: int) -> list[int]:
    """`pid`'s parent, its parent, ... up to init."""
    chain = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        chain.append(pid)
    return chain


__all__ = ["SPARK_HOME", "SPARK_SUBMIT", "SparkCluster", "ancestors", "scrubbed_env"]
