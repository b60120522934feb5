"""The data files of a partition table's state: each present with the size, rows and offsets its add says.

The cheap pass looks up every active file (size) and reads its Parquet footer (row count, offset min/max),
checks that the files' offset ranges tile [log start, LEO) (S1.3, S9.1; a key-compacted file claims the whole
range it replaced, S9.3), then reads the header columns of each file in offset order: offsets inside the file's
claimed range, ascending, dense unless compacted; producer epochs never going back per producer id; and the
transaction fold (lakelog.log.transactions) that gives the open transactions and the LSO (S5.1). With `deep`
every column of every row is read with the page checksums verified.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import KafkaException
from lakelog.jobs.verify import findings as kinds
from lakelog.jobs.verify.findings import Finding, offsets
from lakelog.log.partition import LOG_END_OFFSET_APP_ID, LOG_START_OFFSET_APP_ID
from lakelog.log.partition_file import PartitionFile, partition_file
from lakelog.log.transactions import HEADER_COLUMNS, fold
from lakelog.store import Location
from lakelog.store.delta.snapshot import Snapshot

_COLUMNS = [*HEADER_COLUMNS, "producer_epoch"]


@dataclass
class FilesReport:
    """What the files of one partition table's state hold."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    # None when a damaged file stops the fold before the LEO.
    last_stable_offset: int | None = None
    # Producer id -> (first offset, epoch) of each transaction open at the LEO.
    open_transactions: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Data files no commit names -> the offsets their footers hold (None: not told).
    orphans: dict[str, tuple[int, int] | None] = field(default_factory=dict)


def check_files(location: Location, table: str, snapshot: Snapshot, known_paths: set[str], *, deep: bool) -> FilesReport:
    """Check the active files of `snapshot` (a partition table's), and note files no commit names."""
    report = FilesReport()
    files = sorted(map(partition_file, snapshot.entries()), key=lambda entry: (entry.min_offset, entry.path))
    report.log_end_offset = snapshot.app_version(LOG_END_OFFSET_APP_ID) or 0
    start = files[0].min_offset if files else report.log_end_offset
    recorded = snapshot.app_version(LOG_START_OFFSET_APP_ID)
    report.log_start_offset = min(max(start, recorded or 0), report.log_end_offset)
    damaged = {entry.path for entry in files if not _present(location, table, entry, report)}
    _tiling(table, files, report)
    _fold(location, table, files, damaged, report, deep)
    _orphans(location, table, known_paths, report)
    return report


def _uri(location: Location, entry: PartitionFile) -> str:
    return f"{location.uri.rstrip('/')}/{entry.path}"


def _lost(entry: PartitionFile) -> tuple[str, ...]:
    return (offsets(entry.min_offset, entry.max_offset),) if entry.num_records else ()


def _present(location: Location, table: str, entry: PartitionFile, report: FilesReport) -> bool:
    """Is the file there with its add's size, and does its footer say its add's rows and offsets?"""
    uri = _uri(location, entry)
    where = f"file {entry.path}"
    try:
        status = location.io.info(uri)
    except (KafkaException, OSError) as error:
        report.findings.append(Finding(table, where, kinds.UNREADABLE_FILE, f"cannot be looked up: {error}", _lost(entry)))
        return False
    if status is None or status.is_dir:
        report.findings.append(Finding(table, where, kinds.MISSING_FILE, "an active file is missing", _lost(entry)))
        return False
    if status.size != entry.size_bytes:
        report.findings.append(
            Finding(table, where, kinds.SIZE_MISMATCH, f"{status.size} bytes, its add says {entry.size_bytes}", _lost(entry))
        )
        return False
    try:
        footer = location.io.parquet_metadata(uri)
        bounds = _offset_bounds(footer)
    except (KafkaException, OSError, pa.ArrowException, KeyError) as error:
        report.findings.append(Finding(table, where, kinds.UNREADABLE_FILE, f"its footer is unreadable: {error}", _lost(entry)))
        return False
    claimed = f"{entry.num_records} row(s), offsets {offsets(entry.min_offset, entry.max_offset)}"
    if footer.num_rows != entry.num_records or (
        bounds is not None and not entry.min_offset <= bounds[0] <= bounds[1] <= entry.max_offset
    ):
        found = f"{footer.num_rows} row(s)" + ("" if bounds is None else f", offsets {offsets(*bounds)}")
        report.findings.append(
            Finding(table, where, kinds.STATISTICS_MISMATCH, f"its footer says {found}; its add says {claimed}", _lost(entry))
        )
        return False
    return True


