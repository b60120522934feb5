"""The FileIO of Azure roots: a container of Azure Blob Storage or ADLS Gen2 (which serves the Blob API too), through
Microsoft's `azure-storage-blob` (the `lakelog[azure]` extra).

A commit is Put Blob with `If-None-Match: *` (`upload_blob(overwrite=False)`), which Azure refuses with 409
BlobAlreadyExists (412 ConditionNotMet on some paths) when the blob exists: put-if-absent. Settings:
lakelog.store.io.cloud_settings.
"""

from __future__ import annotations

import builtins
import logging
from typing import Any

from lakelog.errors import InvalidConfig, KafkaStorageError
from lakelog.store.io.cloud_settings import _connection_part
from lakelog.store.io.faults import AccessDenied, ConditionalWriteConflict
from lakelog.store.io.fileio import AZURE
from lakelog.store.io.object_store import ObjectClient, ObjectFileIO, ObjectInfo
from lakelog.store.io.s3_settings import parse_duration_s

logger = logging.getLogger(__name__)

_TAKEN = {"BlobAlreadyExists", "ConditionNotMet"}
_NO_CONTAINER = "ContainerNotFound"
_REFUSED = {"AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch", "InvalidAuthenticationInfo"}


class AzureFileIO(ObjectFileIO):
    """A container of Azure Blob Storage (or ADLS Gen2, or Azurite): `az://container/prefix` URIs."""

    scheme = AZURE

    def _make_client(self) -> ObjectClient:
        return AzureClient(self.settings)

    def delta_options(self) -> dict[str, str]:
        """object_store's (delta-rs's) keys for the same account, endpoint and credential."""
        connection = self.settings.get("connection_string", "")
        options = {}
        for key, part in (("account_name", "AccountName"), ("account_key", "AccountKey"), ("sas_token", "SharedAccessSignature")):
            value = self.settings.get(key) or _connection_part(connection, part)
            if value:
                options[{"sas_token": "azure_storage_sas_key"}.get(key, f"azure_storage_{key}")] = value.lstrip("?")
        endpoint = self.settings.get("blob_endpoint") or _connection_part(connection, "BlobEndpoint")
        if endpoint:
            options["azure_storage_endpoint"] = endpoint.rstrip("/")
            options["allow_http"] = str(endpoint.startswith("http://")).lower()
        return options


class AzureClient(ObjectClient):
    def __init__(self, settings: dict[str, str]) -> None:
        try:
            from azure.storage.blob import BlobServiceClient
        except ImportError:
            raise InvalidConfig("an Azure root needs the azure extra: pip install 'lakelog[azure]'", key="lakelog.root") from None
        self.account_url, credential = _account(settings)
        from azure.storage.blob import LinearRetry

        # The library's default waits 15 s and more before a retry: a commit whose answer was lost would stall the
        # writer that long. Retries a second apart (jittered 0-2 s), as many as `max_retries` (2 unless set).
        retries = int(settings["max_retries"]) if settings.get("max_retries") else 2
        options: dict[str, Any] = {"retry_policy": LinearRetry(backoff=1, random_jitter_range=1, retry_total=retries)}
        if settings.get("connect_timeout"):
            options["connection_timeout"] = parse_duration_s("connect_timeout", settings["connect_timeout"])
        if settings.get("timeout"):
            options["read_timeout"] = parse_duration_s("timeout", settings["timeout"])
        self.service = BlobServiceClient(self.account_url, credential=credential, **options)
        # The SDK logs every request and answer at INFO (headers redacted): lakelog logs what happens, not each request.
        requests_log = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
        if requests_log.level == logging.NOTSET:
            requests_log.setLevel(logging.WARNING)

    def endpoint(self) -> str:
        return self.account_url

    def _blob(self, container: str, key: str) -> Any:
        return self.service.get_blob_client(container, key)

    def get(self, bucket: str, key: str, uri: str, start: int | None = None, length: int | None = None) -> bytes:
        with _faults("reading", uri):
            return self._blob(bucket, key).download_blob(offset=start, length=length).readall()

    def head(self, bucket: str, key: str, uri: str) -> ObjectInfo | None:
        try:
            with _faults("looking up", uri):
                found = self._blob(bucket, key).get_blob_properties()
        except FileNotFoundError:
            return None
        return ObjectInfo(key, found.size, found.last_modified.timestamp() if found.last_modified else None)

    def put(self, bucket: str, key: str, data: bytes, uri: str, *, if_absent: bool) -> bool:
        from azure.core.exceptions import ResourceExistsError, ResourceModifiedError

        try:
            with _faults("writing", uri, taken=if_absent):
                self._blob(bucket, key).upload_blob(data, overwrite=not if_absent)
            return True
        except (ResourceExistsError, ResourceModifiedError):
            return False

    def list(
        self, bucket: str, prefix: str, uri: str, *, recursive: bool
    ) -> tuple[builtins.list[ObjectInfo], builtins.list[str]]:
        objects: builtins.list[ObjectInfo] = []
        prefixes: builtins.list[str] = []
        container = self.service.get_container_client(bucket)
        with _faults("listing", uri):
            found = container.list_blobs(name_starts_with=prefix) if recursive else container.walk_blobs(prefix, delimiter="/")
            for item in found:
                if not hasattr(item, "size"):  # a BlobPrefix: a folder directly under the prefix
                    prefixes.append(item.name)
                    continue
                modified = getattr(item, "last_modified", None)
                objects.append(ObjectInfo(item.name, getattr(item, "size", 0) or 0, modified.timestamp() if modified else None))
        return objects, prefixes

    def delete(self, bucket: str, key: str, uri: str) -> bool:
        try:
            with _faults("deleting", uri):
                self._blob(bucket, key).delete_blob()
            return True
        except FileNotFoundError:
            return False


