"""Which rows of a topic's clean section compaction by key keeps (S9.3): the rules, as a pure plan over the rows.

`plan_keep` is given the rows of the files wholly below the LSO (lakelog.log.compaction reads them) and
returns a mask of the rows to keep: the last data row per key outside aborted transactions, null keys,
tombstones within `delete.retention.ms`, each producer's last batch and marker, and the markers that
close kept transactional rows. The module docstring of lakelog.log.compaction states the rules and why.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log.records import MAX_SEQUENCE
from lakelog.log.transactions import AbortedTransaction


def plan_keep(
    rows: pa.Table,
    file_index: np.ndarray,
    aborted: Sequence[AbortedTransaction],
    last_data: dict[int, int],
    last_marker: dict[int, int],
    *,
    now_ms: int,
    delete_retention_ms: int,
) -> np.ndarray:
    """Which rows of the clean section a topic keeps (S9.3); pure: see the module docstring for the rules.

    `rows` are partition rows in offset order, `file_index` the file of each (a
    batch never spans files), `aborted` the aborted transactions meeting them,
    `last_data` / `last_marker` each producer's last data row and marker offset
    in the whole log.
    """
    count = rows.num_rows
    if count == 0:
        return np.zeros(0, dtype=bool)
    offsets = rows.column("offset").to_numpy()
    producers = rows.column("producer_id").to_numpy()
    transactional = rows.column("is_transactional").to_numpy(zero_copy_only=False)
    is_marker = rows.column("control").is_valid().to_numpy(zero_copy_only=False)
    is_data = ~is_marker
    in_aborted = _aborted_rows(offsets, producers, transactional & is_data, aborted)
    live = is_data & ~in_aborted
    has_key = rows.column("key").is_valid().to_numpy(zero_copy_only=False)
    keep = live & ~has_key
    keyed = live & has_key
    if keyed.any():
        positions = np.flatnonzero(keyed)
        latest = (
            pa.table({"key": rows.column("key").take(pa.array(positions)), "i": pa.array(positions)})
            .group_by("key", use_threads=False)
            .aggregate([("i", "max")])
            .column("i_max")
            .to_numpy()
        )
        keep[latest] = True
    # Tombstones go once delete.retention.ms has passed since their timestamp.
    is_null = rows.column("value").is_null().to_numpy(zero_copy_only=False)
    timestamps_ms = pc.cast(rows.column("timestamp"), pa.int64()).to_numpy(zero_copy_only=False) // 1000
    expired = is_null & has_key & is_data & (now_ms - timestamps_ms > delete_retention_ms)
    keep &= ~expired
    # A producer's last batch carries its state only if no marker follows it (a marker resets the sequence, S4.6).
    pinned = {pid: offset for pid, offset in last_data.items() if offset > last_marker.get(pid, -1)}
    _keep_last_batches(keep, offsets, producers, rows, file_index, is_data, pinned)
    for producer_id, offset in last_marker.items():
        keep |= is_marker & (producers == producer_id) & (offsets == offset)
    _keep_markers(keep, producers, transactional & is_data, is_marker)
    return keep


def _aborted_rows(
    offsets: np.ndarray, producers: np.ndarray, candidates: np.ndarray, aborted: Sequence[AbortedTransaction]
) -> np.ndarray:
    """Transactional data rows of producer P in [first offset, marker offset) of one of P's aborted transactions."""
    result = np.zeros(len(offsets), dtype=bool)
    by_producer: dict[int, list[AbortedTransaction]] = {}
    for txn in aborted:
        by_producer.setdefault(txn.producer_id, []).append(txn)
    for producer_id, txns in by_producer.items():
        txns.sort(key=lambda txn: txn.first_offset)
        firsts = np.array([txn.first_offset for txn in txns], dtype=np.int64)
        markers = np.array([txn.marker_offset for txn in txns], dtype=np.int64)
        rows = np.flatnonzero(candidates & (producers == producer_id))
        which = np.searchsorted(firsts, offsets[rows], side="right") - 1
        hit = (which >= 0) & (offsets[rows] < markers[np.maximum(which, 0)])
        result[rows[hit]] = True
    return result


def _keep_last_batches(
    keep: np.ndarray,
    offsets: np.ndarray,
    producers: np.ndarray,
    rows: pa.Table,
    file_index: np.ndarray,
    is_data: np.ndarray,
    last_data: dict[int, int],
) -> None:
    """Keep each producer's last data batch whole: its last row and the rows before it in the same file that
    continue it (same producer and epoch, offsets and sequences one apart). Rows of several batches of one
    producer that follow each other in one file are kept together: a superset, never less than the batch."""
    if not last_data:
        return
    epochs = rows.column("producer_epoch").to_numpy()
    sequences = rows.column("sequence").to_numpy().astype(np.int64)
    for producer_id, offset in last_data.items():
        if producer_id < 0:
            continue
        found = np.flatnonzero((offsets == offset) & (producers == producer_id) & is_data)
        if not len(found):
            continue
        i = int(found[0])
        keep[i] = True
        while (
            i > 0
            and is_data[i - 1]
            and producers[i - 1] == producer_id
            and epochs[i - 1] == epochs[i]
            and file_index[i - 1] == file_index[i]
            and offsets[i - 1] == offsets[i] - 1
            and (sequences[i - 1] + 1) % (MAX_SEQUENCE + 1) == sequences[i]
        ):
            i -= 1
            keep[i] = True


def _keep_markers(keep: np.ndarray, producers: np.ndarray, transactional_data: np.ndarray, is_marker: np.ndarray) -> None:
    """Keep a producer's marker if a kept transactional row of it lies between its previous marker and this one."""
    pending: dict[int, bool] = {}
    for i in np.flatnonzero(transactional_data | is_marker):
        producer_id = int(producers[i])
        if is_marker[i]:
            if pending.pop(producer_id, False):
                keep[i] = True
        elif keep[i]:
            pending[producer_id] = True


__all__ = ["plan_keep"]
