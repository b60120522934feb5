"""What an append knows of its rows without a pass over them equals what a pass computes (lakelog/log/records.py,
lakelog/log/producer_state.py): the add action's statistics (data skipping, offset ranges, S9.1) and the producer's
entry the log keeps in hand (S3.5, S9.4)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.log.partition_file import partition_file
from lakelog.log.producer_state import PRODUCER_TAG, STATE_COLUMNS, batch_entry, entry_tag, fold, tagged_entries
from lakelog.log.records import (
    MAX_EPOCH,
    MAX_SEQUENCE,
    BatchHeader,
    ControlType,
    conform_payload,
    payload_table,
    stamp,
    stamped_statistics,
)
from lakelog.store.delta.actions import add_action
from lakelog.store.delta.data_file import data_file
from lakelog.store.delta.file_stats import file_statistics

NOW_MS = 1_700_000_000_000


@st.composite
def batches(draw):
    """A payload (keys, values, timestamps: each column absent, all null, or mixed) and how it is stamped."""
    count = draw(st.integers(1, 40))
    values = draw(st.lists(st.one_of(st.none(), st.binary(max_size=3)), min_size=count, max_size=count))
    keys = draw(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.binary(max_size=3)), min_size=count, max_size=count)))
    timestamps = draw(st.one_of(st.none(), st.lists(st.integers(0, 2 * NOW_MS), min_size=count, max_size=count)))
    control = draw(st.one_of(st.none(), st.sampled_from(list(ControlType))))
    if control is not None:
        header = BatchHeader(draw(st.integers(0, 2**40)), draw(st.integers(0, MAX_EPOCH)), 0, is_transactional=True)
    elif draw(st.booleans()):
        header = BatchHeader()  # no producer id
    else:
        # Base sequences near the wrap too (S3.1).
        base = draw(st.one_of(st.integers(0, 100), st.integers(MAX_SEQUENCE - 50, MAX_SEQUENCE)))
        header = BatchHeader(
            draw(st.integers(0, 2**40)), draw(st.integers(0, MAX_EPOCH)), base, is_transactional=draw(st.booleans())
        )
    payload = conform_payload(payload_table(values, keys=keys, timestamps_ms=timestamps))
    if timestamps is not None and draw(st.booleans()):
        # Some timestamps null: stamping fills them with the log's clock.
        mask = pa.array(draw(st.lists(st.booleans(), min_size=count, max_size=count)))
        payload = payload.set_column(
            0, "timestamp", pa.compute.if_else(mask, pa.scalar(None, payload.schema[0].type), payload[0])
        )
    return payload, draw(st.integers(0, 2**40)), header, control


@settings(deadline=None, max_examples=300)  # builds Arrow tables: timings vary with the machine's load
@given(batches())
def test_the_statistics_of_a_stamped_batch_are_those_of_its_rows(batch):
    payload, base_offset, header, control = batch
    rows = stamp(payload, base_offset, header, NOW_MS * 1000, control)
    assert stamped_statistics(payload, base_offset, header, control) == file_statistics(rows)


@settings(deadline=None, max_examples=300)
@given(batches(), st.integers(0, 2 * NOW_MS))
def test_S3_5_the_entry_a_stamped_batch_leaves_is_the_fold_of_its_rows(batch, append_time_ms):
    payload, base_offset, header, control = batch
    rows = stamp(payload, base_offset, header, NOW_MS * 1000, control)
    last_timestamp_ms = rows.column("timestamp")[rows.num_rows - 1].value // 1000
    entry = batch_entry(header, base_offset, rows.num_rows, last_timestamp_ms, append_time_ms, control is not None)
    folded = fold(rows.select(STATE_COLUMNS), append_time_ms)
    assert folded.get(header.producer_id) == entry
    assert len(folded) == (0 if entry is None else 1)


@settings(deadline=None, max_examples=300)
@given(batches(), st.integers(0, 2 * NOW_MS))
def test_S3_5_the_add_action_of_a_stamped_batch_tells_what_its_rows_leave(batch, append_time_ms):
    """The add action an append commits (statistics, append time and the producer tag) gives, with no read, the
    entries a fold of the file's rows gives (ProducerIndex folds another writer's batches so)."""
    payload, base_offset, header, control = batch
    rows = stamp(payload, base_offset, header, NOW_MS * 1000, control)
    last_timestamp_ms = rows.column("timestamp")[rows.num_rows - 1].value // 1000
    entry = batch_entry(header, base_offset, rows.num_rows, last_timestamp_ms, append_time_ms, control is not None)
    tags = None if entry is None else {PRODUCER_TAG: entry_tag(entry)}
    add = add_action("part-0.parquet", 1, append_time_ms, True, stamped_statistics(payload, base_offset, header, control), tags)
    assert tagged_entries(partition_file(data_file(add["add"]))) == fold(rows.select(STATE_COLUMNS), append_time_ms)


def test_a_producer_tag_that_disagrees_with_the_statistics_is_not_taken():
    """A tag naming another producer id or another last offset than the statistics, or not six integers, is
    ignored: the file is read instead."""
    header = BatchHeader(7, 1, 0)
    payload = conform_payload(payload_table([b"a", b"b"]))
    statistics = stamped_statistics(payload, 10, header)
    good = entry_tag(batch_entry(header, 10, 2, NOW_MS, NOW_MS, False))

    def taken(tag: str) -> bool:
        add = add_action("part-0.parquet", 1, NOW_MS, True, statistics, {PRODUCER_TAG: tag})
        return tagged_entries(partition_file(data_file(add["add"]))) is not None

    assert taken(good)
    assert not taken(good.replace("7,", "8,", 1))  # another producer id
    assert not taken(good.replace(",11,", ",12,"))  # another last offset
    assert not taken(good[:-1] + "2")  # not a flag
    assert not taken("7,1,1")
    assert not taken("garbage")
    no_tag = add_action("part-0.parquet", 1, NOW_MS, True, statistics)
    assert tagged_entries(partition_file(data_file(no_tag["add"]))) is None
