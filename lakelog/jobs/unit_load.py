"""Load one unit of source files into a topic exactly once, however often it is run (S2.4, S4.1, S4.2).

A unit is named by the data it covers (for Airflow: the DAG, task, map index and
the run's partition key or data interval), never by the attempt. Its rows are
spread over the topic's partitions as the Producer spreads them and written as
one transaction of the transactional id `lakelog.load.<unit>`, whose last
record in `__sink_batches` commits with the rows (TransactionalBatchWriter,
batch 0). So:

- a repeat of a loaded unit (a retry after success, a cleared task, a backfill
  that re-runs completed dates) finds the unit's committed record before it
  fences anyone, appends nothing, and reports where the rows landed;
- an attempt that died halfway left an open transaction, which the next
  attempt's `init_producer_id` aborts (S4.2) before writing the unit again;
- an attempt paused and resumed after another one fenced it is refused at its
  next append or at its commit (S4.1), and one paused before it began finds
  the unit loaded;
- different units are different transactional ids: any order, any overlap.
- a unit's record lives as long as its rows (S9.4): once retention or
  delete-records removed them all, the sweep tombstones the record and the
  unit loads again (lakelog.jobs.sink_records).

Nothing here rests on timing: the only decision, "is the unit committed?", is
read from the tables, and the commit that answers it is the one that writes
the rows.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa
import pyarrow.csv as pacsv
from tqdm import tqdm

from lakelog.errors import InvalidRequest, PurgeQueue
from lakelog.jobs.batch_writer import TransactionalBatchWriter
from lakelog.jobs.load import count_rows, open_source, source_format, source_payloads, spread_by_key
from lakelog.log import topic_config
from lakelog.store import Location, open_root

logger = logging.getLogger(__name__)

UNIT_ID_PREFIX = "lakelog.load."
# The batch id of a unit's one transaction in __sink_batches.
UNIT_BATCH = 0


@dataclass(frozen=True)
class UnitLoadResult:
    """Where a unit's rows are: `loaded` is True if this call appended them, False if an earlier one had."""

    topic: str
    unit: str
    loaded: bool
    rows: int
    offsets: Mapping[int, tuple[int, int]]
    files: list[str] = field(default_factory=list)
    transactional_id: str = ""
    # Rows a dead-letter suite sent to `<topic>.dlq` instead (S11.3), and the validation ids this load recorded.
    dead_lettered: int = 0
    validations: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The operator's XCom: JSON-safe (partitions as text keys, as JSON makes them anyway)."""
        return {
            "topic": self.topic,
            "unit": self.unit,
            "loaded": self.loaded,
            "rows": self.rows,
            "offsets": {str(partition): list(span) for partition, span in sorted(self.offsets.items())},
        }

    def describe(self) -> str:
        where = ", ".join(f"{self.topic}-{p} [{first}, {last}]" for p, (first, last) in sorted(self.offsets.items()))
        dead = f"; {self.dead_lettered} rows dead-lettered to {self.topic}.dlq" if self.dead_lettered else ""
        return f"{self.rows} rows at {where or 'no offsets'}{dead}"


def unit_transactional_id(unit: str) -> str:
    return UNIT_ID_PREFIX + unit


def resolve_sources(root: Location, source: str | list[str]) -> list[Location]:
    """Every file a path, glob or list of them names: local or on the root's store. InvalidRequest if none."""
    patterns = [source] if isinstance(source, str) else list(source)
    if not patterns or not all(isinstance(pattern, str) and pattern.strip() for pattern in patterns):
        raise InvalidRequest(f"source must be a path or glob (or a list of them), not {source!r}")
    found: dict[str, Location] = {}
    for pattern in patterns:
        base = Location.of(pattern, root.io.settings if not root.is_local else None, what="source")
        # cast: FileIO.glob's annotation names its own list() method, not the builtin (fileio.py is being rewritten).
        matches = cast(list[str], base.io.glob(base.uri))
        if not matches:
            raise InvalidRequest(f"source {pattern} matches no file")
        for uri in matches:
            found.setdefault(uri, Location(uri, base.io))
    return [found[uri] for uri in sorted(found)]


