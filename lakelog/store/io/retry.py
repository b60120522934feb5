"""The one retry policy of every optimistic-concurrency loop: exponential backoff with full jitter (KIP-580).

A loop that met a retriable refusal waits before it reloads and decides again; its n-th wait (n from 0)
is uniform in [0, min(`retry.backoff.max.ms`, `retry.backoff.ms` * 2**n)]. A loop that lost a commit race
(`Backoff.lost_race`) decides again at once the first time, and waits so from its second loss on.
The cap grows as in Kafka's `ExponentialBackoff` (multiplier 2, bounded by the max); the jitter is
"full" (the whole range down to 0) rather than Kafka's +-20%, because here the retries of many writers
meet at one put-if-absent: spreading them over the whole window is what lets one commit at a time go
through, and the first retry after a lost race is usually soon. The wait only changes *when* a retry
happens, never *what* it decides: the caller reloads the latest snapshot after the wait and decides on
it, as it would have at once (ARCHITECTURE.md, the one rule).

Clients take the policy from their config (`RetryPolicy.from_config`); loops that run without one
(the log, the coordinators, producer-id allocation) take `DEFAULT_POLICY`, Kafka's defaults, which are
also the defaults in `lakelog/conf/*.properties`. The clock, the sleep and the random source are
passed in, so a test runs a loop on a fake clock without sleeping.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from lakelog.errors import InvalidConfig

logger = logging.getLogger(__name__)

# Kafka's defaults (CommonClientConfigs): retry.backoff.ms=100, retry.backoff.max.ms=1000.
DEFAULT_BACKOFF_MS = 100
DEFAULT_BACKOFF_MAX_MS = 1000
BACKOFF_KEY = "retry.backoff.ms"
BACKOFF_MAX_KEY = "retry.backoff.max.ms"

Clock = Callable[[], float]
Sleep = Callable[[float], None]


class Uniform(Protocol):
    """A random source: `random.Random`, or the `random` module itself."""

    def uniform(self, a: float, b: float) -> float: ...


@dataclass(frozen=True)
class RetryPolicy:
    """`retry.backoff.ms` and `retry.backoff.max.ms`: how long the n-th retry of a loop may wait."""

    backoff_ms: int = DEFAULT_BACKOFF_MS
    backoff_max_ms: int = DEFAULT_BACKOFF_MAX_MS

    def __post_init__(self) -> None:
        for key, value in ((BACKOFF_KEY, self.backoff_ms), (BACKOFF_MAX_KEY, self.backoff_max_ms)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidConfig(f"config {key} takes a non-negative integer, not {value!r}", key=key)
        check_backoff_bounds(self.backoff_ms, self.backoff_max_ms)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RetryPolicy:
        """The policy of a loaded client config (a config without the max takes Kafka's default)."""
        return cls(config[BACKOFF_KEY], config.get(BACKOFF_MAX_KEY, DEFAULT_BACKOFF_MAX_MS))

    def cap_ms(self, retry: int) -> float:
        """The longest the `retry`-th wait (from 0) may be: min(max, base * 2**retry)."""
        if retry < 0:
            raise ValueError(f"retry counts from 0, not {retry}")
        if self.backoff_ms == 0:
            return 0.0
        # 2**retry outgrows any max long before a float overflows; stop doubling there.
        if retry >= self.backoff_max_ms.bit_length():
            return float(self.backoff_max_ms)
        return float(min(self.backoff_max_ms, self.backoff_ms << retry))

    def delay_s(self, retry: int, source: Uniform = random) -> float:
        """The `retry`-th wait, in seconds: uniform in [0, cap_ms(retry)] (full jitter)."""
        return source.uniform(0.0, self.cap_ms(retry)) / 1000

    def start(
        self,
        timeout_s: float | None,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
        source: Uniform = random,
    ) -> Backoff:
        """The backoff of one loop, which gives up `timeout_s` after now on `clock` (None: never)."""
        deadline = None if timeout_s is None else clock() + timeout_s
        return Backoff(self, deadline, clock, sleep, source)


class Backoff:
    """The retries of one loop: each `wait()` sleeps the next jittered delay, never past the deadline.

    ```
    backoff = policy.start(timeout_s)
    while True:
        decide on the latest snapshot, commit
        except lost race: if not backoff.wait(): give up; reload; continue
    ```
    """

    def __init__(self, policy: RetryPolicy, deadline: float | None, clock: Clock, sleep: Sleep, source: Uniform):
        self.policy = policy
        self.deadline = deadline
        self.retries = 0
        # Retries taken at once (`lost_race`): the waits' doubling counts from the first retry that waited.
        self._immediate = 0
        self._clock = clock
        self._sleep = sleep
        self._source = source

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self.deadline is not None and self._clock() >= self.deadline

    def remaining_s(self) -> float | None:
        """Seconds left before the deadline (0 once passed); None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self._clock())

    def wait(self) -> bool:
        """Sleep before the next retry and count it; False, without sleeping, once the deadline has passed.

        The sleep is cut at the deadline, so the last retry runs at the deadline at the latest.
        """
        remaining = self.remaining_s()
        if remaining is not None and remaining <= 0:
            return False
        delay = self.policy.delay_s(self.retries - self._immediate, self._source)
        if remaining is not None:
            delay = min(delay, remaining)
        self.retries += 1
        if delay > 0:
            self._sleep(delay)
        return True

    def lost_race(self) -> bool:
        """After a lost commit race: the loop's first such retry goes at once, later ones wait as `wait` does.

        Losing v+1 means another writer committed it, so the table moved on: a handle that was behind by other
        writers' commits (a producer sharing partitions with others, idle while they wrote) loses once and wins
        on the reloaded snapshot. Only a second loss in one loop is contention, which the jittered waits spread.
        Waiting changes when the retry decides, never what (it decides on the reloaded snapshot either way).
        False, without retrying, once the deadline has passed.
        """
        if self.retries == 0 and not self.expired():
            self.retries = self._immediate = 1
            return True
        return self.wait()


def check_backoff_bounds(backoff_ms: int, backoff_max_ms: int) -> None:
    """Refuse a max below the base (Kafka would silently use the max as a constant backoff)."""
    if backoff_max_ms < backoff_ms:
        raise InvalidConfig(
            f"config {BACKOFF_MAX_KEY}={backoff_max_ms} is below {BACKOFF_KEY}={backoff_ms}: "
            f"the backoff starts at {BACKOFF_KEY} and grows up to {BACKOFF_MAX_KEY}",
            key=BACKOFF_MAX_KEY,
        )


DEFAULT_POLICY = RetryPolicy()

__all__ = ["Backoff", "DEFAULT_POLICY", "RetryPolicy", "check_backoff_bounds"]
