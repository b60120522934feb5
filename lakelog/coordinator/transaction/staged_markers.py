"""A transaction's markers written beside the decision they close (S4.5): files first, commits after the decision.

A marker is a commit of its partition; its Parquet file needs no decision (a file no commit names is no data,
vacuum removes it). So while `end_transaction` commits its PREPARE_* record, each marker's file is written on
the partition's snapshot in hand, and the marker's commit is put only once the decision is in and needs exactly
these markers. Otherwise (the decision failed, was decided again into other markers, or a fault point stopped
it) every staged file is deleted and nothing was committed. A process killed in between leaves only such files.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from lakelog.coordinator.transaction.results import TransactionMarkers
from lakelog.log import PartitionLog
from lakelog.store.io.retry import Backoff

# What the coordinator's fault points are called with (its `_hit`): a point's name and where it is.
Hit = Callable[..., None]


class NotDecided(Exception):
    """A staged marker's commit is not put: the decision did not come to need it (its file is deleted)."""


class StagedMarkers:
    """The markers of one decision being committed, each written as far as its commit's put on `pool`."""

    def __init__(
        self,
        markers: TransactionMarkers,
        targets: list[tuple[int, PartitionLog]],
        pool: ThreadPoolExecutor,
        backoff: Backoff,
        hit: Hit,
        before_marker: str,
        after_marker: str,
    ) -> None:
        self.markers = markers
        self._hit = hit
        self._points = (before_marker, after_marker)
        self._decision: Future[TransactionMarkers | None] = Future()
        self._writes = [pool.submit(self._write, index, log, backoff) for index, log in targets]

    def _write(self, index: int, log: PartitionLog, backoff: Backoff) -> None:
        markers = self.markers
        where: dict[str, Any] = {
            "transactional_id": markers.transactional_id,
            "index": index,
            "topic": log.topic,
            "partition": log.partition,
        }
        ready = partial(self._ready, where)
        log.append_marker(markers.producer_id, markers.producer_epoch, markers.control, backoff=backoff, ready=ready)
        self._hit(self._points[1], **where)

    def _ready(self, where: dict[str, Any]) -> None:
        if self._decision.result() != self.markers:
            raise NotDecided(f"{self.markers.transactional_id}: the decision does not need these markers")
        self._hit(self._points[0], **where)

    def decided(self, markers: TransactionMarkers | None) -> bool:
        """The decision is in and needs `markers` (None: it failed, or needs none): True once every staged marker
        is written, False if they were not these (their files deleted). A marker's own failure is raised, after
        the others ended (those written stay written: markers are idempotent)."""
        self._decision.set_result(markers)
        errors = [write.exception() for write in self._writes]
        if markers != self.markers:
            return False
        failed = [error for error in errors if error is not None and not isinstance(error, NotDecided)]
        if failed:
            raise failed[0]
        return not any(errors)


__all__ = ["NotDecided", "StagedMarkers"]