def _offset_bounds(footer: pq.FileMetaData) -> tuple[int, int] | None:
    """The offset min/max of a file by its footer's statistics (None: not recorded)."""
    if footer.num_rows == 0:
        return None
    if "offset" not in footer.schema.names:
        return None
    index = footer.schema.names.index("offset")
    low: int | None = None
    high: int | None = None
    for group in range(footer.num_row_groups):
        statistics = footer.row_group(group).column(index).statistics
        if statistics is None or not statistics.has_min_max:
            return None
        low = statistics.min if low is None else min(low, statistics.min)
        high = statistics.max if high is None else max(high, statistics.max)
    return None if low is None or high is None else (int(low), int(high))


def _tiling(table: str, files: list[PartitionFile], report: FilesReport) -> None:
    """The files' claimed ranges meet end to end from the first file to the LEO (S1.3)."""
    expected = files[0].min_offset if files else report.log_end_offset
    for entry in files:
        where = f"file {entry.path}"
        if entry.min_offset > expected:
            report.findings.append(
                Finding(
                    table,
                    where,
                    kinds.OFFSET_GAP,
                    f"no file holds offsets {offsets(expected, entry.min_offset - 1)}",
                    (offsets(expected, entry.min_offset - 1),),
                )
            )
        elif entry.min_offset < expected:
            report.findings.append(
                Finding(
                    table,
                    where,
                    kinds.OFFSET_OVERLAP,
                    f"offsets {offsets(entry.min_offset, min(entry.max_offset, expected - 1))} are held by another file too",
                )
            )
        expected = max(expected, entry.max_offset + 1)
    if expected != report.log_end_offset:
        lost = (offsets(expected, report.log_end_offset - 1),) if expected < report.log_end_offset else ()
        report.findings.append(
            Finding(
                table,
                f"offset {expected}",
                kinds.LEO_MISMATCH,
                f"the files end at offset {expected - 1}, the log end offset is {report.log_end_offset}",
                lost,
            )
        )


def _fold(location: Location, table: str, files: list[PartitionFile], damaged: set[str], report: FilesReport, deep: bool) -> None:
    """Read each file's rows in offset order: offsets, epochs and the transaction fold; stop at the first damage."""
    opened: dict[int, int] = {}
    epochs: dict[int, int] = {}
    opened_epochs: dict[int, int] = {}
    position = files[0].min_offset if files else report.log_end_offset
    for entry in files:
        if entry.path in damaged or entry.min_offset != position:
            return  # past this the state is not known: the LSO stays unknown
        rows = _rows(location, table, entry, report, deep)
        if rows is None:
            return
        opened, _ = fold(opened, rows)
        for producer_id in opened:
            opened_epochs.setdefault(producer_id, -1)
        _epochs(table, entry, rows, epochs, opened, opened_epochs, report)
        position = entry.max_offset + 1
    report.open_transactions = {pid: (first, opened_epochs.get(pid, -1)) for pid, first in opened.items()}
    report.last_stable_offset = min(opened.values(), default=report.log_end_offset)