def load_unit(
    root: str | Location,
    topic: str,
    source: str | list[str],
    unit: str,
    *,
    key_column: str | None = None,
    format: str | None = None,
    batch_records: int = 10_000,
    storage_options: Mapping[str, Any] | None = None,
    producer_config: Mapping[str, Any] | None = None,
    should_stop: Callable[[], bool] | None = None,
    progress: bool = False,
) -> UnitLoadResult:
    """Load every row of `source` (Parquet, CSV or JSON lines files) into `topic` as unit `unit`, exactly once.

    Raises InvalidRequest for bad input (no file matches, an unknown or wrong
    format, a missing key column), UnknownTopicOrPartition for a missing topic,
    each before anything is written; ProducerFenced if a newer attempt of the
    same unit fenced this one; PurgeQueue if `should_stop()` turned true.
    """
    if not isinstance(unit, str) or not unit.strip():
        raise InvalidRequest(f"unit must be a non-empty string, not {unit!r}")
    if not isinstance(batch_records, int) or isinstance(batch_records, bool) or batch_records < 1:
        raise InvalidRequest(f"batch_records must be a positive integer, not {batch_records!r}")
    location = open_root(root, storage_options)
    partitions = topic_config(location, topic).num_partitions
    transactional_id = unit_transactional_id(unit)
    writer = TransactionalBatchWriter(location, transactional_id, producer_config=producer_config)
    files = resolve_sources(location, source)
    kinds = [(path, source_format(path, format)) for path in files]
    for path, kind in kinds:
        _probe(path, kind, key_column)
    names = [path.uri for path in files]

    def rows() -> Iterator[tuple[tuple[str, int], pa.Table]]:
        total = sum(count_rows(path, kind) for path, kind in kinds) if progress else None
        with tqdm(total=total, unit="rec", unit_scale=True, disable=not progress, desc=f"load {unit} -> {topic}") as bar:
            for path, kind in kinds:
                logger.info("loading %s (%s) into %s for unit %s", path.uri, kind, topic, unit)
                try:
                    for payload in source_payloads(path, kind, key_column, batch_records):
                        if should_stop is not None and should_stop():
                            raise PurgeQueue(f"the load of unit {unit} was stopped; its transaction is aborted")
                        for partition, part in spread_by_key(payload, partitions, writer.config["partitioner"]):
                            yield (topic, partition), part
                        bar.update(payload.num_rows)
                except (pa.ArrowException, UnicodeDecodeError) as error:
                    raise InvalidRequest(f"source {path.name} cannot be read as {kind}: {error}") from error

    note = {"unit": unit, "topic": topic, "files": names}
    # A gated topic's unit is judged whole before its commit (S11.1-S11.3): PolicyViolation on an enforce failure,
    # the unit not committed, so a retry validates again; the result row names the unit.
    result = writer.write_stream([(topic, p) for p in range(partitions)], rows(), UNIT_BATCH, note=note, unit=unit)
    offsets = {partition: span for (name, partition), span in result.offsets.items() if name == topic}
    rows_written = sum(count for (name, _), count in result.records.items() if name == topic)
    if result.skipped:
        found = UnitLoadResult(topic, unit, False, rows_written, offsets, list(result.note.get("files", [])), transactional_id)
        logger.warning("unit %s was loaded before: %s; this attempt appends nothing", unit, found.describe())
        return found
    dead_lettered = sum(count for (name, _), count in result.records.items() if name != topic)
    loaded = UnitLoadResult(
        topic, unit, True, rows_written, offsets, names, transactional_id, dead_lettered, dict(result.validations)
    )
    logger.info(
        "unit %s loaded: %s (producer id %s, epoch %s)", unit, loaded.describe(), result.producer_id, result.producer_epoch
    )
    return loaded


def _probe(path: Location, kind: str, key_column: str | None) -> None:
    """Read the head of a source file: a file of another format or without the key column fails here, before any write."""
    try:
        if kind == "parquet":
            names = path.io.parquet_metadata(path.uri).schema.to_arrow_schema().names
        elif kind == "csv":
            with path.io.open_input(path.uri) as handle:
                names = pacsv.open_csv(handle).schema.names
        else:
            with open_source(path) as handle:
                first = next((line for line in handle if line.strip()), b"")
            record = json.loads(first) if first else {}
            if not isinstance(record, dict):
                raise ValueError("a line is not a JSON object")
            names = None  # JSON lines may omit the key: such a row gets a null key
    except (pa.ArrowException, UnicodeDecodeError, ValueError, OSError) as error:
        raise InvalidRequest(f"source {path.name} cannot be read as {kind}: {error}") from error
    if key_column is not None and names is not None and key_column not in names:
        raise InvalidRequest(f"key column {key_column!r} is not a column of {path.name}")


__all__ = ["UnitLoadResult", "load_unit", "resolve_sources", "unit_transactional_id"]
