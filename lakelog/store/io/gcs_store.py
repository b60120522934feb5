"""The FileIO of GCS roots: a bucket of Google Cloud Storage (or fake-gcs-server), through Google's
`google-cloud-storage` (the `lakelog[gcs]` extra).

A commit is an upload with `ifGenerationMatch=0`, which GCS refuses with 412 when the object exists:
put-if-absent. The library retries such an upload after a lost answer (it is idempotent given the condition):
a retry that finds this very object answers 412, and the log reads the object back to tell (S12.3).
Settings: lakelog.store.io.cloud_settings.
"""

from __future__ import annotations

import builtins
import logging
import threading
from typing import Any

from lakelog.errors import InvalidConfig, KafkaStorageError
from lakelog.store.io.faults import AccessDenied, ConditionalWriteConflict
from lakelog.store.io.fileio import GCS
from lakelog.store.io.object_store import ObjectClient, ObjectFileIO, ObjectInfo
from lakelog.store.io.s3_settings import parse_duration_s

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://storage.googleapis.com"


class GcsFileIO(ObjectFileIO):
    """A bucket of Google Cloud Storage (or of fake-gcs-server): `gs://bucket/prefix` URIs."""

    scheme = GCS

    def _make_client(self) -> ObjectClient:
        return GcsClient(self.settings)

    def delta_options(self) -> dict[str, str]:
        """object_store's (delta-rs's) keys: the service account's key file, or an emulator's address (object_store
        reads `gcs_base_url` and `disable_oauth` from a service account key, which it takes inline)."""
        import json

        if self.settings.get("emulator_host"):
            host = self.settings["emulator_host"]
            key = {"gcs_base_url": host if "://" in host else f"http://{host}", "disable_oauth": True}
            return {
                "google_service_account_key": json.dumps({**key, "client_email": "", "private_key": "", "private_key_id": ""})
            }
        if self.settings.get("application_credentials"):
            return {"google_service_account": self.settings["application_credentials"]}
        return {}


