"""S3 storage options: their names, their environment variables, and how their values are read and checked.

A root's S3 settings are the `AWS_*` environment variables that pyarrow and
botocore read (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`), overridden by
explicit options (`lakelog.storage.<key>` in client configs, `--storage-option`
on the CLI, `storage.<key>` in Spark); keys are listed in `S3_KEYS`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from lakelog.errors import InvalidConfig
from lakelog.store.io.cloud_settings import AZURE_KEYS, CLOUD_SECRET_KEYS, GCS_KEYS, cloud_key

logger = logging.getLogger(__name__)

# Storage option keys for S3 roots (lower case; an `aws_` prefix and any case are accepted too), with the
# environment variable each one defaults from.
S3_KEYS = {
    "endpoint_url": "AWS_ENDPOINT_URL",
    "region": "AWS_REGION",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "session_token": "AWS_SESSION_TOKEN",
    "allow_http": "AWS_ALLOW_HTTP",
    # Per request: how long to wait, and how often object_store / the AWS SDK retry a failed request.
    "timeout": None,
    "connect_timeout": None,
    "max_retries": None,
    "retry_timeout": None,
    # delta-rs's copy-then-delete commit: not atomic, so a root that asks for it is refused (S12.2).
    "s3_allow_unsafe_rename": "AWS_S3_ALLOW_UNSAFE_RENAME",
}
# Every store's option keys, with their variables: what `lakelog.storage.*` may name, whatever the root's scheme.
STORAGE_KEYS = {**S3_KEYS, **AZURE_KEYS, **GCS_KEYS}
SECRET_KEYS = ("access_key_id", "secret_access_key", "session_token", *CLOUD_SECRET_KEYS)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?\s*$")


def s3_settings(options: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """S3 settings: the AWS_* environment overlaid by explicit `options` (keys checked, values as strings)."""
    environ = os.environ if environ is None else environ
    settings: dict[str, str] = {}
    for key, variable in S3_KEYS.items():
        if variable and environ.get(variable):
            settings[key] = environ[variable]
    if "region" not in settings and environ.get("AWS_DEFAULT_REGION"):
        settings["region"] = environ["AWS_DEFAULT_REGION"]
    # object_store (and so delta-rs, a reader of these tables) also takes AWS_ENDPOINT for the endpoint: the store
    # it reaches is the one checked (S12.2).
    if "endpoint_url" not in settings and environ.get("AWS_ENDPOINT"):
        settings["endpoint_url"] = environ["AWS_ENDPOINT"]
    for raw_key, value in (options or {}).items():
        key = storage_key(raw_key)
        if key not in S3_KEYS:
            continue  # an Azure or GCS option: not this store's setting
        if value is None:
            settings.pop(key, None)
            continue
        settings[key] = str(value).lower() if isinstance(value, bool) else str(value)
    _check_s3_settings(settings)
    return settings


def storage_key(raw_key: Any) -> str:
    """The canonical name of a storage option of any store (`AWS_ENDPOINT_URL`, `aws_endpoint_url` -> `endpoint_url`;
    `AZURE_STORAGE_ACCOUNT_NAME` -> `account_name`; `STORAGE_EMULATOR_HOST` -> `emulator_host`)."""
    key = str(raw_key).strip().lower()
    if key not in S3_KEYS and key.startswith("aws_"):
        key = key[len("aws_") :]
    if key not in S3_KEYS:
        key = cloud_key(key) or key
    if key not in STORAGE_KEYS:
        raise InvalidConfig(
            f"unknown storage option {raw_key!r}; known: {', '.join(STORAGE_KEYS)}", key=f"lakelog.storage.{raw_key}"
        )
    return key


def _check_s3_settings(settings: Mapping[str, str]) -> None:
    for key in ("timeout", "connect_timeout", "retry_timeout"):
        if key in settings:
            parse_duration_s(key, settings[key])
    if "max_retries" in settings and not settings["max_retries"].isdigit():
        raise InvalidConfig(
            f"storage option max_retries takes a count, not {settings['max_retries']!r}", key="lakelog.storage.max_retries"
        )
    for key in ("allow_http", "s3_allow_unsafe_rename"):
        if key in settings and settings[key].lower() not in ("true", "false"):
            raise InvalidConfig(f"storage option {key} takes true or false, not {settings[key]!r}", key=f"lakelog.storage.{key}")
    endpoint = settings.get("endpoint_url", "")
    if endpoint.startswith("http://") and settings.get("allow_http", "false").lower() != "true":
        raise InvalidConfig(
            f"endpoint {endpoint} is plain http: set allow_http=true (AWS_ALLOW_HTTP=true) to use it",
            key="lakelog.storage.allow_http",
        )


def parse_duration_s(key: str, text: str) -> float:
    """'30s', '500ms', '2min', '1h' or a number of seconds, in seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise InvalidConfig(
            f"storage option {key} takes a duration such as 30s or 500ms, not {text!r}", key=f"lakelog.storage.{key}"
        )
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]


__all__ = ["S3_KEYS", "SECRET_KEYS", "STORAGE_KEYS", "parse_duration_s", "s3_settings", "storage_key"]
