"""SparkSubmitHook: run a PySpark application with `spark-submit`, its output in the task log, one error line.

Why not apache-airflow-providers-apache-spark: its SparkSubmitHook does this
job, but the provider requires `pyspark-client`, the Spark Connect-only
distribution, which ships the same `pyspark` package files without the jars.
Installed beside pyspark 4.1.4 it overwrites pyspark's Python files (measured:
`pyspark.__version__` read 4.1.3 afterwards, the client's Python over 4.1.4's
jars), and since both distributions own the same files, uninstalling either
breaks the other (FINDINGS.md). So lakelog drives `spark-submit` itself, from
the installed pyspark (`pyspark/bin/spark-submit`) or from `$SPARK_HOME/bin`
when that is set, with the few options lakelog's jobs need.

    hook = SparkSubmitHook(lakelog_conn_id="lakelog_default", master="local[2]")
    report = hook.submit("lakelog.pipelines.materialize_committed_view", ["--topic", "orders"])

The application is a module name (found with importlib, so an installed
package works) or a `.py` path. With a `lakelog_conn_id`, the job gets the
connection's root as `--root` and its storage options as the `AWS_*`
environment variables lakelog's file IO reads (the environment, not the
command line, which is logged and visible to `ps`); the few options no
variable carries (timeouts and retries, never a secret) go as
`--storage-option KEY=VALUE`, which lakelog's Spark jobs take. The Python driver and
workers run this interpreter (`PYSPARK_PYTHON`, `PYSPARK_DRIVER_PYTHON`).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from lakelog import errors, jars
from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID, LakelogHook
from lakelog.client.roots import split_storage_options

logger = logging.getLogger(__name__)

# Quiet, small defaults for the 2-core machines lakelog's jobs run on; `conf` overrides any of them.
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}
DEFAULT_MASTER = "local[2]"
DEFAULT_DRIVER_MEMORY = "1g"
# How many of the job's last output lines are kept to find its error in.
TAIL_LINES = 400
MAX_ERROR_CHARS = 1000
# Seconds a killed job is given to stop after SIGTERM, before SIGKILL.
KILL_GRACE_S = 10

_TRACEBACK = "Traceback (most recent call last):"
_JVM_MAIN = re.compile(r'^Exception in thread "[^"]*" ')
_ERROR_LINE = re.compile(r"^[\w.$]*(Error|Exception|Exit|Interrupt)\b")
_LAKELOG_ERROR = re.compile(r"^lakelog\.errors\.(\w+):")
_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d ")
# Lines spark-submit prints on every run: never the error.
_NOISE = (
    "Using Spark's default log4j profile",
    "WARNING: Using incubator modules",
    "Setting Spark log level",
    "Setting default log level",
    "To adjust logging level",
)


def spark_submit_binary() -> str:
    """`$SPARK_HOME/bin/spark-submit` if SPARK_HOME is set, else the installed pyspark's own."""
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        return str(Path(spark_home) / "bin" / "spark-submit")
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise AirflowFailException("spark-submit not found: pyspark is not installed and SPARK_HOME is not set")
    return str(Path(next(iter(spec.submodule_search_locations))) / "bin" / "spark-submit")


def application_file(application: str) -> tuple[str, str | None]:
    """The application's file and the folder its package is imported from (None for a plain path).

    `lakelog.pipelines.partition_status` is found with importlib (so an installed package works);
    anything ending in `.py` or containing a path separator is a path.
    """
    if application.endswith(".py") or os.sep in application:
        path = Path(application)
        if not path.is_file():
            raise AirflowFailException(f"spark-submit application {application} is not a file")
        return str(path.resolve()), None
    try:
        spec = importlib.util.find_spec(application)
    except (ImportError, ValueError) as error:
        raise AirflowFailException(f"spark-submit application {application} cannot be found: {error}") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise AirflowFailException(f"spark-submit application {application} is not a Python module file")
    # Not resolved: lakelog.pipelines is a symlink in a checkout, and the import root is where the name starts.
    origin = Path(spec.origin).absolute()
    import_root = origin.parents[application.count(".")]
    return str(origin), str(import_root)


def last_error_line(lines: Sequence[str]) -> str | None:
    """The line of a failed job's output that says what went wrong; no stack trace.

    The exception line that ends the last Python traceback (a worker's traceback
    inside a Spark error is the later one, and names the cause), with the Java
    cause of a Py4JJavaError; else the JVM's `Exception in thread "main"` line;
    else the last line that names an error.
    """
    start = max((index for index, line in enumerate(lines) if line.rstrip().endswith(_TRACEBACK)), default=None)
    if start is not None:
        rest = list(lines[start + 1 :])
        for index, line in enumerate(rest):
            if line.strip() and not line[:1].isspace() and not _LOG_LINE.match(line):
                found = line.strip()
                following = rest[index + 1].strip() if index + 1 < len(rest) else ""
                if found.startswith("py4j.protocol.Py4JJavaError") and following.startswith(": "):
                    found = following[2:]
                return _clip(found)
    for line in reversed(lines):
        if _JVM_MAIN.match(line):
            return _clip(_JVM_MAIN.sub("", line.strip()))
    for line in reversed(lines):
        if _ERROR_LINE.match(line.strip()) and not line[:1].isspace():
            return _clip(line.strip())
    for line in reversed(lines):
        if line.strip() and not line[:1].isspace() and not _LOG_LINE.match(line) and not line.startswith(_NOISE):
            return _clip(line.strip())
    return None


def _clip(line: str) -> str:
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


