"""How a table's failures reach its callers: an outage as KafkaStorageError (retriable), damage as CorruptRecord (not).

A failure to reach the bytes (OSError, a pyarrow I/O error) may pass; bytes no lakelog writer put there (a damaged
log: DamagedLog, MalformedCommit) will not, so retrying them would loop forever.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyarrow as pa

from lakelog.errors import CorruptRecord, KafkaException, KafkaStorageError
from lakelog.store.delta.actions import MalformedCommit
from lakelog.store.delta.log import TableNotFoundError
from lakelog.store.delta.snapshot import DamagedLog, SnapshotError
from lakelog.store.io.fileio import one_line


def is_decoding_error(error: BaseException | None) -> bool:
    """A pyarrow error about the bytes of a file (not about reaching it)."""
    if error is None or isinstance(error, FileNotFoundError):
        return False
    if isinstance(error, pa.ArrowInvalid):
        return True
    text = str(error)
    # A flipped byte inside a page fails in the codec or the decoder, as an OSError ("Corrupt snappy compressed data",
    # "Unexpected end of stream"); one in a page header or the footer's schema, as the reader's own complaint about
    # the file ("Invalid page header", "Dictionary page must be before data page", "Malformed schema", a logical
    # type's parameters, an encoding the file cannot have). tests/unit/test_decoding_errors.py flips every byte of a
    # file as lakelog writes and reads it.
    words = (
        "Parquet",
        "parquet",
        "magic bytes",
        "footer",
        "Couldn't deserialize",
        "compressed data",
        "ecompress",
        "end of stream",
        "page header",
        "Dictionary page",
        "orrupt",
        "Malformed",
        "ogical type",
        "Bit width",
        "TimeUnit",
        "encoding",
    )
    return any(word in text for word in words)


@contextlib.contextmanager
def storage_errors(uri: str, doing: str, version: int | None = None) -> Iterator[None]:
    """Turn a pyarrow or OS failure into KafkaStorageError naming the table and version; a damaged log into CorruptRecord."""
    try:
        yield
    except (KafkaException, TableNotFoundError):
        raise
    except (DamagedLog, MalformedCommit) as error:
        # Bytes no lakelog writer put there: permanent, not an outage (not retriable).
        at = f" at version {version}" if version is not None else ""
        raise CorruptRecord(f"the log of {uri}{at} is damaged: {one_line(error)}", uri=uri, version=version) from error
    except (OSError, pa.ArrowException, SnapshotError) as error:
        at = f" at version {version}" if version is not None else ""
        raise KafkaStorageError(f"{doing} {uri}{at} failed: {one_line(error)}", uri=uri, version=version) from error


__all__ = ["is_decoding_error", "storage_errors"]
