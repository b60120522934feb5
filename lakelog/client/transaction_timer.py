"""The broker's transaction timer, run by a client that a transaction holds (S4.7, with no broker and no sweep).

A read_committed consumer stops at a partition's last stable offset, and its committed-offset fetch waits on pending
transactional offsets (S7.3), for as long as the transaction that holds them is open. Kafka's broker aborts a
transaction past its `transaction.timeout.ms` by itself; here the held client does: it runs the coordinator sweep's
timeout step (`TransactionCoordinator.sweep(expire=False, patient=True)`), which aborts what is past its timeout
with an epoch bump (the holder is fenced) and finishes what was decided once that too waited past its timeout (until
then its owner writes its own markers, and a reader finishing them would race it for nothing). Safety rests on that
epoch and on the strict commit, never on the clock: the clock only decides when to try, at most once per
`HELD_LOOK_MS`. A root needs no scheduler
for a program's own progress; `lakelog coordinator sweep` stays for what no client is there to see.
"""

from __future__ import annotations

import logging

from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.log.partition import Clock
from lakelog.store import Location
from lakelog.store.io.retry import RetryPolicy

# How often, on the client's clock, a held client looks for timed-out transactions.
HELD_LOOK_MS = 1000


class TransactionTimer:
    """Aborts the root's transactions past their timeout when the client is held, at most once per HELD_LOOK_MS."""

    def __init__(self, root: Location, retry: RetryPolicy, clock: Clock, logger: logging.Logger | logging.LoggerAdapter) -> None:
        self._root = root
        self._retry = retry
        self._clock = clock
        self._logger = logger
        self._coordinator: TransactionCoordinator | None = None
        self._next_look_ms = 0

    def held(self, what: str) -> list[str]:
        """The client is held by an open transaction (`what`, for the log line): abort those past their timeout,
        if it is time to look; the transactional ids aborted or finished."""
        now = self._clock()
        if now < self._next_look_ms:
            return []
        self._next_look_ms = now + HELD_LOOK_MS
        if self._coordinator is None:
            self._coordinator = TransactionCoordinator(self._root, clock=self._clock, retry=self._retry)
        report = self._coordinator.sweep(expire=False, patient=True)
        finished = report.aborted_timed_out + report.rolled_forward
        if finished:
            self._logger.info(
                "%s was held by an open transaction: aborted past transaction.timeout.ms %s, finished %s (S4.7)",
                what,
                report.aborted_timed_out,
                report.rolled_forward,
            )
        return finished


__all__ = ["HELD_LOOK_MS", "TransactionTimer"]
