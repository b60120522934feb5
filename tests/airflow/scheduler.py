"""A real Airflow 3 for the tests: `airflow standalone` (scheduler, DAG processor, API server, triggerer;
LocalExecutor, SQLite) in a temp AIRFLOW_HOME, every port on loopback and free, started and stopped by the test.

The tests drive it as a user would, through the `airflow` CLI (trigger, backfill
create, clear), and watch it by reading its SQLite metadata DB (read-only) and
its task log files: polling through the CLI costs seconds per call.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
TERMINAL = {"success", "failed", "upstream_failed", "skipped", "removed"}


LOCAL_SETTINGS = """
from sqlalchemy import event
from sqlalchemy.engine import Engine


@event.listens_for(Engine, "connect")
def _sqlite_connect(dbapi_connection, record):
    if type(dbapi_connection).__module__.startswith("sqlite3"):
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA busy_timeout = 60000")


@event.listens_for(Engine, "begin")
def _sqlite_begin(connection):
    if connection.engine.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Airflow:
    """One Airflow instance. `env` is what every process of it (and every task) sees."""

    def __init__(
        self,
        home: Path,
        dags_folder: Path,
        *,
        connections: Mapping[str, Mapping[str, Any]] | None = None,
        heartbeat_timeout_s: int = 300,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.home = home
        self.dags_folder = dags_folder
        self.port = free_port()
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "6",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{self.port}",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(free_port()),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(heartbeat_timeout_s),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "5",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            "PYTHONUNBUFFERED": "1",
        }
        for conn_id, connection in (connections or {}).items():
            self.env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(connection)
        self.env.update(extra_env or {})
        self.process: subprocess.Popen | None = None
        self.output = home / "standalone.log"

    # -- lifecycle -----------------------------------------------------------------

    def start(self, dag_ids: list[str], timeout_s: float = 240) -> None:
        """Migrate the DB, start `airflow standalone`, and wait until each of `dag_ids` is parsed."""
        self.home.mkdir(parents=True, exist_ok=True)
        migrated = self.cli(["db", "migrate"], timeout_s=300)
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        # SQLite with several writers (scheduler, DAG processor, triggerer, API server, CLI): a transaction that
        # reads and then writes fails at once with "database is locked" when another wrote in between. Airflow
        # cleans up after that only on Postgres and MySQL: a half-made backfill stays and blocks the next one.
        # Write-ahead logging lets readers be; the CLI calls below (backfill create, trigger) begin every
        # transaction IMMEDIATE with a busy timeout (SQLAlchemy's pysqlite recipe, loaded through Airflow's
        # airflow_local_settings hook), so they wait for the lock instead of failing halfway.
        with sqlite3.connect(self.home / "airflow.db") as connection:
            connection.execute("PRAGMA journal_mode=WAL")
        self.cli_settings = self.home / "cli-settings"
        self.cli_settings.mkdir(exist_ok=True)
        (self.cli_settings / "airflow_local_settings.py").write_text(LOCAL_SETTINGS)
        with open(self.output, "ab") as out:
            self.process = subprocess.Popen(
                [AIRFLOW, "standalone"],
                env=self.env,
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait(lambda: all(self.dag_parsed(dag_id) for dag_id in dag_ids), timeout_s, f"DAGs {dag_ids} to be parsed")
        # A task started before the API server answers cannot report, and its supervisor kills it unstarted.
        self.wait(lambda: self.api_answers(), timeout_s, "the API server to answer")

    def api_answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/execution/health", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self._descendants_of_home():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process = None

    def _descendants_of_home(self) -> list[int]:
        """Stray processes still running with this AIRFLOW_HOME (task supervisors a stopped scheduler left)."""
        found = []
        marker = f"AIRFLOW_HOME={self.home}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
        return [pid for pid in found if pid != os.getpid()]

    def standalone_log(self, tail: int = 4000) -> str:
        return self.output.read_text(errors="replace")[-tail:] if self.output.exists() else ""

    # -- driving it ----------------------------------------------------------------

    def cli(self, args: list[str], timeout_s: float = 120, *, writes: bool = False) -> subprocess.CompletedProcess:
        env = self.env
        if writes:
            env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(self.cli_settings), env.get("PYTHONPATH")]))}
        return subprocess.run([AIRFLOW, *args], env=env, cwd=self.home, capture_output=True, text=True, timeout=timeout_s)

    def trigger(self, dag_id: str, run_id: str, conf: Mapping[str, Any] | None = None, logical_date: str | None = None) -> str:
        args = ["dags", "trigger", dag_id, "--run-id", run_id]
        if conf is not None:
            args += ["--conf", json.dumps(conf)]
        if logical_date is not None:
            args += ["--logical-date", logical_date]
        done = self.cli(args, writes=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return run_id

    def backfill(self, dag_id: str, start: str, end: str, *options: str) -> subprocess.CompletedProcess:
        args = ["backfill", "create", "--dag-id", dag_id, "--from-date", start, "--to-date", end, *options]
        done = self.cli(args, writes=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done

    # -- watching it ---------------------------------------------------------------

    def query(self, sql: str, *args: Any) -> list[tuple]:
        db = self.home / "airflow.db"
        if not db.exists():
            return []
        for _ in range(20):
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as connection:
                    return connection.execute(sql, args).fetchall()
            except sqlite3.OperationalError as error:  # locked, or a table not yet migrated
                last = error
                time.sleep(0.2)
        raise last

    def dag_parsed(self, dag_id: str) -> bool:
        try:
            return bool(self.query("SELECT 1 FROM serialized_dag WHERE dag_id = ?", dag_id))
        except sqlite3.OperationalError:
            return False

    def import_errors(self) -> list[tuple]:
        try:
            return self.query("SELECT filename, stacktrace FROM import_error")
        except sqlite3.OperationalError:
            return []

    def runs(self, dag_id: str) -> dict[str, dict[str, Any]]:
        rows = self.query(
            "SELECT run_id, state, run_type, data_interval_start, logical_date FROM dag_run WHERE dag_id = ?", dag_id
        )
        return {
            row[0]: {"state": row[1], "run_type": row[2], "data_interval_start": row[3], "logical_date": row[4]} for row in rows
        }

    def task_instances(self, dag_id: str, run_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT run_id, task_id, map_index, state, try_number, pid, id FROM task_instance WHERE dag_id = ?"
        args: list[Any] = [dag_id]
        if run_id is not None:
            sql += " AND run_id = ?"
            args.append(run_id)
        names = ("run_id", "task_id", "map_index", "state", "try_number", "pid", "id")
        return [dict(zip(names, row, strict=False)) for row in self.query(sql, *args)]

    def wait(self, condition: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.5) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = condition()
            if value:
                return value
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"airflow standalone exited while waiting for {what}:\n{self.standalone_log()}")
            if time.monotonic() > deadline:
                errors = self.import_errors()
                raise AssertionError(
                    f"timed out after {timeout_s:.0f} s waiting for {what}; import errors: {errors}\n{self.standalone_log()}"
                )
            time.sleep(every_s)

    def wait_runs_done(self, dag_id: str, count: int, timeout_s: float) -> dict[str, dict[str, Any]]:
        """Wait until `count` runs of `dag_id` exist and none is queued or running."""

        def done() -> dict[str, dict[str, Any]] | None:
            runs = self.runs(dag_id)
            if len(runs) >= count and all(run["state"] in ("success", "failed") for run in runs.values()):
                return runs
            return None

        return self.wait(done, timeout_s, f"{count} runs of {dag_id} to finish")

    def wait_backfills_done(self, dag_id: str, timeout_s: float) -> None:
        """Wait until every backfill of `dag_id` is complete (its runs ended and the scheduler closed it)."""
        self.wait(
            lambda: all(row[0] is not None for row in self.query("SELECT completed_at FROM backfill WHERE dag_id = ?", dag_id)),
            timeout_s,
            f"the backfills of {dag_id} to complete",
        )

    def task_logs(self, dag_id: str, task_id: str | None = None) -> dict[str, str]:
        """Every task log file of `dag_id` (of `task_id`), by path relative to the logs folder."""
        base = self.home / "logs" / f"dag_id={dag_id}"
        pattern = f"**/task_id={task_id}/**/*.log" if task_id else "**/*.log"
        found = {}
        for path in sorted(base.glob(pattern)):
            found[str(path.relative_to(self.home / "logs"))] = path.read_text(errors="replace")
        # Logs of unmapped tasks sit directly in the task folder.
        if task_id:
            for path in sorted(base.glob(f"**/task_id={task_id}/*.log")):
                found[str(path.relative_to(self.home / "logs"))] = path.read_text(errors="replace")
        return found


__all__ = ["Airflow", "TERMINAL", "free_port"]
