"""The quality gate of a batch write (S11.1-S11.3): a unit's rows of gated topics, judged before its commit.

TransactionalBatchWriter (and so `lakelog load`, LakelogLoadOperator and
`df.write.format("lakelog")`) streams a unit's rows into one transaction. For
each topic with a suite this keeps the rows in hand as they go by (the
suite's columns, StagedRows), never re-reading a partition:

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

from lakelog.quality.gate import Verdict, gated_suites
from lakelog.quality.results import OffsetRange
from lakelog.quality.staged import StagedRows
from lakelog.store import Location
from lakelog.typedef import TopicPartitionKey

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeldPayload:
    """A dead-letter topic's payload, not appended yet: it goes to its partition or to the DLQ's."""

    partition: int
    payload: pa.Table


class BatchGate:
    """The gated topics of one batch and their rows so far; ungated topics pass through untouched (no GX import)."""

    def __init__(self, root: str | Location, topics: Iterable[str]) -> None:
        self.suites = gated_suites(root, sorted(set(topics)))
        self._staged = {topic: StagedRows(suite, topic) for topic, suite in self.suites.items()}
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
        self._staged[topic].add(payload, partition)

    def appended(self, tp: TopicPartitionKey, payload: pa.Table, base_offset: int, last_offset: int) -> None:
        """Keep the suite's columns of a payload of a gated enforce/warn topic that landed at base_offset.."""
        staged = self._staged.get(tp[0])
        if staged is not None:
            staged.add(payload, tp[1], base_offset)

    def judge(self) -> list[Verdict]:
        """Each gated topic's whole unit of rows validated at once, in topic order."""
        return [self._staged[topic].judge() for topic in sorted(self._staged)]

    def held(self, topic: str) -> list[HeldPayload]:
        return self._held.get(topic, [])

    def offset_ranges(self, topic: str) -> list[OffsetRange]:
        """Where the topic's appended rows of this unit sit, per partition (first and last offset)."""
        return self._staged[topic].offset_ranges()

    def landed(self, topic: str, partition: int, base_offset: int, last_offset: int) -> None:
        """Record where a held payload landed (in the topic or its DLQ), for the result row's offset ranges."""
        self._staged[topic].landed(partition, base_offset, last_offset)


__all__ = ["BatchGate", "HeldPayload"]