def _rows(location: Location, table: str, entry: PartitionFile, report: FilesReport, deep: bool) -> pa.Table | None:
    """The file's rows (header columns, or all with `deep`), checked against its add; None with a finding."""
    where = f"file {entry.path}"
    try:
        data = location.io.read(_uri(location, entry))
        parquet = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
        rows = parquet.read(columns=None if deep else _COLUMNS, use_threads=False)
    except (FileNotFoundError, KafkaException, OSError, pa.ArrowException) as error:
        kind = kinds.CHECKSUM if "checksum" in str(error).lower() or "crc" in str(error).lower() else kinds.UNREADABLE_FILE
        report.findings.append(Finding(table, where, kind, f"its rows do not read: {error}", _lost(entry)))
        return None
    found = rows.column("offset").to_numpy()
    compacted = entry.num_records != entry.max_offset - entry.min_offset + 1
    ascending = bool(np.all(np.diff(found) > 0))
    inside = found.size == 0 or (found[0] >= entry.min_offset and found[-1] <= entry.max_offset)
    dense = compacted or (found.size == entry.num_records and (found.size == 0 or found[0] == entry.min_offset))
    if found.size != entry.num_records or not (ascending and inside and dense):
        report.findings.append(
            Finding(
                table,
                where,
                kinds.STATISTICS_MISMATCH,
                f"its {found.size} row(s) hold offsets {_described(found)}; its add says {entry.num_records} row(s), "
                f"offsets {offsets(entry.min_offset, entry.max_offset)}",
                _lost(entry),
            )
        )
        return None
    return rows.select(_COLUMNS)


def _described(found: np.ndarray) -> str:
    if found.size == 0:
        return "none"
    if bool(np.all(np.diff(found) == 1)):
        return offsets(int(found[0]), int(found[-1]))
    return f"{int(found[0])}..{int(found[-1])} (not dense or not ascending)"


def _epochs(
    table: str,
    entry: PartitionFile,
    rows: pa.Table,
    epochs: dict[int, int],
    opened: dict[int, int],
    opened_epochs: dict[int, int],
    report: FilesReport,
) -> None:
    """Per producer id, the epoch of its rows never goes back (S3.3, S4.6); records the epoch of open transactions."""
    producer_ids = rows.column("producer_id").to_numpy()
    producer_epochs = rows.column("producer_epoch").to_numpy()
    row_offsets = rows.column("offset").to_numpy()
    for producer_id in np.unique(producer_ids[producer_ids >= 0]).tolist():
        picked = producer_ids == producer_id
        seen = producer_epochs[picked].astype(np.int64)
        previous = epochs.get(producer_id, -1)
        sequence = np.concatenate([[previous], seen])
        backwards = np.flatnonzero(np.diff(sequence) < 0)
        if backwards.size:
            at = int(row_offsets[picked][backwards[0]])
            report.findings.append(
                Finding(
                    table,
                    f"offset {at}",
                    kinds.EPOCH_BACKWARDS,
                    f"producer id {producer_id} writes at epoch {int(sequence[backwards[0] + 1])} after epoch "
                    f"{int(sequence[backwards[0]])}",
                )
            )
        epochs[producer_id] = int(seen.max(initial=previous))
        if producer_id in opened:
            opened_epochs[producer_id] = epochs[producer_id]


def _orphans(location: Location, table: str, known_paths: set[str], report: FilesReport) -> None:
    """Data files in the table's folder that no commit read names (vacuum removes them): a note, not damage."""
    try:
        entries = location.list()
    except (KafkaException, OSError):
        return
    for entry in entries:
        if not entry.is_dir and entry.name.endswith(".parquet") and entry.name not in known_paths:
            try:
                bounds = _offset_bounds(location.io.parquet_metadata(entry.uri))
            except (KafkaException, OSError, pa.ArrowException, ValueError):
                bounds = None
            report.orphans[entry.name] = bounds
            held = "" if bounds is None else f", rows of offsets {offsets(*bounds)},"
            report.notes.append(
                Finding(
                    table, f"file {entry.name}", kinds.ORPHAN_FILE, f"{entry.size} bytes{held} in no commit (vacuum removes it)"
                )
            )


__all__ = ["FilesReport", "check_files"]
