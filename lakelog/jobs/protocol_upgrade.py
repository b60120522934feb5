"""Upgrade the Delta protocol of tables written before lakelog declared the one it declares now.

Tables lakelog creates declare `minWriterVersion` 7 with the writer features `invariants` and `lakelogStrictCommit`
(lakelog.store.delta.actions.PROTOCOL). Older tables lack `invariants`, and Delta's Spark connector refuses to read
them (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH: their NOT NULL columns are column invariants it finds enabled in
the metadata but not listed in the protocol). Tables older still may have a legacy writer version (below 7), whose
features are implied by the number.

`upgrade_table` commits one `protocol` action, alone, as exactly version v+1 of the snapshot it decided on: the union
of the table's protocol and lakelog's (a legacy writer version's implied features listed, so the upgrade takes no
feature away; reader version and features kept). Nothing else changes: data files, metadata, app transactions and
the history stay, and every reader that read the table still reads it (lakelog, delta-rs; the reader version does not
rise). A table that already declares everything gets no commit. If another writer takes version v+1, the decision
is made again on the new snapshot (it may find the upgrade done), a few times at most, then CommitConflict.

    lakelog upgrade-protocol --root R          # every table under the root
    upgrade_root(root) / upgrade_table(location)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lakelog.errors import CommitConflict
from lakelog.store import Location, Table
from lakelog.store.delta.actions import PROTOCOL

logger = logging.getLogger(__name__)

TABLE_FEATURES_VERSION = 7
# The writer features a legacy writer version implies (Delta's PROTOCOL.md, "Table Features"): listed explicitly
# when a table moves to writer version 7, so it keeps every rule writers of the old version kept.
_LEGACY_WRITER_FEATURES = (
    (2, ("appendOnly", "invariants")),
    (3, ("checkConstraints",)),
    (4, ("changeDataFeed", "generatedColumns")),
    (5, ("columnMapping",)),
    (6, ("identityColumns",)),
)
ATTEMPTS = 5


def upgraded(protocol: Mapping[str, Any]) -> dict[str, Any] | None:
    """The union of `protocol` and lakelog's, or None if `protocol` already declares all of lakelog's."""
    writer = int(protocol.get("minWriterVersion") or 1)
    features = list(protocol.get("writerFeatures") or [])
    if writer < TABLE_FEATURES_VERSION:
        features = [feature for version, implied in _LEGACY_WRITER_FEATURES if version <= writer for feature in implied]
    wanted = [feature for feature in PROTOCOL["writerFeatures"] if feature not in features]
    if writer >= TABLE_FEATURES_VERSION and not wanted:
        return None
    result: dict[str, Any] = {
        "minReaderVersion": max(int(protocol.get("minReaderVersion") or 1), int(PROTOCOL["minReaderVersion"])),
        "minWriterVersion": TABLE_FEATURES_VERSION,
    }
    if "readerFeatures" in protocol:
        result["readerFeatures"] = list(protocol["readerFeatures"])
    result["writerFeatures"] = features + wanted
    return result


def upgrade_table(location: Location | str) -> int | None:
    """Upgrade one table's protocol (see the module docstring): the version committed, or None if none was needed."""
    table = Table.open(location)
    for attempt in range(ATTEMPTS):
        protocol = upgraded(table.protocol)
        if protocol is None:
            return None
        try:
            version = table.commit_protocol(protocol)
        except CommitConflict:
            if attempt == ATTEMPTS - 1:
                raise
            table.refresh()
            logger.info(
                "%s: another writer committed first; deciding the protocol upgrade again on v%d", table.uri, table.version
            )
            continue
        logger.info("%s: protocol upgraded at version %d: writer features %s", table.uri, version, protocol["writerFeatures"])
        return version
    return None  # not reached: the last attempt returns or raises


def tables_under(root: Location | str) -> list[Location]:
    """Every Delta table under `root` (a folder holding `_delta_log`), through the root's file IO."""
    location = Location.of(root)
    found = [
        Location(entry.uri.rsplit("/", 1)[0], location.io)
        for entry in location.list(recursive=True)
        if entry.is_dir and entry.name == "_delta_log"
    ]
    return sorted(found, key=lambda table: table.uri)


def upgrade_root(root: Location | str) -> dict[str, int | None]:
    """Upgrade every table under `root`: {table URI: the version committed, or None where none was needed}."""
    return {table.uri: upgrade_table(table) for table in tables_under(root)}


__all__ = ["tables_under", "upgrade_root", "upgrade_table", "upgraded"]
