"""A root's identity: is this URI a lakelog root at all, or a typo?

A Kafka client given the wrong bootstrap servers finds no cluster and says so;
it does not start one. A lakelog root is the cluster, so it carries an identity
as Kafka's `meta.properties` does: `<root>/__cluster_metadata/`, a Delta table
whose one row is the root's cluster id (all state is rows in tables). Version 0
creates the table; version 1 appends the row, decided on version 0 with no row in
it, so two initialisers racing agree on one id. `lakelog init` and the explicit
admin path (`AdminClient.create_topics`, `lakelog.log.create_topic`) write it;
every other way into a root (the clients, every CLI command, the loaders, the
Spark source and writer, the Airflow hook, `lakelog sql`) goes through `open_root`,
which refuses a root without it with `UnresolvedRoot`, so nothing else writes
under a root that was never initialised.

The check costs one HEAD (the identity's version-1 commit file) the first time a
process opens a root; a positive answer is kept for the life of the process (a
root does not stop being one), a refusal is never kept. Roots made before the
identity existed have `topics/`, `__transaction_state/` or `__consumer_offsets/`
and no identity: for those the check adds one listing of the root's top level
(one delimited LIST on S3), and `lakelog init` on such a root writes the identity,
so the check is one HEAD again.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from lakelog.errors import CommitConflict, UnresolvedRoot
from lakelog.store.delta.table import Table
from lakelog.store.io.fileio import FileIO
from lakelog.store.io.location import Location
from lakelog.store.io.root import check_root

logger = logging.getLogger(__name__)

CLUSTER_METADATA_DIR = "__cluster_metadata"
# Folders that made a root before the identity existed (the clients created them on first use).
LEGACY_ROOT_DIRS = ("topics", "__transaction_state", "__consumer_offsets")
SCHEMA = pa.schema(
    [
        pa.field("cluster_id", pa.string(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
# The commit that appends the identity row: present once the root is initialised.
IDENTITY_COMMIT = f"_delta_log/{1:020d}.json"

# (FileIO, root URI) of roots found initialised (identity or legacy) / found to carry their identity row.
_initialised: set[tuple[FileIO, str]] = set()
_identified: set[tuple[FileIO, str]] = set()
_lock = threading.Lock()


def open_root(root: Any, storage_options: Mapping[str, Any] | None = None) -> Location:
    """The root as `check_root` gives it, if it is an initialised lakelog root; UnresolvedRoot if it is not."""
    location = check_root(root, storage_options)
    key = (location.io, location.uri)
    if key in _initialised:
        return location
    if not is_initialised(location):
        raise UnresolvedRoot(
            f"lakelog.root {location.uri} does not exist or is not a lakelog root (no {CLUSTER_METADATA_DIR} table): "
            f"create one with `lakelog init --root {location.uri}` or AdminClient.create_topics",
            root=location.uri,
        )
    with _lock:
        _initialised.add(key)
    return location


def is_initialised(location: Location) -> bool:
    """One HEAD for the identity; for a root without one, one listing for the folders of a root made before it."""
    if location.io.exists((location / CLUSTER_METADATA_DIR).uri + "/" + IDENTITY_COMMIT):
        return True
    return any(entry.is_dir and entry.uri.rstrip("/").rsplit("/", 1)[-1] in LEGACY_ROOT_DIRS for entry in location.list())


def initialise_root(root: Any, storage_options: Mapping[str, Any] | None = None) -> str:
    """Make `root` a lakelog root (idempotent; a root of an earlier version gets its identity): its cluster id."""
    location = check_root(root, storage_options)
    table, _ = Table.open_or_create(location / CLUSTER_METADATA_DIR, SCHEMA, {})
    while True:
        found = _cluster_id(table)
        if found is not None:
            break
        # Decided on this snapshot (no row yet): the row is its next version, or another initialiser's row is.
        row = pa.table({"cluster_id": [uuid.uuid4().hex], "created_at": [datetime.now(UTC)]}, schema=SCHEMA)
        try:
            table.append(row)
        except CommitConflict:
            table.refresh()
            continue
        logger.info("%s: initialised as a lakelog root", location.uri)
    with _lock:
        _identified.add((location.io, location.uri))
        _initialised.add((location.io, location.uri))
    return found


def ensure_initialised(root: Any, storage_options: Mapping[str, Any] | None = None) -> Location:
    """For the explicit admin path: the root, initialised first unless this process already found its identity."""
    location = check_root(root, storage_options)
    if (location.io, location.uri) not in _identified:
        initialise_root(location)
    return location


def cluster_id(root: Any, storage_options: Mapping[str, Any] | None = None) -> str:
    """The root's cluster id; UnresolvedRoot if it has none (run `lakelog init`)."""
    location = open_root(root, storage_options)
    if Table.exists(location / CLUSTER_METADATA_DIR):
        found = _cluster_id(Table.open(location / CLUSTER_METADATA_DIR))
        if found is not None:
            return found
    raise UnresolvedRoot(
        f"lakelog.root {location.uri} predates root identities: `lakelog init --root {location.uri}` gives it one",
        root=location.uri,
    )


def _cluster_id(table: Table) -> str | None:
    """The first row's cluster id (the one decided on an empty table), or None before it is committed."""
    for entry in table.data_files():
        rows = table.read_data_file(entry)
        if rows.num_rows:
            return str(rows.column("cluster_id")[0].as_py())
    return None


__all__ = ["CLUSTER_METADATA_DIR", "cluster_id", "ensure_initialised", "initialise_root", "is_initialised", "open_root"]
