"""The quality gate of a batch write (issue 13; S11.1-S11.3): a unit's rows of gated topics, judged before its commit.

TransactionalBatchWriter (and so `lakelog load`, LakelogLoadOperator and
`df.write.format("lakelog")`) streams a unit's rows into one transaction. For
each topic with a suite this keeps the rows in hand as they go by, never
re-reading a partition:

- `enforce` and `warn` topics: each payload is appended at once and kept here
  with its partition and offsets;
- `dead-letter` topics: each payload is held back, not appended, until the
  verdict says where it goes (the topic, or `<topic>.dlq`).

When the stream ends, `judge` validates each gated topic's rows all at once
(table expectations such as a row count or "key unique within the load" see
the whole unit). The writer then acts on the verdicts before it records its
batch and commits (see TransactionalBatchWriter.write_stream).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from lakelog.log.records import PAYLOAD_SCHEMA
from lakelog.quality.gate import Verdict, gated_suites, judge
from lakelog.quality.results import OffsetRange

logger = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class HeldPayload:
    """A dead-letter topic's payload, not appended yet: it goes to its partition or to the DLQ's."""

    partition: int
    payload: pa.Table


class BatchGate:
    """The gated topics of one batch and their rows so far; ungated topics pass through untouched (no GX import)."""

    def __init__(self, root: str, topics: Iterable[str]) -> None:
        self.suites = gated_suites(root, sorted(set(topics)))
        self._rows: dict[str, list[pa.Table]] = {topic: [] for topic in self.suites}
        self._ranges: dict[str, dict[int, tuple[int, int]]] = {topic: {} for topic in self.suites}
        self._held: dict[str, list[HeldPayload]] = {topic: [] for topic in self.suites}

    def __bool__(self) -> bool:
        return bool(self.suites)

    def holds_back(self, topic: str) -> bool:
        """True for a dead-letter topic: its rows wait for the verdict before they are appended anywhere."""
        suite = self.suites.get(topic)
        return suite is not None and suite.mode == "dead-letter"

    def hold(self, tp: TopicPartitionKey, payload: pa.Table) -> None:
        topic, partition = tp
        self._held[topic].append(HeldPayload(partition, payload))
        self._rows[topic].append(_source_rows(payload, topic, partition, None))

    def appended(self, tp: TopicPartitionKey, payload: pa.Table, base_offset: int, last_offset: int) -> None:
        """Keep a payload of a gated enforce/warn topic that landed at base_offset..last_offset."""
        topic, partition = tp
        if topic not in self.suites:
            return
        self._rows[topic].append(_source_rows(payload, topic, partition, base_offset))
        first = self._ranges[topic].get(partition, (base_offset, last_offset))[0]
        self._ranges[topic][partition] = (first, last_offset)

    def judge(self) -> list[Verdict]:
        """Each gated topic's whole unit of rows validated at once, in topic order."""
        verdicts = []
        for topic, suite in sorted(self.suites.items()):
            chunks = self._rows[topic]
            rows = pa.concat_tables(chunks) if chunks else _source_rows(PAYLOAD_SCHEMA.empty_table(), topic, 0, 0)
            verdicts.append(judge(suite, topic, rows))
        return verdicts

    def held(self, topic: str) -> list[HeldPayload]:
        return self._held.get(topic, [])

    def offset_ranges(self, topic: str) -> list[OffsetRange]:
        """Where the topic's appended rows of this unit sit, per partition (first and last offset)."""
        return [OffsetRange(partition, first, last) for partition, (first, last) in sorted(self._ranges[topic].items())]

    def landed(self, topic: str, partition: int, base_offset: int, last_offset: int) -> None:
        """Record where a held payload landed (in the topic or its DLQ), for the result row's offset ranges."""
        first = self._ranges[topic].get(partition, (base_offset, last_offset))[0]
        self._ranges[topic][partition] = (first, last_offset)


def _source_rows(payload: pa.Table, topic: str, partition: int, base_offset: int | None) -> pa.Table:
    """A payload in the Kafka source's columns the gate can know before the commit (offsets once appended)."""
    count = payload.num_rows
    rows = payload.append_column("topic", pa.repeat(pa.scalar(topic, pa.string()), count))
    rows = rows.append_column("partition", pa.repeat(pa.scalar(partition, pa.int32()), count))
    if base_offset is not None:
        rows = rows.append_column("offset", pa.arange(base_offset, base_offset + count))
    return rows


__all__ = ["BatchGate", "HeldPayload"]
