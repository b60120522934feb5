"""A gated topic's rows of one unit, kept batch by batch in the columns its suite validates (S11.1).

Every gate (the transactional Producer, the batch writer behind `lakelog load`,
LakelogLoadOperator and Spark writes) sees a unit's rows go by batch by batch
and judges them all at once before its commit decision: table expectations
(a row count, "key unique within the load") are over the whole unit. Holding
every payload until then would hold the whole unit's bytes; StagedRows keeps
only what the suite reads:

- the Kafka-source columns it names (`key`, `timestamp`, `headers`, `topic`,
  `value` itself), plus `partition` and `offset` (the offsets of unexpected
  values; a dead-letter topic's rows, held back unwritten until the verdict,
  have none);
- its `value.<field>` columns, parsed from each batch's JSON values as the
  batch goes by (Arrow's JSON reader; see validate.json_field_columns) and
  merged at the end with the types the reader gives a whole unit.

A suite with a parse function gets every column (its function sees the rows).
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from lakelog.log.records import PAYLOAD_SCHEMA
from lakelog.quality.fields import FieldColumns, json_field_columns, merge_field_columns, suite_columns, value_field_names
from lakelog.quality.gate import DEAD_LETTER, Verdict, judge
from lakelog.quality.results import OffsetRange
from lakelog.quality.suites import Suite

logger = logging.getLogger(__name__)


class StagedRows:
    """One gated topic's rows of one unit: `add` each batch as it is written or held, `judge` them at the end."""

    def __init__(self, suite: Suite, topic: str) -> None:
        self.suite = suite
        self.topic = topic
        self._fields = value_field_names(suite)
        named = set(suite_columns(suite))
        self._payload_columns = [name for name in PAYLOAD_SCHEMA.names if suite.parse or name in named]
        self._with_topic = bool(suite.parse) or "topic" in named
        # A dead-letter topic's rows are held back unwritten until the verdict: they have no offsets to validate.
        self._with_offsets = suite.mode != DEAD_LETTER
        self._tables: list[pa.Table] = []
        self._field_parts: list[FieldColumns] = []
        self._ranges: dict[int, tuple[int, int]] = {}

    def __len__(self) -> int:
        return sum(table.num_rows for table in self._tables)

    def add(self, payload: pa.Table, partition: int, base_offset: int | None = None) -> None:
        """Keep a batch (payload columns) written to `partition` at `base_offset`, or held back unwritten (None)."""
        self._tables.append(self._kept(payload, partition, base_offset))
        if base_offset is not None and payload.num_rows:
            self.landed(partition, base_offset, base_offset + payload.num_rows - 1)
        if self._fields:
            self._field_parts.append(json_field_columns(payload.column("value"), self._fields))

    def landed(self, partition: int, first_offset: int, last_offset: int) -> None:
        """Record that rows of this unit sit at first_offset..last_offset of `partition` (for the result row)."""
        first = self._ranges.get(partition, (first_offset, last_offset))[0]
        self._ranges[partition] = (first, last_offset)

    def offset_ranges(self) -> list[OffsetRange]:
        """Where this unit's written rows sit, per partition (first and last offset)."""
        return [OffsetRange(partition, first, last) for partition, (first, last) in sorted(self._ranges.items())]

    def rows(self) -> pa.Table:
        """The kept columns of every row of the unit, in the order they were added."""
        return pa.concat_tables(self._tables) if self._tables else self._kept(PAYLOAD_SCHEMA.empty_table(), 0, 0)

    def value_fields(self) -> FieldColumns | None:
        """The `value.<field>` columns the suite names, of every row (None when it names none)."""
        return merge_field_columns(self._field_parts, self._fields) if self._fields else None

    def judge(self) -> Verdict:
        """The suite's verdict on the whole unit, under a new validation id (GX is imported on the first one)."""
        logger.debug(
            "judging %d rows of %s kept in %d batches (columns %s; fields %s)",
            len(self),
            self.topic,
            len(self._tables),
            ", ".join(self._payload_columns) or "none",
            ", ".join(self._fields) or "none",
        )
        return judge(self.suite, self.topic, self.rows(), self.value_fields())

    def _kept(self, payload: pa.Table, partition: int, base_offset: int | None) -> pa.Table:
        count = payload.num_rows
        columns: dict[str, Any] = {name: payload.column(name) for name in self._payload_columns}
        if self._with_topic:
            columns["topic"] = pa.repeat(pa.scalar(self.topic, pa.string()), count)
        columns["partition"] = pa.repeat(pa.scalar(partition, pa.int32()), count)
        if self._with_offsets:
            columns["offset"] = (
                pa.nulls(count, pa.int64()) if base_offset is None else pa.arange(base_offset, base_offset + count)
            )
        return pa.table(columns)


__all__ = ["StagedRows"]
