"""How a Spark read's pieces are packed into tasks (pyspark_lakelog.source.pack), as Spark packs files: the rule
is an invariant over any costs, so it is checked over generated ones."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pyspark_lakelog.source import OPEN_COST_BYTES, pack

MiB = 1 << 20
costs_st = st.lists(st.integers(OPEN_COST_BYTES, OPEN_COST_BYTES + 300 * MiB), max_size=200)
max_bytes_st = st.integers(OPEN_COST_BYTES, 512 * MiB)
wanted_st = st.integers(1, 64)


def limit_of(costs, max_bytes, wanted):
    return min(max_bytes, max(OPEN_COST_BYTES, sum(costs) // wanted))


@given(costs_st, max_bytes_st, wanted_st)
def test_every_piece_is_in_one_task_in_order(costs, max_bytes, wanted):
    tasks = pack(costs, max_bytes, wanted)
    assert [index for task in tasks for index in task] == list(range(len(costs)))
    assert all(len(task) > 0 for task in tasks)


@given(costs_st, max_bytes_st, wanted_st)
def test_a_task_of_several_pieces_stays_within_the_limit_and_no_task_could_take_the_next_piece(costs, max_bytes, wanted):
    limit = limit_of(costs, max_bytes, wanted)
    tasks = pack(costs, max_bytes, wanted)
    for task, following in zip(tasks, [*tasks[1:], None], strict=False):
        size = sum(costs[i] for i in task)
        assert len(task) == 1 or size <= limit
        if following is not None:
            assert size + costs[following[0]] > limit  # greedy: it was full


@given(st.integers(1, 200), st.integers(0, 64 * MiB), max_bytes_st, wanted_st)
def test_pieces_of_one_size_make_at_least_the_wanted_tasks_where_there_are_that_many(n, size, max_bytes, wanted):
    tasks = pack([size + OPEN_COST_BYTES] * n, max_bytes, wanted)
    assert len(tasks) >= min(wanted, n)


def test_small_partitions_share_a_task_and_large_ones_do_not():
    tiny = OPEN_COST_BYTES + 2_000
    # As Spark's: each piece costs its open cost too, so 31 tiny pieces fill a task of maxPartitionBytes.
    assert [len(task) for task in pack([tiny] * 100, 128 * MiB, 2)] == [31, 31, 31, 7]
    assert [len(task) for task in pack([tiny] * 100, 128 * MiB, 10)] == [10] * 10
    big = OPEN_COST_BYTES + 100 * MiB
    assert [len(task) for task in pack([big] * 4, 128 * MiB, 2)] == [1, 1, 1, 1]
    assert pack([], 128 * MiB, 2) == []
