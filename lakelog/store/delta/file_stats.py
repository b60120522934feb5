"""Delta file statistics (`add.stats`) for lakelog's commits: record count, null counts, min/max of integer columns.

Written from the rows in hand (`file_statistics`) or from a Parquet footer
(`footer_statistics`, for files written elsewhere and committed as they are).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)


def footer_statistics(metadata: pq.FileMetaData) -> str:
    """Delta file statistics from a Parquet footer: record count, null counts, min/max of integer columns."""
    minimums: dict[str, int] = {}
    maximums: dict[str, int] = {}
    nulls: dict[str, int] = {}
    schema = metadata.schema.to_arrow_schema()
    leaves = {metadata.schema.column(index).path: index for index in range(metadata.num_columns)}
    for field in schema:
        if pa.types.is_nested(field.type):
            continue
        column_nulls, low, high, complete = 0, None, None, True
        for group in range(metadata.num_row_groups):
            column = metadata.row_group(group).column(leaves[field.name])
            stats = column.statistics
            if stats is None or not stats.has_null_count:
                complete = False
                break
            column_nulls += stats.null_count
            if pa.types.is_integer(field.type) and stats.has_min_max:
                low = stats.min if low is None else min(low, stats.min)
                high = stats.max if high is None else max(high, stats.max)
        if not complete:
            continue
        nulls[field.name] = column_nulls
        if low is not None and high is not None:  # set together
            minimums[field.name], maximums[field.name] = int(low), int(high)
    return json.dumps({"numRecords": metadata.num_rows, "minValues": minimums, "maxValues": maximums, "nullCount": nulls})


def file_statistics(data: pa.Table, claimed: Mapping[str, tuple[int, int]] | None = None) -> str:
    """Delta file statistics: record count, null counts, and min/max of integer columns (for pruning).

    With `claimed={column: (low, high)}` the min/max of each such column are that
    range, not the rows' own (which must lie inside it): a file may claim a wider
    range than its rows hold (the log's key-compacted files keep the offsets of
    the files they replace). Wider bounds are conservative for data skipping.
    """
    minimums: dict[str, int] = {}
    maximums: dict[str, int] = {}
    nulls: dict[str, int] = {}
    for field, column in zip(data.schema, data.columns, strict=True):
        if pa.types.is_nested(field.type):
            continue
        nulls[field.name] = column.null_count
        if pa.types.is_integer(field.type) and column.null_count < len(column):
            bounds = pc.min_max(column)
            minimums[field.name] = bounds["min"].as_py()
            maximums[field.name] = bounds["max"].as_py()
    for name, (low, high) in (claimed or {}).items():
        if low > high:
            raise ValueError(f"{name} range {low}-{high} is empty")
        if name in minimums and (minimums[name] < low or maximums[name] > high):
            raise ValueError(f"rows with {name} {minimums[name]}-{maximums[name]} are outside the range {low}-{high}")
        minimums[name], maximums[name] = low, high
    return json.dumps({"numRecords": data.num_rows, "minValues": minimums, "maxValues": maximums, "nullCount": nulls})


__all__ = ["file_statistics", "footer_statistics"]
