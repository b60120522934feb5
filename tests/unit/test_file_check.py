"""A data file's rows held to its add action's statistics (lakelog.log.file_check): dense and key-compacted files."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.errors import CorruptRecord
from lakelog.log.file_check import FileCheck
from lakelog.log.partition_file import PartitionFile


def _check(first: int, last: int, count: int) -> FileCheck:
    return FileCheck(
        PartitionFile(
            path="part-x.parquet",
            min_offset=first,
            max_offset=last,
            num_records=count,
            size_bytes=100,
            min_producer_id=-1,
            max_producer_id=-1,
        ),
        "data file part-x.parquet",
        "/t/part-x.parquet",
    )


def _offsets(values: list[int]) -> pa.ChunkedArray:
    return pa.chunked_array([pa.array(values, pa.int64())])


def test_a_dense_file_must_hold_its_first_and_last_offset_and_its_count() -> None:
    """finding 4: a dense file read whole holds exactly first..last."""
    _check(10, 13, 4).offsets(_offsets([10, 11, 12, 13]), whole=True)
    for wrong in ([10, 11, 12], [0, 1, 2, 3], [10, 11, 12, 14]):
        with pytest.raises(CorruptRecord, match="part-x.parquet"):
            _check(10, 13, 4).offsets(_offsets(wrong), whole=True)


@given(st.sets(st.integers(0, 99), min_size=1, max_size=60), st.data())
def test_a_key_compacted_file_holds_increasing_offsets_in_its_range(kept: set[int], data: st.DataObject) -> None:
    """finding 4: a key-compacted file claims 0..99 and holds fewer rows: any increasing subset passes, and a
    duplicated offset, one outside the range, or a count other than numRecords is CorruptRecord."""
    offsets = sorted(kept)
    check = _check(0, 99, len(offsets))
    check.offsets(_offsets(offsets), whole=True)
    check.offsets(_offsets(offsets[1:]), whole=False)
    if len(offsets) < 100:
        with pytest.raises(CorruptRecord):
            _check(0, 99, len(offsets) + 1).offsets(_offsets(offsets), whole=True)
    doubled = sorted([*offsets, data.draw(st.sampled_from(offsets))])
    with pytest.raises(CorruptRecord, match="strictly increasing|rows were read"):
        _check(0, 99, len(doubled)).offsets(_offsets(doubled), whole=True)
    with pytest.raises(CorruptRecord, match="offsets"):
        _check(0, 99, len(offsets) + 1).offsets(_offsets([*offsets, 100]), whole=True)