def _account(settings: dict[str, str]) -> tuple[str, Any]:
    """The account's blob endpoint and the credential to reach it with, from the settings."""
    connection = settings.get("connection_string", "")
    name = settings.get("account_name") or _connection_part(connection, "AccountName")
    key = settings.get("account_key") or _connection_part(connection, "AccountKey")
    sas = settings.get("sas_token") or _connection_part(connection, "SharedAccessSignature")
    endpoint = settings.get("blob_endpoint") or _connection_part(connection, "BlobEndpoint")
    if not endpoint:
        protocol = _connection_part(connection, "DefaultEndpointsProtocol") or "https"
        suffix = _connection_part(connection, "EndpointSuffix") or "core.windows.net"
        endpoint = f"{protocol}://{name}.blob.{suffix}"
    if key and name:
        return endpoint.rstrip("/"), {"account_name": name, "account_key": key}
    if sas:
        return endpoint.rstrip("/"), sas.lstrip("?")
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise InvalidConfig(
            f"no credential for the storage account {name!r}: set AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN "
            f"(lakelog.storage.account_key, .sas_token), a connection string, or install azure-identity for the "
            f"default Azure credential chain",
            key="lakelog.storage.account_key",
        ) from None
    logger.info("no key or SAS for the storage account %s: using the default Azure credential chain", name)
    return endpoint.rstrip("/"), DefaultAzureCredential()


class _faults:
    """The SDK's errors as lakelog's: absent is FileNotFoundError; the rest typed KafkaStorageErrors."""

    def __init__(self, doing: str, uri: str, *, taken: bool = False) -> None:
        self.doing, self.uri, self.taken = doing, uri, taken

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError, ResourceModifiedError

        if error is None or not isinstance(error, AzureError):
            return None
        raw = getattr(error, "error_code", "") or ""
        code = str(getattr(raw, "value", raw))
        status = getattr(getattr(error, "response", None), "status_code", None)
        if self.taken and isinstance(error, (ResourceExistsError, ResourceModifiedError)) and (code in _TAKEN or not code):
            return None  # the conditional create refused: the caller's False
        text = f"{self.doing} {self.uri} failed: {_describe(error, code, status)}"
        if code == _NO_CONTAINER:
            raise KafkaStorageError(f"{text} (NoSuchBucket)", uri=self.uri) from None
        if code in ("BlobNotFound", "ResourceNotFound") or (status == 404 and self.doing != "writing"):
            raise FileNotFoundError(self.uri) from None
        if status == 403 and (code == "AuthenticationFailed" or "failed to authenticate" in text):
            # A wrong key or SAS signature (Azurite says AuthorizationFailure "Server failed to authenticate").
            raise KafkaStorageError(f"{text} (AuthenticationFailed)", uri=self.uri) from None
        if code in _REFUSED and status == 403:
            raise AccessDenied(text, uri=self.uri) from None
        if isinstance(error, ResourceExistsError) and status == 409:
            raise ConditionalWriteConflict(text, uri=self.uri) from None
        if isinstance(error, HttpResponseError) or status is not None:
            raise KafkaStorageError(text, uri=self.uri) from None
        raise KafkaStorageError(text, uri=self.uri) from None


def _describe(error: BaseException, code: str, status: int | None) -> str:
    """The error on one line: status, code and the first line of the message (never headers or a signature)."""
    first = str(getattr(error, "message", None) or error).strip().splitlines()
    head = first[0] if first else type(error).__name__
    parts = [str(status) if status else "", code, head[:200]]
    return " ".join(part for part in parts if part)


__all__ = ["AzureFileIO"]
