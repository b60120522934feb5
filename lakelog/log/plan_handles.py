"""Partition handles kept between the scan plans (and log-cleaner passes) of one process, refreshed, not reopened.

A scan plan (lakelog.log.scan) needs each partition's latest snapshot. Opened cold, a partition costs its
`_last_checkpoint`, its checkpoint, every commit since, and the listing that proves the end of its log: on S3 eight
or nine requests for a partition of a few commits (bench/scale.py). A driver plans the same topic again and again
(every micro-batch of a stream, every view refresh of a long-lived scheduler worker, every read of a notebook), so
the handles are kept here and refreshed (the log cleaner of a sweep, lakelog.log.retention, takes them too): a
GET of the next commit and a GET of the one in hand when nothing is new (still there, still this table's;
lakelog.store.delta.log `advance`), one GET per new commit otherwise.

A kept handle is a cache of what the table holds, never a decision: a plan only reads, and each plan refreshes
the handle to the latest version before it pins the snapshot it reads (S5.2); the cleaner decides on the refreshed
snapshot and commits strictly after it, as on a handle just opened (a lost race reloads it). A handle is taken out while a plan
uses it (two plans at once never share one: the other opens its own), and dropped when its refresh fails in any
way: a table deleted and made again under its name (the refresh finds another table's commit, at the next
version or at the one in hand) or a topic whose configuration changed (its partition count among it) is then
opened cold, which tells the cases apart as a first open does.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

from lakelog.log.partition import PartitionLog
from lakelog.store import Location

logger = logging.getLogger(__name__)

# Partition handles kept; the least recently planned one is dropped past this (a handle of a small partition is
# its snapshot: a few KB of file entries).
KEPT_HANDLES = 10_000

_handles: OrderedDict[tuple[str, str], PartitionLog] = OrderedDict()
_lock = threading.Lock()


def key_of(location: Location) -> tuple[str, str]:
    """A partition's key: its URI and the settings of the store that serves it (one bucket reached through two
    endpoints, or with two sets of keys, is two partitions here)."""
    return (location.uri, repr(getattr(location.io, "settings", None)))


def take(location: Location, open_cold: Callable[[], PartitionLog]) -> PartitionLog:
    """The handle of the partition at `location`, at its latest version: a kept one refreshed, else `open_cold()`.

    Give it back with `give_back` once the plan has pinned what it reads.
    """
    with _lock:
        kept = _handles.pop(key_of(location), None)
    if kept is not None:
        configuration = kept.table.configuration
        try:
            kept.refresh()
        except Exception as error:  # noqa: BLE001 - any failed refresh: the cold open decides (and raises if it must)
            logger.debug("%s: the kept handle did not refresh (%s); opening it again", location.uri, error)
        else:
            if kept.table.configuration == configuration:
                return kept
            logger.debug("%s: the topic's configuration changed; opening it again", location.uri)
    return open_cold()


def give_back(location: Location, log: PartitionLog) -> None:
    """Keep `log`, the handle of the partition at `location`, for the next plan of it."""
    key = key_of(location)
    with _lock:
        _handles[key] = log
        _handles.move_to_end(key)
        while len(_handles) > KEPT_HANDLES:
            _handles.popitem(last=False)


@contextlib.contextmanager
def kept(root: str | Location, topic: str, partition: int) -> Iterator[PartitionLog]:
    """The partition's handle at its latest version (kept and refreshed, or opened cold), given back after the
    block: for a reader that looks at the same partitions again and again (a plan, a console's refresh)."""
    from lakelog.log.topics import open_partition, partition_path  # topics does not import this module

    location = partition_path(Location.of(root), topic, partition)
    log = take(location, lambda: open_partition(root, topic, partition))
    yield log
    give_back(location, log)


def forget() -> None:
    """Drop every kept handle (the next plan of each partition opens it cold)."""
    with _lock:
        _handles.clear()


__all__ = ["KEPT_HANDLES", "forget", "give_back", "take"]
