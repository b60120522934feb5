"""Deleting a table so that no writer still holding it can commit into what is left, or into a table made again there.

The table's last commit is a mark (`Table.mark_deleted`): a writer that decided on an earlier snapshot loses its
race to it and then sees the mark. Then its commit files go in ascending version order, as log cleanup deletes
them (S9.5): a writer whose put lands in the emptied folder finds its predecessor gone, and its commit check finds
no table (or one of another id) and withdraws the commit (lakelog.store.delta.commit). Only then do the data
files and the folder go.
"""

from __future__ import annotations

import logging
import re

from lakelog.store.delta.log import DeltaLog
from lakelog.store.io.location import Location

logger = logging.getLogger(__name__)

_COMMIT = re.compile(r"^(\d{20})\.json$")


def delete_table(location: Location) -> int:
    """Delete the table at `location` (marked deleted first by the caller): commits oldest first, then the rest.

    Returns how many commit files were deleted. Nothing is left under `location`.
    """
    log = DeltaLog(location)
    versions = sorted(int(match.group(1)) for match in map(_COMMIT.match, log.names()) if match)
    for version in versions:
        log.delete_commit(version)
    location.io.delete_tree(location.uri)
    logger.debug("%s: deleted %d commit file(s), oldest first, then the folder", location.uri, len(versions))
    return len(versions)


__all__ = ["delete_table"]
