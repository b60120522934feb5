"""The producer's record accumulator: when its batches are due (linger.ms), as an invariant over any sequence of use."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from lakelog.client.producer.accumulator import RecordAccumulator

PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]

operation = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(PARTITIONS), st.integers(0, 50)),
    st.tuples(st.just("pop"), st.sampled_from(PARTITIONS), st.just(0)),
    st.tuples(st.just("drain"), st.just(PARTITIONS[0]), st.just(0)),
)


@given(
    linger_ms=st.sampled_from([0, 0.5, 5, 50]),
    max_messages=st.integers(1, 4),
    operations=st.lists(operation, max_size=40),
)
def test_the_due_time_is_the_oldest_open_batch_plus_linger(linger_ms, max_messages, operations):
    """After every step, `due_ms` is the oldest open batch's start plus linger.ms (inf with none open), and at any
    time the producer's one comparison with it agrees with a look at every batch."""
    now = [1_700_000_000_000]
    accumulator = RecordAccumulator(max_messages, 1 << 30, linger_ms, lambda: now[0])
    for name, tp, step_ms in operations:
        now[0] += step_ms
        if name == "append":
            accumulator.append(tp, (None, b"v", None, now[0], None), 1, None, now[0])
        elif name == "pop":
            accumulator.pop(tp)
        else:
            accumulator.drain()
        opened = [batch.created_ms for batch in accumulator._batches.values()]
        assert accumulator.due_ms == (min(opened) + linger_ms if opened else math.inf)
        for later in (0, 1, 49, 50, 51):
            at = now[0] + later
            lingered = [tp for tp, batch in accumulator._batches.items() if at - batch.created_ms >= linger_ms]
            assert accumulator.any_lingered(at) == bool(lingered)
        assert accumulator.lingered() == [
            tp for tp, batch in accumulator._batches.items() if now[0] - batch.created_ms >= linger_ms
        ]
