"""Azure Blob Storage and Google Cloud Storage settings: their names, their environment variables, how they are read.

Each cloud's settings are read as its own tools read them, overridden by explicit options
(`lakelog.storage.<key>`, `--storage-option`, `storage.<key>` in Spark), as S3's are
(lakelog.store.io.s3_settings):

- Azure: `AZURE_STORAGE_CONNECTION_STRING` (what Azurite and Azure's CLI use; its `BlobEndpoint` names an
  emulator), or `AZURE_STORAGE_ACCOUNT_NAME` with `AZURE_STORAGE_ACCOUNT_KEY` or `AZURE_STORAGE_SAS_TOKEN`;
  `blob_endpoint` overrides `https://<account>.blob.core.windows.net`.
- GCS: Application Default Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, a service account's key file), the
  project (`GOOGLE_CLOUD_PROJECT`), and `STORAGE_EMULATOR_HOST` for an emulator (the variable Google's client
  libraries read).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lakelog.errors import InvalidConfig

# Storage option keys (lower case) with the environment variable each one defaults from.
AZURE_KEYS = {
    "connection_string": "AZURE_STORAGE_CONNECTION_STRING",
    "account_name": "AZURE_STORAGE_ACCOUNT_NAME",
    "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
    "sas_token": "AZURE_STORAGE_SAS_TOKEN",
    "blob_endpoint": "AZURE_STORAGE_BLOB_ENDPOINT",
}
GCS_KEYS = {
    "application_credentials": "GOOGLE_APPLICATION_CREDENTIALS",
    "project": "GOOGLE_CLOUD_PROJECT",
    "emulator_host": "STORAGE_EMULATOR_HOST",
}
# Per request, on every store: how long to wait, and how often a failed request is retried (as S3_KEYS).
REQUEST_KEYS = ("timeout", "connect_timeout", "max_retries")
CLOUD_SECRET_KEYS = ("connection_string", "account_key", "sas_token")
# The prefixes a cloud's own tools put before a key (`azure_storage_account_name`, `google_cloud_project`).
_PREFIXES = ("azure_storage_", "azure_", "google_cloud_", "google_", "gcs_", "storage_")


def cloud_key(raw_key: Any) -> str | None:
    """The canonical name of an Azure or GCS storage option, or None if it is none of theirs."""
    key = str(raw_key).strip().lower()
    known = {**AZURE_KEYS, **GCS_KEYS}
    if key in known:
        return key
    by_variable = {variable.lower(): name for name, variable in known.items()}
    if key in by_variable:
        return by_variable[key]
    for prefix in _PREFIXES:
        if key.startswith(prefix) and key[len(prefix) :] in known:
            return key[len(prefix) :]
    return None


def azure_settings(
    options: Mapping[str, Any] | None, account: str | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Azure settings: the AZURE_STORAGE_* environment overlaid by explicit `options`; `account` is the one an
    `abfss://container@account.dfs.core.windows.net` URI names (InvalidConfig if the settings name another)."""
    settings = _read(AZURE_KEYS, options, environ)
    if account:
        named = settings.get("account_name") or _connection_part(settings.get("connection_string", ""), "AccountName")
        if named and named != account:
            raise InvalidConfig(
                f"the root names the storage account {account!r} but the settings are for {named!r}",
                key="lakelog.storage.account_name",
            )
        settings.setdefault("account_name", account)
    if not settings.get("connection_string") and not settings.get("account_name"):
        raise InvalidConfig(
            "an Azure root needs an account: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME "
            "(lakelog.storage.account_name) with an account key or a SAS token",
            key="lakelog.storage.account_name",
        )
    return settings


def gcs_settings(options: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """GCS settings: GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_CLOUD_PROJECT and STORAGE_EMULATOR_HOST overlaid by
    explicit `options`."""
    return _read(GCS_KEYS, options, environ)


def _read(keys: Mapping[str, str], options: Mapping[str, Any] | None, environ: Mapping[str, str] | None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    settings = {key: environ[variable] for key, variable in keys.items() if environ.get(variable)}
    for raw_key, value in (options or {}).items():
        key = cloud_key(raw_key) or str(raw_key).strip().lower()
        if key not in keys and key not in REQUEST_KEYS:
            continue  # another store's option (an S3 endpoint given with an Azure root): not this store's setting
        if value is None:
            settings.pop(key, None)
            continue
        settings[key] = str(value)
    if "max_retries" in settings and not settings["max_retries"].isdigit():
        raise InvalidConfig(
            f"storage option max_retries takes a count, not {settings['max_retries']!r}", key="lakelog.storage.max_retries"
        )
    return settings


def _connection_part(connection_string: str, name: str) -> str | None:
    """One `Name=value` part of an Azure connection string."""
    for part in connection_string.split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == name.lower():
            return value.strip()
    return None


__all__ = ["AZURE_KEYS", "CLOUD_SECRET_KEYS", "GCS_KEYS", "azure_settings", "cloud_key", "gcs_settings"]
