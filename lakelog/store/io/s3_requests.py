"""Single S3 requests pyarrow's filesystem cannot make: a conditional PUT, a bare GET, a bare HEAD.

A commit is `PUT _delta_log/<v+1>.json` with `If-None-Match: *`, which S3 (and
MinIO, R2, moto...) refuse with 412 if the key exists: put-if-absent, the
mutual exclusion Delta's protocol asks of the store. pyarrow's S3 filesystem
cannot send that header, so these requests go through botocore, built from the
same settings as the filesystem (`S3_KEYS`). A GET of an absent key is one
request here (pyarrow asks with a HEAD first), so probing the log forward for
the next commit costs one request per version.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import botocore.config
import botocore.exceptions
import botocore.session
from botocore.awsrequest import AWSRequest

from lakelog.errors import KafkaStorageError
from lakelog.store.io.faults import AccessDenied, ConditionalWriteConflict
from lakelog.store.io.s3_settings import parse_duration_s

logger = logging.getLogger(__name__)

_ABSENT = {"404", "NoSuchKey", "NotFound"}
# A key placeholder: a presigned URL of it shows where the client puts a bucket's keys.
_KEY = "lakelog-key"
_TAKEN = {"412", "PreconditionFailed"}
# S3 answers 409 to a conditional write racing another on the same key: this one did not land, or not yet.
_CONFLICT = {"409", "ConditionalRequestConflict", "OperationAborted"}
# Connections the client keeps per process (botocore: 10): one per request sent side by side.
MAX_POOL_CONNECTIONS = 32


class S3Requests:
    """One botocore S3 client per process for a set of settings (clients are thread-safe; a fork makes its own)."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        self.settings = dict(settings)
        self._client: tuple[int, Any] | None = None
        self._lock = threading.Lock()
        self._object_urls: dict[str, tuple[Any, str]] = {}

    def client(self) -> Any:
        pid = os.getpid()
        if self._client is None or self._client[0] != pid:
            with self._lock:
                if self._client is None or self._client[0] != pid:
                    self._client = (pid, self._make_client())
        return self._client[1]

    def _make_client(self) -> Any:
        settings = self.settings
        options: dict[str, Any] = {"s3": {"addressing_style": "path" if settings.get("endpoint_url") else "auto"}}
        if settings.get("connect_timeout"):
            options["connect_timeout"] = parse_duration_s("connect_timeout", settings["connect_timeout"])
        if settings.get("timeout"):
            options["read_timeout"] = parse_duration_s("timeout", settings["timeout"])
        attempts = self._attempts()
        # total_max_attempts counts the first request (botocore's max_attempts does not).
        options["retries"] = {"total_max_attempts": attempts, "mode": "standard"}
        # No CRC32 of each small body (S3 checks Content-MD5-less PUTs by their signature's payload hash anyway).
        options["request_checksum_calculation"] = "when_required"
        options["response_checksum_validation"] = "when_required"
        # Requests side by side (a producer's partitions, a transaction's markers) each need a connection of their own.
        options["max_pool_connections"] = MAX_POOL_CONNECTIONS
        endpoint = settings.get("endpoint_url") or None
        if endpoint and "://" not in endpoint:
            endpoint = f"https://{endpoint}"
        session = botocore.session.get_session()
        client = session.create_client(
            "s3",
            region_name=settings.get("region") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id=settings.get("access_key_id") or None,
            aws_secret_access_key=settings.get("secret_access_key") or None,
            aws_session_token=settings.get("session_token") or None,
            config=botocore.config.Config(**options),
        )
        # botocore asks for "100 Continue" before a PutObject's body: a round trip more per commit for ~1 KB.
        client.meta.events.register_last("before-sign.s3.PutObject", _no_expect_header)
        return client

    def put_if_absent(self, bucket: str, key: str, data: bytes, uri: str) -> bool:
        """PUT with `If-None-Match: *`: True if this request created the object, False if the key was taken.

        `ConditionalWriteConflict` (a KafkaStorageError) if the store answered 409;
        a lost answer, retried by botocore, may come back as False although this
        request's object landed: callers read the object to tell (S12.3).
        """
        try:
            self.client().put_object(Bucket=bucket, Key=key, Body=bytes(data), IfNoneMatch="*")
            return True
        except botocore.exceptions.ClientError as error:
            code = _code(error)
            if code & _TAKEN:
                return False
            if code & _CONFLICT:
                raise ConditionalWriteConflict(
                    f"writing {uri} raced another conditional write ({'/'.join(sorted(code))})", uri=uri
                ) from error
            if "AccessDenied" in code:
                raise AccessDenied(f"writing {uri} was refused: {' '.join(str(error).split())}", uri=uri) from error
            raise _storage_error("writing", uri, error) from error
        except botocore.exceptions.BotoCoreError as error:
            raise _storage_error("writing", uri, error) from error

    def get(self, bucket: str, key: str, uri: str) -> bytes:
        """The object's bytes in one GET; FileNotFoundError if absent."""
        plain = self._plain("GET", "GetObject", bucket, key, "reading", uri)
        if plain is not None:
            if plain[0] == 404:
                raise FileNotFoundError(uri)
            return plain[1]
        try:
            response = self.client().get_object(Bucket=bucket, Key=key)
            with response["Body"] as body:
                return body.read()
        except botocore.exceptions.ClientError as error:
            if _code(error) & _ABSENT:
                raise FileNotFoundError(uri) from None
            raise _storage_error("reading", uri, error) from error
        except botocore.exceptions.BotoCoreError as error:
            raise _storage_error("reading", uri, error) from error

    def head(self, bucket: str, key: str, uri: str) -> bool:
        """Whether the object exists, in one HEAD."""
        plain = self._plain("HEAD", "HeadObject", bucket, key, "looking up", uri)
        if plain is not None:
            return plain[0] == 200
        try:
            self.client().head_object(Bucket=bucket, Key=key)
            return True
        except botocore.exceptions.ClientError as error:
            if _code(error) & _ABSENT:
                return False
            raise _storage_error("looking up", uri, error) from error
        except botocore.exceptions.BotoCoreError as error:
            raise _storage_error("looking up", uri, error) from error

    def delete(self, bucket: str, key: str, uri: str) -> None:
        """One DELETE of the object, there or not (S3 answers 204 either way)."""
        try:
            self.client().delete_object(Bucket=bucket, Key=key)
        except botocore.exceptions.ClientError as error:
            raise _storage_error("deleting", uri, error) from error
        except botocore.exceptions.BotoCoreError as error:
            raise _storage_error("deleting", uri, error) from error

    def _plain(self, method: str, operation: str, bucket: str, key: str, doing: str, uri: str) -> tuple[int, bytes] | None:
        """A GET or HEAD answered plainly (200, or 404: absent): its status and body, else None.

        One request signed by the client's signer and sent on its connection pool, without the
        client's per-call machinery (parameter checks, endpoint rules, user agent, the parsing of
        every header; ~0.7 ms of CPU of a HEAD's 1.2). Any other answer, or a failure to get one,
        is None: the caller then makes the request through the client, with its retries,
        redirects and errors, so a HEAD or GET that fails costs one request more than it did;
        except where no retry is configured (`max_retries` 0): a failure to get an answer is
        then the storage error at once, one request as before.
        """
        try:
            client = self.client()
            request = AWSRequest(method=method, url=self._object_url(client, bucket) + quote(key, safe="/~"))
            client._request_signer.sign(operation, request)
            response = client._endpoint.http_session.send(request.prepare())
            body = response.content
        except botocore.exceptions.BotoCoreError as error:
            if self._attempts() <= 1:
                raise _storage_error(doing, uri, error) from error
            logger.debug("a plain %s of s3://%s/%s failed (%s); asking through the client", method, bucket, key, error)
            return None
        except Exception as error:  # noqa: BLE001 - the client's own request follows, and says what fails
            logger.debug("a plain %s of s3://%s/%s failed (%s); asking through the client", method, bucket, key, error)
            return None
        return (response.status_code, body) if response.status_code in (200, 404) else None

    def _attempts(self) -> int:
        """Requests per call the settings allow: `max_retries` + 1 (3 unless set)."""
        return int(self.settings["max_retries"]) + 1 if self.settings.get("max_retries") else 3

    def _object_url(self, client: Any, bucket: str) -> str:
        """The URL of the bucket's objects up to the key, as the client addresses them (resolved once per bucket)."""
        found = self._object_urls.get(bucket)
        if found is None or found[0] is not client:
            url = client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": _KEY}).split("?", 1)[0]
            if not url.endswith("/" + _KEY):
                raise ValueError(f"cannot tell where the key goes in {url}")
            found = self._object_urls[bucket] = (client, url[: -len(_KEY)])
        return found[1]


def _no_expect_header(request: Any, **_: Any) -> None:
    if "Expect" in request.headers:
        del request.headers["Expect"]


def _code(error: botocore.exceptions.ClientError) -> set[str]:
    """The error's code and HTTP status, to test against the sets above."""
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = str(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return {code, status}


def _storage_error(doing: str, uri: str, error: Exception) -> KafkaStorageError:
    text = " ".join(str(error).split())
    cause = getattr(error, "kwargs", {}).get("error")  # a connection error's own (e.g. "Connection refused")
    if cause is not None:
        text += f" ({' '.join(str(cause).split())})"
    return KafkaStorageError(f"{doing} {uri} failed: {text}", uri=uri)


__all__ = ["AccessDenied", "ConditionalWriteConflict", "S3Requests"]
