"""The console's history over time (lakelog.client.admin.timeline): pure folds of writes and offset commits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lakelog.client.admin.timeline import Committed, Written, commits_per_bucket, lag_over_time, offsets_over_time

TPS = [("a", 0), ("a", 1), ("b", 0)]

writes_strategy = st.dictionaries(
    st.sampled_from(TPS),
    st.lists(st.tuples(st.integers(0, 1_000), st.integers(1, 50)), max_size=8),
)
commits_strategy = st.lists(st.tuples(st.integers(0, 1_000), st.sampled_from(TPS), st.integers(0, 60)), max_size=8)


def as_writes(drawn: dict) -> dict:
    """Each partition's writes in time order with ends that never fall (as writes_of gives them)."""
    writes = {}
    for tp, pairs in drawn.items():
        reached, each = 0, []
        for time_ms, grow in sorted(pairs):
            reached += grow
            each.append(Written(time_ms, reached))
        writes[tp] = each
    return writes


@given(writes_strategy, commits_strategy)
def test_S6_1_the_last_lag_is_every_committed_partitions_end_less_its_last_commit(drawn, drawn_commits):
    writes = as_writes(drawn)
    commits = sorted((Committed(t, tp[0], tp[1], offset) for t, tp, offset in drawn_commits), key=lambda c: c.time_ms)
    points = lag_over_time(commits, writes, now_ms=2_000)
    if not commits:
        assert points == []
        return
    last_commit: dict = {}
    for commit in commits:  # the last in time order (ties: in the order given, as the fold takes them)
        last_commit[(commit.topic, commit.partition)] = commit.offset
    expected = sum(max((writes.get(tp) or [Written(0, 0)])[-1].end_offset - offset, 0) for tp, offset in last_commit.items())
    assert points[-1] == (2_000, expected)
    assert [t for t, _ in points] == sorted(t for t, _ in points)
    assert all(value >= 0 for _, value in points)


@given(writes_strategy)
def test_offsets_over_time_ends_at_the_sum_of_the_partitions_ends_and_never_falls(drawn):
    writes = {TPS.index(tp): each for tp, each in as_writes(drawn).items()}
    points = offsets_over_time(writes)
    assert [value for _, value in points] == sorted(value for _, value in points)
    assert (points[-1][1] if points else 0) == sum(each[-1].end_offset for each in writes.values() if each)


@given(st.lists(st.integers(0, 999)), st.integers(1, 30))
def test_commits_per_bucket_counts_each_time_in_the_span_once(times, buckets):
    counts = commits_per_bucket(times, 0, 1_000, buckets)
    assert len(counts) == buckets and sum(counts) == len(times)
    assert commits_per_bucket([1_000, -1], 0, 1_000, buckets) == [0] * buckets
