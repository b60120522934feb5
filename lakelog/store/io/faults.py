"""The typed faults every object store's requests raise, whatever the store (S3, Azure, GCS): the conditional
create's refusal as racing another write, and valid credentials that may not write under a prefix. Both are
KafkaStorageError; a missing object is FileNotFoundError, anything else that failed KafkaStorageError."""

from __future__ import annotations

from lakelog.errors import KafkaStorageError


class ConditionalWriteConflict(KafkaStorageError):
    """A conditional create the store refused as racing another one: its outcome is the log's to tell."""


class AccessDenied(KafkaStorageError):
    """The store answered 403: valid credentials that may not make this request under this prefix."""


__all__ = ["AccessDenied", "ConditionalWriteConflict"]
