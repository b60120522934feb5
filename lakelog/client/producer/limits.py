"""What a produced message may be: a timestamp the log can hold, a size within message.max.bytes and the topic's
max.message.bytes. A message past a limit fails alone: at produce() (the producer's own limits, as librdkafka
refuses it there) or in its own delivery report (the topic's, as a broker answers), and nothing of it is written.
"""

from __future__ import annotations

from typing import Any

from lakelog.client.producer.accumulator import Batch, Pending
from lakelog.client.types import Headers
from lakelog.errors import InvalidArgument, InvalidType, KafkaError, MsgSizeTooLarge
from lakelog.log.records import MAX_TIMESTAMP_MS


def check_timestamp(timestamp: Any) -> int:
    """A produce() timestamp (milliseconds, 0: now): InvalidType if no int, InvalidArgument past what the log holds.

    The log keeps microseconds in an int64, so a timestamp past MAX_TIMESTAMP_MS would read back as another
    instant; Kafka's producer refuses a negative one, as lakelog does."""
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise InvalidType(f"timestamp must be an integer of milliseconds, not {timestamp!r}")
    if timestamp < 0:
        raise InvalidArgument(f"timestamp must not be negative, not {timestamp}")
    if timestamp > MAX_TIMESTAMP_MS:
        raise InvalidArgument(f"timestamp {timestamp} ms is past {MAX_TIMESTAMP_MS}, the latest the log can hold")
    return int(timestamp)


def check_expected_offset(expected_offset: Any) -> None:
    """KIP-27's expected offset of a produce(): InvalidType if no int, InvalidArgument if negative."""
    if not isinstance(expected_offset, int) or isinstance(expected_offset, bool):
        raise InvalidType(f"expected_offset must be an integer, not {expected_offset!r}")
    if expected_offset < 0:
        raise InvalidArgument(f"expected_offset must not be negative, not {expected_offset}")


def headers_size(headers: Headers) -> int:
    """The bytes headers add to a record's size: each name (UTF-8) and value (lakelog.log.records.record_sizes)."""
    return sum(len(name.encode()) + (0 if value is None else len(value)) for name, value in headers)


def message_size(message: Pending) -> int:
    """A queued message's size as max.message.bytes counts it: key, value and headers."""
    key, value, headers, _, _ = message
    size = (0 if key is None else len(key)) + (0 if value is None else len(value))
    return size if headers is None else size + headers_size(headers)


def too_large(size: int, max_bytes: int) -> MsgSizeTooLarge:
    """The producer's refusal of a message past its message.max.bytes, raised by produce()."""
    return MsgSizeTooLarge(
        f"message of {size} bytes (key, value and headers) exceeds message.max.bytes {max_bytes}", size=size, max_bytes=max_bytes
    )


def split_oversized(batch: Batch, max_bytes: int) -> list[Batch | tuple[Pending, KafkaError]]:
    """A batch holding a message past the topic's max.message.bytes, in order: the runs of messages the topic takes,
    each a batch of its own (its expected offset moved to its first message's), and each message it refuses with
    its MSG_SIZE_TOO_LARGE error, so the other messages are delivered and the large one fails alone.

    A run after a refused message that asked for an expected offset still asks for its own (KIP-27): the log, one
    record short of it, then refuses that run with OFFSET_MISMATCH rather than land it elsewhere."""
    parts: list[Batch | tuple[Pending, KafkaError]] = []
    run: list[Pending] = []
    where = f"{batch.topic}-{batch.partition}"

    def close_run(end: int) -> None:
        if run:
            expected = None if batch.expected_offset is None else batch.expected_offset + end - len(run)
            parts.append(Batch(batch.topic, batch.partition, batch.created_ms, expected, list(run), 0))
            run.clear()

    for index, message in enumerate(batch.messages):
        size = message_size(message)
        if size <= max_bytes:
            run.append(message)
            continue
        close_run(index)
        text = f"{where}: a record of {size} bytes is more than the topic's max.message.bytes {max_bytes}"
        parts.append((message, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, text)))
    close_run(len(batch.messages))
    return parts
