"""Azure's and Google's storage emulators on loopback for tests: Azurite (npm) and fake-gcs-server (Go), each in a
subprocess at a free port, installed by ./dev into .emulators/ (their paths in $LAKELOG_AZURITE and
$LAKELOG_FAKE_GCS_SERVER). A plain module, as tests/s3emulator.py is; the fixtures live in conftest::

    with Azurite() as azure:                  # azurite-blob --blobHost 127.0.0.1 --blobPort <free port> --inMemoryPersistence
        azure.create_container("lake")
        os.environ.update(azure.env())        # AZURE_STORAGE_CONNECTION_STRING (its BlobEndpoint names the emulator)
    with FakeGcs() as gcs:                    # fake-gcs-server -backend memory -scheme http -port <free port>
        gcs.create_bucket("lake")
        os.environ.update(gcs.env())          # STORAGE_EMULATOR_HOST

Findings (Azurite 3.37.0, fake-gcs-server v1.56.1, azure-storage-blob 12.31.1, google-cloud-storage 3.17.1):

* Azurite answers Put Blob with `If-None-Match: *` on an existing blob with 409 BlobAlreadyExists, as Azure does.
  It checks SharedKey signatures, which cover If-None-Match: a proxy stripping the header breaks the signature
  (403). A SAS token signs the URL, not the headers, so the stripping proxy's tests reach Azurite with a SAS.
* Azurite's accounts come from AZURITE_ACCOUNTS (`name:base64key`): each emulator here has an account of its own
  with a fresh random key, the marker secret of the redaction tests.
* fake-gcs-server v1.56.1 refuses `ifGenerationMatch=0` on an existing object with 412 on the three upload paths
  (uploadType=media, multipart, resumable; `tests/integration/test_cloud_stores.py` checks the multipart one the
  client sends, and the store check refuses a server that overwrites). It checks no credentials.
* google-cloud-storage sends a small object as one multipart POST to /upload/storage/v1/b/<bucket>/o, the
  object's name in the body's JSON part, not in the URL: the proxy finds it there (tests/s3proxy.py).
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator

from s3emulator import _listen, exported_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def installed(variable: str, default: str) -> str | None:
    """The emulator's program ($variable, else the checkout's .emulators/ copy), or None if not installed."""
    path = os.environ.get(variable) or os.path.join(ROOT, ".emulators", default)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


class Emulator:
    """One emulator process on 127.0.0.1 at a free port, its output in a log file; pause/resume as S3Emulator."""

    name = "emulator"
    start_timeout = 60.0

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._dir = tempfile.TemporaryDirectory(prefix=f"lakelog-{self.name}-")
        self.log_path = os.path.join(self._dir.name, "emulator.log")
        self.start_seconds: float | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def extra_env(self) -> dict[str, str]:
        return {}

    def ready_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> Emulator:
        started = time.monotonic()
        with _listen(None) as probe:
            self.port = probe.getsockname()[1]
        watch = os.getpid() if threading.current_thread() is threading.main_thread() else None
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.extra_env()},
                start_new_session=watch is None,
            )
        deadline = started + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                urllib.request.urlopen(self.ready_url(), timeout=1).close()
                self.start_seconds = time.monotonic() - started
                return self
            except urllib.error.HTTPError:  # any answer: it is up
                self.start_seconds = time.monotonic() - started
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not start; see {self.log_path}:\n{self.log_tail()}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
            process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError), open(self.log_path, errors="replace") as log:
            return "".join(log.readlines()[-lines:])
        return ""

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._dir.cleanup()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **overrides: str) -> dict[str, str]:
        raise NotImplementedError

    @contextlib.contextmanager
    def exported(self) -> Iterator[Emulator]:
        with exported_env(self.env()):
            yield self


class Azurite(Emulator):
    """Azurite's Blob service, in memory, with an account of its own whose key is fresh (a marker secret)."""

    name = "azurite"

    def __init__(self, account: str = "lakelogtest") -> None:
        super().__init__()
        self.account = account
        self.key = base64.b64encode(secrets.token_bytes(32)).decode()

    def command(self) -> list[str]:
        program = installed("LAKELOG_AZURITE", "azurite/node_modules/.bin/azurite-blob")
        if program is None:
            raise RuntimeError("Azurite is not installed: ./dev installs it (npm)")
        return [
            program,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--silent",
        ]

    def extra_env(self) -> dict[str, str]:
        return {"AZURITE_ACCOUNTS": f"{self.account}:{self.key}"}

    def blob_endpoint(self, endpoint_url: str | None = None) -> str:
        return f"{endpoint_url or self.endpoint_url}/{self.account}"

    def connection_string(self, endpoint_url: str | None = None) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};"
            f"BlobEndpoint={self.blob_endpoint(endpoint_url)};"
        )

    def env(self, **overrides: str) -> dict[str, str]:
        return {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string(overrides.get("endpoint_url"))}

    def service(self):  # noqa: ANN201 - azure's BlobServiceClient
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string())

    def create_container(self, name: str) -> str:
        self.service().create_container(name)
        return name

    def sas_token(self) -> str:
        """An account SAS allowing everything on blobs for an hour (it signs the URL, not the headers)."""
        from datetime import UTC, datetime, timedelta

        from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

        return generate_account_sas(
            self.account,
            self.key,
            ResourceTypes(service=True, container=True, object=True),
            AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
            expiry=datetime.now(UTC) + timedelta(hours=1),
        )

    def blob_names(self) -> list[tuple[str, str]]:
        service = self.service()
        return sorted(
            (container.name, blob.name)
            for container in service.list_containers()
            for blob in service.get_container_client(container.name).list_blobs()
        )


class FakeGcs(Emulator):
    """fake-gcs-server, in memory, plain HTTP."""

    name = "fake-gcs-server"

    def command(self) -> list[str]:
        program = installed("LAKELOG_FAKE_GCS_SERVER", "bin/fake-gcs-server")
        if program is None:
            raise RuntimeError("fake-gcs-server is not installed: ./dev installs it (go install)")
        return [
            program,
            "-backend",
            "memory",
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(self.port),
            "-public-host",
            f"127.0.0.1:{self.port}",
            "-external-url",
            f"http://127.0.0.1:{self.port}",
            "-log-level",
            "warn",
        ]

    def ready_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/storage/v1/b"

    def env(self, **overrides: str) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": overrides.get("endpoint_url") or self.endpoint_url}

    def client(self):  # noqa: ANN201 - google's storage.Client
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project="lakelog", credentials=AnonymousCredentials(), client_options={"api_endpoint": self.endpoint_url}
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(name)
        return name

    def object_names(self) -> list[tuple[str, str]]:
        client = self.client()
        return sorted((bucket.name, blob.name) for bucket in client.list_buckets() for blob in client.list_blobs(bucket.name))


def available(kind: str) -> str | None:
    """Why the emulator of `kind` cannot run here, or None if it can."""
    if kind == "azure":
        if installed("LAKELOG_AZURITE", "azurite/node_modules/.bin/azurite-blob") is None or shutil.which("node") is None:
            return "Azurite is not installed (./dev installs it with npm)"
    if kind == "gcs" and installed("LAKELOG_FAKE_GCS_SERVER", "bin/fake-gcs-server") is None:
        return "fake-gcs-server is not installed (./dev installs it with go install)"
    return None
