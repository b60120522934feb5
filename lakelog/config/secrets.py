"""Secrets kept out of what lakelog shows: config keys whose values are secret, and text with secrets redacted.

A secret is a store credential (`lakelog.storage.secret_access_key`, `AWS_SESSION_TOKEN`, ...) or a librdkafka
security key (`sasl.password`, `ssl.key.pem`, ...). Error texts and reprs name such a key but never show its value;
the CLI's log lines (botocore and urllib3 log every request's headers at DEBUG) pass through `RedactingFilter`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
# Key names whose values are secret: store credentials and librdkafka's security settings.
_SECRET_KEY = re.compile(
    r"(password|passphrase|secret|token|credential|access_key|account_key|connection_string|private\.key|ssl\.key\.pem"
    r"|sasl\.oauthbearer\.config)",
    re.IGNORECASE,
)
# The environment variables holding store credentials (lakelog.store.io.s3_settings.STORAGE_KEYS).
SECRET_ENVIRONMENT = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
)
# Credentials and signatures as request logs print them: headers (`'X-Amz-Security-Token': b'...'`,
# `x-amz-security-token:...` in a canonical request), query parameters, and botocore's `Signature:\n<hex>`.
_SECRET_TEXT = (
    re.compile(r"((?:x-amz-security-token|authorization)['\"]?\s*[:=]\s*b?['\"]?)[^'\"\n]+", re.IGNORECASE),
    re.compile(r"((?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token)=)[^&\s'\"]+", re.IGNORECASE),
    re.compile(r"((?:Credential|Signature)=)[^,\s'\"&]+"),
    re.compile(r"(Signature:\s*)[0-9a-fA-F]{16,}"),
    re.compile(r"((?:aws_)?(?:secret_access_key|session_token|access_key_id)['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]+", re.IGNORECASE),
    # Azure: a connection string's key or SAS, a SAS's signature in a URL, a SharedKey Authorization's signature.
    re.compile(r"((?:AccountKey|SharedAccessSignature)=)[^;'\"\s]+", re.IGNORECASE),
    re.compile(r"([?&]sig=)[^&\s'\"]+"),
    re.compile(r"(SharedKey(?:Lite)? [^:\s]+:)[^'\"\s,]+"),
)
# Values shorter than this are not searched for in text (a 1-character "secret" would redact every line).
_MIN_SECRET_LENGTH = 4


def is_secret(key: Any) -> bool:
    """Whether a config key (or storage option) holds a secret."""
    return isinstance(key, str) and _SECRET_KEY.search(key) is not None


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with credentials, signatures and each of `secrets` (literal values) replaced by REDACTED."""
    for value in sorted({value for value in secrets if value and len(value) >= _MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    for pattern in _SECRET_TEXT:
        text = pattern.sub(rf"\1{REDACTED}", text)
    return text


def redact_value(text: str, value: Any) -> str:
    """An error text about a secret's value with that value (as repr or str) left out."""
    for form in {repr(value), str(value)}:
        if form:
            text = text.replace(form, REDACTED)
    return text


def shown(values: Mapping[str, Any]) -> dict[str, Any]:
    """A config's values as a repr may show them: each secret's value is REDACTED."""
    return {key: REDACTED if is_secret(key) and value not in (None, "") else value for key, value in values.items()}


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The credential values the environment holds (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, ...)."""
    environ = os.environ if environ is None else environ
    return [environ[name] for name in SECRET_ENVIRONMENT if environ.get(name)]


class RedactingFilter(logging.Filter):
    """A handler's filter: each record's text (message, arguments, traceback) with secrets redacted."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = [value for value in secrets if value]

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format: shown as logging shows it, still redacted
            message = str(record.msg)
        record.msg, record.args = redact(message, self.secrets), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        return True


__all__ = [
    "REDACTED",
    "SECRET_ENVIRONMENT",
    "RedactingFilter",
    "environment_secrets",
    "is_secret",
    "redact",
    "redact_value",
    "shown",
]
