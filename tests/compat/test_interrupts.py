"""Ctrl-C wakes a waiting poll() or flush() (confluent-kafka 2.15 raises KeyboardInterrupt between chunks of its
timeout): lakelog's waits are Python sleeps in short steps, so a signal handler that raises runs within one step."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator

import pytest

from lakelog import Consumer, Producer


@pytest.fixture
def interrupt_after() -> Iterator[Callable[[float], None]]:
    """Raise KeyboardInterrupt in this thread after `seconds`, as Python's SIGINT handler does on Ctrl-C."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, handler)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def interrupted_within(call: Callable[[], object]) -> float:
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        call()
    return time.monotonic() - started


def test_an_idle_producers_poll_wakes_on_ctrl_c(root, interrupt_after):
    with Producer({"lakelog.root": root}) as producer:
        interrupt_after(0.2)
        assert interrupted_within(lambda: producer.poll(10)) < 2


def test_a_consumers_poll_and_consume_wake_on_ctrl_c(root, topic, interrupt_after):
    name = topic()
    with Consumer({"lakelog.root": root, "group.id": "g"}) as consumer:
        consumer.subscribe([name])
        for call in (lambda: consumer.poll(10), lambda: consumer.consume(10, 10)):
            interrupt_after(0.2)
            assert interrupted_within(call) < 2