class GcsClient(ObjectClient):
    """One google-cloud-storage client per thread (its HTTP session is not shared between threads)."""

    def __init__(self, settings: dict[str, str]) -> None:
        try:
            from google.cloud import storage  # noqa: F401
        except ImportError:
            raise InvalidConfig("a GCS root needs the gcs extra: pip install 'lakelog[gcs]'", key="lakelog.root") from None
        self.settings = settings
        host = settings.get("emulator_host", "")
        self.api_endpoint = (host if "://" in host else f"http://{host}") if host else DEFAULT_ENDPOINT
        connect = parse_duration_s("connect_timeout", settings["connect_timeout"]) if settings.get("connect_timeout") else 20.0
        read = parse_duration_s("timeout", settings["timeout"]) if settings.get("timeout") else 60.0
        self.timeout = (connect, read)
        self._local = threading.local()

    def endpoint(self) -> str:
        return self.api_endpoint

    def _client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._make()
        return client

    def _make(self) -> Any:
        client = self._new_client()
        # google-cloud-storage (3.x) keeps bucket metadata for its OpenTelemetry spans: each new client GETs its
        # bucket's metadata on a background thread, and every 404 (an absent object: a consumer's look for the next
        # commit, a topic with no quality suite) sends a bucket GET after it. Requests lakelog never asked for, a
        # second request per absent read, for span attributes lakelog does not record.
        if getattr(client, "_bucket_metadata_cache", None) is not None:
            client._bucket_metadata_cache = None
        return client

    def _new_client(self) -> Any:
        from google.cloud import storage

        settings = self.settings
        project = settings.get("project")
        with _faults("connecting to", self.api_endpoint):
            if settings.get("emulator_host"):
                from google.auth.credentials import AnonymousCredentials

                return storage.Client(
                    project=project or "lakelog",
                    credentials=AnonymousCredentials(),
                    client_options={"api_endpoint": self.api_endpoint},
                )
            if settings.get("application_credentials"):
                from google.oauth2 import service_account

                credentials = service_account.Credentials.from_service_account_file(settings["application_credentials"])
                return storage.Client(project=project or credentials.project_id, credentials=credentials)
            return storage.Client(project=project)

    def _retry(self, conditional: bool) -> Any:
        from google.cloud.storage.retry import DEFAULT_RETRY, DEFAULT_RETRY_IF_GENERATION_SPECIFIED

        if self.settings.get("max_retries") == "0":
            return None
        return DEFAULT_RETRY_IF_GENERATION_SPECIFIED if conditional else DEFAULT_RETRY

    def _blob(self, bucket: str, key: str) -> Any:
        return self._client().bucket(bucket).blob(key)

    def get(self, bucket: str, key: str, uri: str, start: int | None = None, length: int | None = None) -> bytes:
        end = None if length is None else (start or 0) + length - 1
        with _faults("reading", uri):
            return self._blob(bucket, key).download_as_bytes(start=start, end=end, timeout=self.timeout, retry=self._retry(False))

    def head(self, bucket: str, key: str, uri: str) -> ObjectInfo | None:
        with _faults("looking up", uri):
            found = self._client().bucket(bucket).get_blob(key, timeout=self.timeout, retry=self._retry(False))
        if found is None:
            return None
        return ObjectInfo(key, found.size or 0, found.updated.timestamp() if found.updated else None)

    def put(self, bucket: str, key: str, data: bytes, uri: str, *, if_absent: bool) -> bool:
        from google.api_core.exceptions import PreconditionFailed

        try:
            with _faults("writing", uri, taken=if_absent):
                self._blob(bucket, key).upload_from_string(
                    data,
                    content_type="application/octet-stream",
                    if_generation_match=0 if if_absent else None,
                    timeout=self.timeout,
                    retry=self._retry(if_absent),
                )
            return True
        except PreconditionFailed:
            return False

    def list(
        self, bucket: str, prefix: str, uri: str, *, recursive: bool
    ) -> tuple[builtins.list[ObjectInfo], builtins.list[str]]:
        with _faults("listing", uri):
            found = self._client().list_blobs(
                bucket,
                prefix=prefix or None,
                delimiter=None if recursive else "/",
                timeout=self.timeout,
                retry=self._retry(False),
            )
            objects = [
                ObjectInfo(blob.name, blob.size or 0, blob.updated.timestamp() if blob.updated else None) for blob in found
            ]
            prefixes = sorted(found.prefixes)
        return objects, prefixes

    def delete(self, bucket: str, key: str, uri: str) -> bool:
        try:
            with _faults("deleting", uri):
                self._blob(bucket, key).delete(timeout=self.timeout, retry=self._retry(False))
            return True
        except FileNotFoundError:
            return False


class _faults:
    """The library's errors as lakelog's: absent is FileNotFoundError; the rest typed KafkaStorageErrors."""

    def __init__(self, doing: str, uri: str, *, taken: bool = False) -> None:
        self.doing, self.uri, self.taken = doing, uri, taken

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        from google.api_core import exceptions as api
        from google.auth import exceptions as auth

        if error is None or isinstance(error, (FileNotFoundError, KafkaStorageError)):
            return None
        if self.taken and isinstance(error, api.PreconditionFailed):
            return None  # the conditional create refused: the caller's False
        text = f"{self.doing} {self.uri} failed: {_describe(error)}"
        if isinstance(error, api.NotFound):
            # An upload never finds its object absent: a 404 to one is the bucket's (as "bucket does not exist" is).
            if self.doing == "writing" or ("bucket" in str(error).lower() and "does not exist" in str(error).lower()):
                raise KafkaStorageError(f"{text} (NoSuchBucket)", uri=self.uri) from None
            raise FileNotFoundError(self.uri) from None
        if isinstance(error, api.Unauthorized) or isinstance(error, auth.GoogleAuthError):
            raise KafkaStorageError(f"{text} (401 Unauthorized)", uri=self.uri) from None
        if isinstance(error, api.Forbidden):
            raise AccessDenied(text, uri=self.uri) from None
        if isinstance(error, api.Conflict):
            raise ConditionalWriteConflict(text, uri=self.uri) from None
        if isinstance(error, (api.GoogleAPIError, OSError, ValueError)) or type(error).__module__.startswith(
            ("requests", "urllib3", "google")
        ):
            raise KafkaStorageError(text, uri=self.uri) from None
        return None


def _describe(error: BaseException) -> str:
    """The error on one line: its class and the first line of its message (never a header or a token)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


__all__ = ["GcsFileIO"]
