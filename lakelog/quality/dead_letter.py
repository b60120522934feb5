"""Dead letters (S11.3): a gated topic's `<topic>.dlq`, made like its topic, and the header that names the validation."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from lakelog.errors import TopicAlreadyExists
from lakelog.log import create_topic, topic_config
from lakelog.log.records import HEADER_TYPE
from lakelog.store import Location, check_root

logger = logging.getLogger(__name__)

DLQ_SUFFIX = ".dlq"
DLQ_HEADER = "lakelog.quality.validation_id"


def dlq_topic(topic: str) -> str:
    """The dead-letter topic of `topic`: `<topic>.dlq`."""
    return topic + DLQ_SUFFIX


def ensure_dlq_topic(root: str | Location, topic: str) -> None:
    """Create `<topic>.dlq` with the topic's partition count and config if it is absent; idempotent.

    UnknownTopicOrPartition if `topic` does not exist.
    """
    root = check_root(root)
    config = topic_config(root, topic)
    name = dlq_topic(topic)
    overrides = {key: value for key, value in config.values.items() if key != "num.partitions"}
    try:
        create_topic(root, name, config.num_partitions, overrides)
    except TopicAlreadyExists:
        return
    logger.info("created dead-letter topic %s for the quality suite of %s", name, topic)


def with_dlq_header(payload: pa.Table, validation_id: str) -> pa.Table:
    """`payload` (payload columns) with the header DLQ_HEADER = `validation_id` added to every record."""
    index = payload.schema.get_field_index("headers")
    added = {"key": DLQ_HEADER, "value": validation_id.encode()}
    headers: list[Any] = [[*(item or []), added] for item in payload.column(index).to_pylist()]
    return payload.set_column(index, payload.schema.field(index), pa.array(headers, HEADER_TYPE))


__all__ = ["DLQ_HEADER", "DLQ_SUFFIX", "dlq_topic", "ensure_dlq_topic", "with_dlq_header"]
