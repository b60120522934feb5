"""The log cleanup's search by name (S9.5): the first version where a condition true up to a point fails."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lakelog.store.upkeep.cleanup import _first_false


@given(st.integers(0, 1_000), st.integers(0, 100_000), st.integers(0, 100_000), st.booleans())
def test_S9_5_the_search_finds_the_first_version_past_a_boundary(low, width, offset, gallop):
    high = low + width
    boundary = low + min(offset, width)  # the first version where the condition fails (high: none does)
    looked: list[int] = []

    def holds(version: int) -> bool:
        assert low <= version < high, "only versions of the range are looked up"
        looked.append(version)
        return version < boundary

    assert _first_false(low, high, holds, gallop=gallop) == boundary
    # Lookups grow with the log2 of the range (bisection) or of the distance to the boundary (galloping).
    span = (boundary - low + 1) if gallop else width + 1
    assert len(looked) <= 2 * span.bit_length() + 1
