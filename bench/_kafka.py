"""An Apache Kafka broker (KRaft, one node that is broker and controller) on loopback, for bench/kafka_reference.py
and the differential tests (tests/kafka).

Its jars are the ones ./dev fetched from jvm/kafka/pom.xml into the folder $LAKELOG_KAFKA_JARS_DIR names; nothing is
fetched here. `KafkaBroker.start()` formats a log folder in a temp dir (StorageTool, as `kafka-storage format`),
starts `kafka.Kafka` with a modest heap, waits until its listener answers a metadata request, and `stop()` ends that
one process and removes the folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

JARS_ENV = "LAKELOG_KAFKA_JARS_DIR"
HEAP = "-Xmx512m"
START_TIMEOUT_S = 90.0

# Single-node settings: every internal topic with one replica, no rebalance delay, small internal topics.
SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "log.flush.interval.messages": "9223372036854775807",
}


def jars_dir() -> Path | None:
    """The folder of the fetched broker jars, or None when it is not there (./dev fetches it)."""
    folder = os.environ.get(JARS_ENV)
    if folder and (Path(folder) / ".lakelog-stamp").is_file() and any(Path(folder).glob("kafka_2.13-*.jar")):
        return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KafkaBroker:
    def __init__(self, jars: Path) -> None:
        self.jars = jars
        self.folder = Path(tempfile.mkdtemp(prefix="lakelog-kafka-"))
        self.port = _free_port()
        self.controller_port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            "java",
            HEAP,
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dlog4j2.configurationFile=" + str(self.folder / "log4j2.properties"),
            "-cp",
            str(self.jars / "*"),
            main,
            *args,
        ]

    def start(self) -> KafkaBroker:
        settings = dict(SETTINGS)
        settings["controller.quorum.voters"] = f"1@127.0.0.1:{self.controller_port}"
        settings["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
        settings["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        settings["log.dirs"] = str(self.folder / "data")
        properties = self.folder / "server.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (self.folder / "log4j2.properties").write_text(
            "rootLogger.level = INFO\nrootLogger.appenderRef.f.ref = F\n"
            "appender.f.type = File\nappender.f.name = F\n"
            f"appender.f.fileName = {self.folder / 'server.log'}\n"
            "appender.f.layout.type = PatternLayout\nappender.f.layout.pattern = [%d] %p %m (%c)%n\n"
        )
        cluster_id = uuid.uuid4().hex[:22]
        format_run = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties)),
            capture_output=True,
            timeout=120,
        )
        if format_run.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {format_run.stdout!r} {format_run.stderr!r}")
        with open(self.folder / "stdout.log", "wb") as out:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(properties)), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + START_TIMEOUT_S
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})  # no log line per refused connect
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited ({self.process.returncode}): {self.log_tail()}")
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except Exception:  # noqa: BLE001 - not answering yet
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Kafka broker did not answer within {START_TIMEOUT_S:.0f} s")

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for name in ("stdout.log", "server.log"):
            path = self.folder / name
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return text

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)
