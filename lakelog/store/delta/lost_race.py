"""The one step after a lost commit race: decide again, at once or after a backoff wait, or give up.

A commit that lost (`Conflict`: another writer's commit is the version it was decided for) is never rebased:
its writer reloads and decides again on the latest snapshot. Every writer loop (an append, a trim, a
compaction, a config change, a topic's deletion mark, a view or status refresh) takes this step between its
tries, so they all wait alike (`Backoff.lost_race`: the first retry at once, later ones after jittered waits)
and give up alike, with `KafkaTimeout` once their deadline has passed.
"""

from __future__ import annotations

import logging

from lakelog.errors import KafkaTimeout
from lakelog.store.io.retry import Backoff

logger = logging.getLogger(__name__)


def after_lost_race(backoff: Backoff, what: str, log: logging.Logger = logger) -> None:
    """Wait, if this is not the loop's first lost race, before the next try of `what` (e.g. "t-0: append").

    Raises KafkaTimeout, after a warning, once `backoff`'s deadline has passed; otherwise logs the lost race
    at DEBUG and returns, and the caller reloads and decides again on the latest snapshot.
    """
    if not backoff.lost_race():
        message = f"{what}: lost its commit race past the deadline, after {backoff.retries} retries"
        log.warning("%s; giving up", message)
        raise KafkaTimeout(message) from None
    log.debug("%s: lost its commit race; retry %d decides again on the latest snapshot", what, backoff.retries)


__all__ = ["after_lost_race"]
