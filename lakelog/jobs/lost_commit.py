"""The jobs' step after a lost commit race (the view and status tables): retry, at once or after a backoff wait, or give up."""

from __future__ import annotations

import logging

from lakelog.client.retry import Backoff
from lakelog.errors import KafkaTimeout


def wait_after_lost_commit(backoff: Backoff, log: logging.Logger, what: str) -> None:
    """Wait (from the second loss on: Backoff.lost_race) before the next try of `what` (e.g. "view of t"),
    which lost its commit to another run.

    Raises KafkaTimeout, after a warning, once `backoff`'s deadline has passed; otherwise logs the
    lost race at DEBUG and returns, and the caller decides again on the latest snapshot.
    """
    if not backoff.lost_race():
        message = f"{what}: lost its commit past the deadline, after {backoff.retries} retries"
        log.warning("%s; giving up", message)
        raise KafkaTimeout(message) from None
    log.debug("%s: lost its commit to another run; retry %d decides again on the latest snapshot", what, backoff.retries)
