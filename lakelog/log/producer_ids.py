"""Producer id allocation: each id is handed out by one strict commit (never random).

`<root>/__producer_ids/` is a Delta table with one row per allocated id; the next
free id is a `txn` action of the same commit, so allocation is O(1) and two
processes racing for an id get different ones (the loser waits out the retry
policy's backoff, reloads and takes the next).
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa

from lakelog.errors import CommitConflict
from lakelog.store import Table, check_root
from lakelog.store.retry import DEFAULT_POLICY, RetryPolicy

log = logging.getLogger(__name__)

PRODUCER_IDS_DIR = "__producer_ids"
NEXT_ID_APP_ID = "lakelog.next_producer_id"
SCHEMA = pa.schema(
    [
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("client_id", pa.string()),
        pa.field("allocated_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def allocate_producer_id(root: str, client_id: str = "", *, retry: RetryPolicy = DEFAULT_POLICY) -> int:
    """Allocate a producer id unique across every process using this root; lost races back off by `retry`."""
    table, _ = Table.create(check_root(root) / PRODUCER_IDS_DIR, SCHEMA, {})
    # No deadline: every lost race is another process's allocation landing.
    backoff = retry.start(None)
    while True:
        producer_id = table.app_version(NEXT_ID_APP_ID) or 0
        row = pa.table(
            {
                "producer_id": pa.array([producer_id], pa.int64()),
                "client_id": pa.array([client_id], pa.string()),
                "allocated_at": pa.array([time.time_ns() // 1000], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            },
            schema=SCHEMA,
        )
        try:
            table.append(row, app_versions={NEXT_ID_APP_ID: producer_id + 1})
            return producer_id
        except CommitConflict:
            backoff.wait()
            log.debug("%s: producer id %d went to another process; retry %d takes the next", table.uri, producer_id, backoff.retries)
            table.refresh()
