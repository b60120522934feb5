"""Compaction of the internal logs by record key (S9.3): state(compact(log)) == state(log), as a property.

Random histories of every `__consumer_offsets` record kind and of transaction markers, and of
`__transaction_state` records, are compacted by `record_keys.live_*_offsets`; replaying the kept
records from offset 0 must give the state the whole history gives (what CoordinatorLog.compact
checks before it commits, so a planner that is wrong here only keeps more rows).
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.coordinator import group as g
from lakelog.coordinator import transaction as txn
from lakelog.coordinator.compaction import record_keys
from lakelog.coordinator.runtime.state_log import Marker
from lakelog.log.records import ControlType

GROUPS = ("g1", "g2")
MEMBERS = ("m1", "m2", "m3")
TPS = (("t", 0), ("t", 1))
PRODUCERS = (7, 8)


def group_records():
    group_id = st.sampled_from(GROUPS)
    member_id = st.sampled_from(MEMBERS)
    tp = st.sampled_from(TPS)
    small = st.integers(0, 5)
    return st.one_of(
        st.builds(lambda gid, epoch, deleted: g.GroupRecord(gid, epoch, deleted=deleted), group_id, small, st.booleans()),
        st.builds(
            lambda gid, mid, hb, removed: g.MemberRecord(gid, mid, None, ("t",), 100, 100, hb, removed=removed),
            group_id,
            member_id,
            small,
            st.booleans(),
        ),
        st.builds(
            lambda gid, mid, epoch: g.CurrentRecord(gid, mid, epoch, epoch - 1, 0, frozenset({TPS[epoch % 2]}), frozenset(), {}),
            group_id,
            member_id,
            small,
        ),
        st.builds(lambda gid, epoch, mid: g.TargetRecord(gid, epoch, {mid: frozenset({TPS[0]})}), group_id, small, member_id),
        st.builds(
            lambda gid, tp_, offset, removed: g.OffsetRecord(gid, tp_[0], tp_[1], offset, "", 0, removed=removed),
            group_id,
            tp,
            small,
            st.booleans(),
        ),
        st.builds(
            lambda gid, tp_, offset, pid, epoch: g.OffsetRecord(gid, tp_[0], tp_[1], offset, "", 0, pid, epoch),
            group_id,
            tp,
            small,
            st.sampled_from(PRODUCERS),
            small,
        ),
        st.builds(Marker, st.sampled_from(PRODUCERS), small, st.sampled_from(list(ControlType))),
    )


def replay_group(items):
    state = g.GroupState()
    for item in items:
        if isinstance(item, Marker):
            state = g.replay_marker(state, item.producer_id, item.producer_epoch, item.control)
        else:
            state = g.replay(state, item)
    return g.snapshot_of(state)


@settings(max_examples=400, deadline=None)
@given(st.lists(group_records(), max_size=40))
def test_S9_3_consumer_offsets_compacted_by_record_key_replays_to_the_same_state(records):
    entries = list(enumerate(records))
    kept = record_keys.live_group_offsets(copy.deepcopy(entries))
    assert replay_group([item for offset, item in entries if offset in kept]) == replay_group(records)


def transaction_records():
    return st.builds(
        lambda tid, state, epoch: txn.TransactionMetadata(
            transactional_id=tid,
            producer_id=1,
            previous_producer_id=-1,
            next_producer_id=-1,
            producer_epoch=epoch,
            last_producer_epoch=-1,
            transaction_timeout_ms=60_000,
            state=state,
            partitions=frozenset(),
            txn_start_ms=0,
            txn_last_update_ms=0,
        ),
        st.sampled_from(("a", "b", "c")),
        st.sampled_from(list(txn.TxnState)),
        st.integers(0, 5),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(transaction_records(), max_size=30))
def test_S9_3_transaction_state_compacted_by_transactional_id_replays_to_the_same_state(records):
    entries = list(enumerate(records))
    kept = record_keys.live_transaction_offsets(entries)
    whole, compacted = {}, {}
    for offset, record in entries:
        txn.replay(whole, record)
        if offset in kept:
            txn.replay(compacted, record)
    assert txn.snapshot_of(compacted) == txn.snapshot_of(whole)
    assert len(kept) == len(whole)


def test_S9_3_one_key_per_record_kind():
    keys = {
        record_keys.record_key(g.GroupRecord("g", 1)),
        record_keys.record_key(g.MemberRecord("g", "m", None, (), 1, 1, 0)),
        record_keys.record_key(g.CurrentRecord("g", "m", 1, 0, 0, frozenset(), frozenset(), {})),
        record_keys.record_key(g.TargetRecord("g", 1, {})),
        record_keys.record_key(g.OffsetRecord("g", "t", 0, 1, "", 0)),
        record_keys.record_key(g.OffsetRecord("g", "t", 1, 1, "", 0)),
    }
    assert len(keys) == 6
    assert record_keys.record_key(g.OffsetRecord("g", "t", 0, 9, "x", 5)) == record_keys.offset_key("g", "t", 0)
