"""Producer id allocation: each id is handed out by one strict commit (never random).

`<root>/__producer_ids/` is a Delta table whose only state is a counter: the next
free id, a `txn` action. Allocating id n commits the counter n+1 alone (no data
file, no row per id), as exactly the next version of the snapshot that read n,
so two processes racing for an id get different ones (the loser waits out the
retry policy's backoff, reloads and takes the next). The cost is O(1) in the ids
ever allocated: the table is opened once per process and root, checkpointed
every `CHECKPOINT_INTERVAL` commits (one `txn` entry each), and its `_delta_log`
is cleaned behind the two latest checkpoints (S9.5 makes no safety rest on the
age of a log file, so this internal table keeps none past the count).

Tables written before this kept one row and one data file per id: the counter
continues from their `txn`, and the first allocation of a process removes those
files from the snapshot (one commit, any process may make it).
"""

from __future__ import annotations

import logging
import threading
import time

import pyarrow as pa

from lakelog.errors import CommitConflict
from lakelog.store import Location, Table, check_root
from lakelog.store.io.retry import DEFAULT_POLICY, RetryPolicy
from lakelog.store.upkeep.maintenance import checkpoint_interval, cleanup_log, is_checkpoint_version, reopen

logger = logging.getLogger(__name__)

PRODUCER_IDS_DIR = "__producer_ids"
NEXT_ID_APP_ID = "lakelog.next_producer_id"
# Rows of tables written before the counter was committed alone (kept so such tables still open).
SCHEMA = pa.schema(
    [
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("client_id", pa.string()),
        pa.field("allocated_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
# A checkpoint here is one metadata entry and one txn: cheap, so often.
CHECKPOINT_INTERVAL = 20
KEEP_CHECKPOINTS = 2

_tables: dict[str, tuple[Table, threading.RLock]] = {}
_tables_lock = threading.Lock()


def allocate_producer_id(root: str | Location, client_id: str = "", *, retry: RetryPolicy = DEFAULT_POLICY) -> int:
    """Allocate a producer id unique across every process using this root; lost races back off by `retry`.

    `client_id` names the caller in the DEBUG line of the allocation (ids are no
    longer stored with it).
    """
    table, lock = _table(root)
    with lock:
        # No deadline: every lost race is another process's allocation landing.
        backoff = retry.start(None)
        table.refresh()
        while True:
            producer_id = table.app_version(NEXT_ID_APP_ID) or 0
            try:
                table.rewrite(app_versions={NEXT_ID_APP_ID: producer_id + 1})
            except CommitConflict:
                backoff.wait()
                logger.debug(
                    "%s: producer id %d went to another process; retry %d takes the next", table.uri, producer_id, backoff.retries
                )
                table.refresh()
                continue
            logger.debug("%s: producer id %d allocated to %r", table.uri, producer_id, client_id)
            _maintain(table)
            return producer_id


def _table(root: str | Location) -> tuple[Table, threading.RLock]:
    """This process's table of `root` (created on first use), and the lock its allocations take."""
    location = check_root(root) / PRODUCER_IDS_DIR
    with _tables_lock:
        cached = _tables.get(location.uri)
        if cached is not None:
            return cached
    table, _ = Table.open_or_create(location, SCHEMA, {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)})
    _drop_rows(table)
    with _tables_lock:
        return _tables.setdefault(location.uri, (table, threading.RLock()))


def _drop_rows(table: Table) -> None:
    """Remove the per-id files a table written before the counter-only commits holds (best effort)."""
    files = table.data_files()
    if not files:
        return
    try:
        table.rewrite(files)
        logger.info("%s: removed %d per-id file(s) of an older layout; the counter alone stays", table.uri, len(files))
    except CommitConflict:
        table.refresh()  # another process allocated or removed them; the next process to open tries again


def _maintain(table: Table) -> None:
    """After a checkpoint version (written by `Table`): load from it and clean the log behind the kept ones."""
    if not is_checkpoint_version(table.version, checkpoint_interval(table)):
        return
    started = time.monotonic()
    try:
        reopen(table)
        deleted = cleanup_log(table, keep_checkpoints=KEEP_CHECKPOINTS, retention_s=0)
    except Exception as error:  # noqa: BLE001 - the allocation stands; the next checkpoint tries again
        logger.warning("%s: log maintenance failed: %r", table.uri, error)
        return
    logger.debug(
        "%s: maintained at version %d (%d log files deleted, %.1f ms)",
        table.uri,
        table.version,
        deleted,
        (time.monotonic() - started) * 1e3,
    )
