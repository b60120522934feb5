"""Spark writes a view refresh's rows: the `ViewFiles` of lakelog.jobs.views, which plans, gates and commits them.

How depends on the root (`reads_natively`). On a local root Spark reads the
rows (through Delta's reader at the planned versions where the session has it,
frames.py) and writes with its own writer into the refresh's staging folder,
from which the refresh moves the files into the table folder. On an S3 root
each Spark task writes its rows as one Parquet file straight into the table
folder through lakelog's file IO (one PUT, so a file is whole or absent),
returning its name and row count. The rows come from Delta's reader through
S3A where the session has it (`reads_through_delta`), else each task reads its
piece of the plan through lakelog's file IO.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from lakelog import catalog
from lakelog.log.scan import PartitionScan
from lakelog.store import Location
from pyspark_lakelog.delta_reads import reads_through_delta
from pyspark_lakelog.frames import reads_natively, scan_dataframe
from pyspark_lakelog.options import DEFAULT_PARTITION_BYTES
from pyspark_lakelog.source import scan_tasks


class SparkViewFiles:
    """A view refresh's rows written by the Spark session `spark` (lakelog.jobs.views.ViewFiles)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def stages(self, view: Location) -> bool:
        """Spark's own writer, through a staging folder, on roots its Parquet reader reads (local ones)."""
        return reads_natively(view)

    def write_staged(self, scans: list[PartitionScan], staging: Location) -> None:
        """Spark's Parquet reader and writer: the plan's rows as part files in the staging folder."""
        with _timestamps_as_micros(self.spark):
            scan_dataframe(self.spark, scans).write.mode("errorifexists").parquet(staging.uri)

    def write_in_place(self, view: Location, scans: list[PartitionScan], run: str) -> dict[str, int]:
        """The plan's rows as Parquet files in the table folder, each written by a Spark task through the file IO."""
        if not reads_through_delta(self.spark, view):
            return self._write_through_file_io(view, scans, run)

        def write(batches: Iterable[Any]) -> Iterator[Any]:  # one Spark task: its rows, one file, one PUT
            import pyarrow as pa
            import pyarrow.parquet as pq

            name = f"part-{run}-{uuid.uuid4().hex[:16]}.parquet"
            sink = pa.BufferOutputStream()
            rows = 0
            with pq.ParquetWriter(sink, catalog.VIEW_SCHEMA, compression="snappy") as writer:
                for batch in batches:
                    writer.write_table(pa.Table.from_batches([batch]).cast(catalog.VIEW_SCHEMA))
                    rows += batch.num_rows
            if rows:
                view.io.write((view / name).uri, sink.getvalue())
            yield pa.RecordBatch.from_pydict({"name": [name], "rows": [rows]})

        results = scan_dataframe(self.spark, scans).mapInArrow(write, "name string, rows long").collect()
        return {row["name"]: row["rows"] for row in results if row["rows"]}

    def _write_through_file_io(self, view: Location, scans: list[PartitionScan], run: str) -> dict[str, int]:
        """Spark tasks read the plan's pieces through the file IO and write one file each into the table: {name: rows}.

        Small partitions share a task (source.scan_tasks), so they share a file too."""
        pieces = scan_tasks(scans, DEFAULT_PARTITION_BYTES)  # empty ranges dropped; none left: one task, no file
        tasks = [(view, f"part-{run}-{index:05d}.parquet", piece) for index, piece in enumerate(pieces)]
        results = self.spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(_write_piece).collect()
        return {name: rows for name, rows in results if rows}


def _write_piece(task: tuple[Location, str, tuple[PartitionScan, ...]]) -> tuple[str, int]:
    """One task's read_committed rows (its pieces in turn) as one Parquet file `name` in the view folder (runs in a
    Spark task)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    view, name, pieces = task
    sink = pa.BufferOutputStream()
    rows = 0
    with pq.ParquetWriter(sink, catalog.VIEW_SCHEMA, compression="snappy") as writer:
        for piece in pieces:
            for table in piece.read_kafka_rows():
                writer.write_table(table.cast(catalog.VIEW_SCHEMA))
                rows += table.num_rows
    if rows:
        # One PUT of the whole file: a task killed midway leaves nothing, or a whole file in no commit.
        view.io.write((view / name).uri, sink.getvalue())
    return name, rows


@contextmanager
def _timestamps_as_micros(spark: Any) -> Iterator[None]:
    """Spark writes INT96 timestamps by default; the view's schema (and delta-rs, DuckDB) want microseconds."""
    key = "spark.sql.parquet.outputTimestampType"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
