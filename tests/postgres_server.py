"""A PostgreSQL server for the tests: Debian's `postgresql` package (./dev installs it), a cluster made by `initdb`
in a temporary folder and started by `pg_ctl` on a loopback port, trust auth, stopped at the end. As root (CI and
these machines), the cluster runs as the package's `postgres` user, since PostgreSQL refuses to run as root."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def server_binaries() -> str | None:
    """The folder of initdb and pg_ctl ($LAKELOG_PG_BIN, or Debian's newest), or None."""
    given = os.environ.get("LAKELOG_PG_BIN")
    if given and os.path.exists(os.path.join(given, "initdb")):
        return given
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return os.path.dirname(found[-1]) if found else None


def unavailable() -> str | None:
    if server_binaries() is None:
        return "no PostgreSQL server (./dev installs Debian's postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (the postgres extra)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.bin = server_binaries()
        assert self.bin is not None, unavailable()
        self.folder = Path(tempfile.mkdtemp(prefix="lakelog-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.as_postgres = os.geteuid() == 0

    def _run(self, *command: str) -> None:
        argv = [os.path.join(self.bin, command[0]), *command[1:]]
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        if self.as_postgres:
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", str(self.data), "--auth=trust", "--username=postgres", "--no-sync", "-E", "UTF8")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "-t", "60", "start")
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def dsn(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database}"

    def new_database(self) -> str:
        """A fresh database of its own for one test; its DSN."""
        import psycopg

        name = f"t{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)