def _is_retriable(error_line: str) -> bool:
    """False for a lakelog error a retry cannot mend (bad input, a fenced producer); True for anything else."""
    match = _LAKELOG_ERROR.match(error_line)
    kind = getattr(errors, match.group(1), None) if match else None
    if not (isinstance(kind, type) and issubclass(kind, errors.KafkaException)):
        return True
    return kind.retriable or kind.abortable


class SparkSubmitHook(BaseHook):
    """Build and run a `spark-submit` command; see the module docstring.

    :param lakelog_conn_id: the `lakelog` connection whose root (`--root`) and storage options the job gets;
        None for a job that needs neither.
    :param master: Spark master URL (default `local[2]`).
    :param driver_memory: the driver's memory (default `1g`); in local mode, executors share it.
    :param conf: Spark properties (`--conf key=value`), over DEFAULT_CONF.
    :param name: the application's name in Spark.
    :param env_vars: more environment variables for the job.
    :param spark_binary: the spark-submit to run (default: see `spark_submit_binary`).
    """

    def __init__(
        self,
        *,
        lakelog_conn_id: str | None = DEFAULT_CONN_ID,
        master: str = DEFAULT_MASTER,
        driver_memory: str = DEFAULT_DRIVER_MEMORY,
        conf: Mapping[str, Any] | None = None,
        name: str | None = None,
        env_vars: Mapping[str, str] | None = None,
        spark_binary: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lakelog_conn_id = lakelog_conn_id
        # One connection lookup per hook: the command line and the environment both read it.
        self._lakelog = LakelogHook(lakelog_conn_id) if lakelog_conn_id is not None else None
        self.master = master
        self.driver_memory = driver_memory
        # Delta Lake's Spark connector and S3A where lakelog's JVM jars are fetched (lakelog.jars), under the caller's.
        self.conf = {**DEFAULT_CONF, **jars.spark_conf(), **{str(key): str(value) for key, value in (conf or {}).items()}}
        self.name = name
        self.env_vars = dict(env_vars or {})
        self.spark_binary = spark_binary
        self._process: subprocess.Popen | None = None
        self._killed = False

    def build_command(self, application: str, application_args: Sequence[str] = ()) -> list[str]:
        """The spark-submit command line; with a connection, `--root <root>` goes before the job's arguments."""
        path, _ = application_file(application)
        command = [self.spark_binary or spark_submit_binary(), "--master", self.master]
        if self.name:
            command += ["--name", self.name]
        command += ["--driver-memory", self.driver_memory]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        arguments = [str(argument) for argument in application_args]
        if self._lakelog is not None and "--root" not in arguments:
            arguments = ["--root", self._lakelog.root, *arguments]
            _, options = self._storage_settings()
            for key, value in options.items():
                arguments += ["--storage-option", f"{key}={value}"]
        return [*command, path, *arguments]

    def build_environment(self, application: str) -> dict[str, str]:
        """This process's environment, with this interpreter for Spark's Python, the package path and store settings."""
        environment = dict(os.environ)
        environment["PYSPARK_PYTHON"] = sys.executable
        environment["PYSPARK_DRIVER_PYTHON"] = sys.executable
        _, import_root = application_file(application)
        if import_root is not None:
            paths = [import_root, *filter(None, environment.get("PYTHONPATH", "").split(os.pathsep))]
            environment["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        if self._lakelog is not None:
            variables, _ = self._storage_settings()
            environment.update(variables)
        environment.update(self.env_vars)
        return environment

    def _storage_settings(self) -> tuple[dict[str, str], dict[str, str]]:
        """The connection's storage options split: AWS_* variables lakelog's file IO reads, and the rest by key.

        The rest (timeouts, retries) goes on the command line as --storage-option; never a secret, since every
        one of SECRET_KEYS has its variable.
        """
        assert self._lakelog is not None
        return split_storage_options(self._lakelog.storage_options)

    def submit(self, application: str, application_args: Sequence[str] = ()) -> dict[str, Any] | None:
        """Run the job to its end, its output streamed into the task log line by line.

        Returns the last JSON object the job printed on a line of its own (lakelog's jobs print their report
        so), or None. Raises AirflowFailException for a lakelog error a retry cannot mend, AirflowException
        for any other failure, each with the job's one error line.
        """
        command = self.build_command(application, application_args)
        environment = self.build_environment(application)
        what = f"spark-submit of {application}"
        self.log.info("running %s", " ".join(command))
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        report: dict[str, Any] | None = None
        self._process = subprocess.Popen(
            command,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
        )
        assert self._process.stdout is not None
        for line in self._process.stdout:
            line = line.rstrip("\n")
            self.log.info("%s", line)
            tail.append(line)
            if line.startswith("{") and line.endswith("}"):
                try:
                    parsed = json.loads(line)
                except json.JSONDecodeError:
                    parsed = None
                if isinstance(parsed, dict):
                    report = parsed
        returncode = self._process.wait()
        if self._killed:
            raise AirflowException(f"{what} was stopped: the task was told to stop (exit code {returncode})")
        if returncode != 0:
            how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with code {returncode}"
            error_line = last_error_line(list(tail)) or "its output names no error (see the lines above)"
            message = f"{what} {how}: {error_line}"
            if _is_retriable(error_line):
                raise AirflowException(message)
            raise AirflowFailException(message)
        self.log.info("%s finished", what)
        return report

    def on_kill(self) -> None:
        """Stop the job: SIGTERM to spark-submit's process group (its JVM, Python driver and workers), then SIGKILL."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        self.log.warning("stopping spark-submit (process group %d)", process.pid)
        self._killed = True
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        except ProcessLookupError:
            pass


__all__ = [
    "DEFAULT_CONF",
    "DEFAULT_DRIVER_MEMORY",
    "DEFAULT_MASTER",
    "SparkSubmitHook",
    "application_file",
    "last_error_line",
    "spark_submit_binary",
]
