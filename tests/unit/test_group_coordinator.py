"""The pure group coordinator (lakelog/coordinator/group/): one test per rule of S6 and S7, the
KAFKA-19779 scenario, and a hypothesis state machine that keeps S6.2 and S6.3 under random traffic."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lakelog.coordinator import group as g
from lakelog.coordinator.group import GroupConfig, GroupMetadata, GroupState, Heartbeat
from lakelog.errors import (
    FencedInstanceId,
    FencedMemberEpoch,
    IllegalGeneration,
    InvalidGroupId,
    InvalidRequest,
    NonEmptyGroup,
    ProducerFenced,
    StaleMemberEpoch,
    UnknownMemberId,
    UnstableOffsetCommit,
)
from lakelog.log.records import ControlType

GROUP = "grp"
TOPICS = {"in": 4, "other": 2}


class Coordinator:
    """A pure harness: applies each outcome's records to one GroupState, as the runtime would."""

    def __init__(self, config: GroupConfig = GroupConfig()) -> None:
        self.state = GroupState()
        self.config = config
        self.now = 1_000
        self._ids = itertools.count()

    @property
    def group(self) -> g.Group | None:
        return self.state.group(GROUP)

    def apply(self, outcome):
        if outcome.ok:
            for record in outcome.records:
                g.replay(self.state, record)
        else:
            assert outcome.records == (), "a refused request has no records (S8.3)"
        return outcome

    def heartbeat(self, member_id="", epoch=0, owned=(), topics=("in",), instance_id=None, session_timeout_ms=45_000):
        request = Heartbeat(GROUP, member_id, epoch, tuple(topics), frozenset(owned), instance_id, session_timeout_ms)
        new_id = f"m{next(self._ids)}" if epoch == 0 else None
        return self.apply(g.heartbeat(self.group, request, TOPICS, self.now, self.config, new_id))

    def ok(self, outcome):
        assert outcome.ok, outcome.error
        return outcome.response

    def ok_records(self, outcome):
        assert outcome.ok, outcome.error
        return outcome.records

    def join(self, **kwargs):
        return self.ok(self.heartbeat(**kwargs))

    def settle(self, responses: dict[str, g.HeartbeatResponse], rounds: int = 6) -> dict[str, g.HeartbeatResponse]:
        """Heartbeat every member, reporting what it owns, until nothing changes."""
        for _ in range(rounds):
            changed = False
            for member_id, response in list(responses.items()):
                again = self.ok(self.heartbeat(member_id, response.member_epoch, response.assignment))
                changed |= again != response
                responses[member_id] = again
            if not changed:
                break
        return responses

    def commit(self, member_id, epoch, partitions, offset=10):
        return self.apply(
            g.commit_offsets(
                self.group, GROUP, member_id, epoch, dict.fromkeys(partitions, (offset, "")), self.now, config=self.config
            )
        )


def all_partitions(topic="in"):
    return {(topic, p) for p in range(TOPICS[topic])}


# -- S6.1 --------------------------------------------------------------------------------------


def test_S6_1_committed_offset_is_stored_per_partition_and_fetched():
    c = Coordinator()
    a = c.join()
    c.ok(c.commit(a.member_id, a.member_epoch, [("in", 0)], offset=42))
    fetched = c.ok(g.fetch_offsets(c.group, [("in", 0), ("in", 1)], require_stable=True))
    assert fetched[("in", 0)].offset == 42 and fetched[("in", 1)] is None


def test_S6_1_manual_commits_need_an_empty_group():
    c = Coordinator()
    assert c.commit("", -1, [("in", 0)]).ok
    c.join()
    assert isinstance(c.commit("", -1, [("in", 0)]).error, StaleMemberEpoch)


# -- S6.2 --------------------------------------------------------------------------------------


def test_S6_2_join_bumps_group_epoch_and_partitions_move_only_after_revocation():
    c = Coordinator()
    a = c.join()
    assert a.member_epoch == 1 and a.assignment == all_partitions()
    b = c.join()
    assert c.group.group_epoch == 2
    assert b.assignment == frozenset()  # a still owns everything
    a2 = c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment))
    assert a2.member_epoch == 1 and len(a2.assignment) == 2  # revoke first, epoch unchanged
    b2 = c.ok(c.heartbeat(b.member_id, b.member_epoch, b.assignment))
    assert b2.assignment == frozenset()  # a has not confirmed the revocation yet
    a3 = c.ok(c.heartbeat(a.member_id, a2.member_epoch, a2.assignment))
    assert a3.member_epoch == 2
    b3 = c.ok(c.heartbeat(b.member_id, b2.member_epoch, b2.assignment))
    assert b3.assignment == all_partitions() - a3.assignment


def test_S6_2_a_member_still_reporting_revoked_partitions_keeps_its_epoch():
    c = Coordinator()
    a = c.join()
    c.join()
    a2 = c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment))
    again = c.ok(c.heartbeat(a.member_id, a2.member_epoch, a.assignment))  # still holds all four
    assert again.member_epoch == 1 and c.group.members[a.member_id].current.pending_revocation


def test_S6_2_leave_frees_partitions_and_bumps_the_group_epoch():
    c = Coordinator()
    responses = c.settle({r.member_id: r for r in (c.join(), c.join())})
    leaver = sorted(responses)[0]
    epoch_before = c.group.group_epoch
    c.ok(c.heartbeat(leaver, -1))
    assert leaver not in c.group.members and c.group.group_epoch == epoch_before + 1
    [(stayer, response)] = [(m, r) for m, r in responses.items() if m != leaver]
    final = c.settle({stayer: response})
    assert final[stayer].assignment == all_partitions()


def test_S6_2_range_assignor_splits_each_topic():
    assert g.assign("range", {"a": ["in"], "b": ["in"]}, {"in": 5}) == {
        "a": frozenset({("in", 0), ("in", 1), ("in", 2)}),
        "b": frozenset({("in", 3), ("in", 4)}),
    }
    with pytest.raises(InvalidRequest):
        g.assign("sticky", {"a": ["in"]}, {"in": 1})  # the classic eager sticky assignor is not one of them


def test_S6_2_uniform_assignor_is_balanced_and_sticky():
    first = g.assign("uniform", {"a": ["in"], "b": ["in"]}, {"in": 4})
    assert sorted(len(v) for v in first.values()) == [2, 2]
    second = g.assign("uniform", {"a": ["in"], "b": ["in"], "c": ["in"]}, {"in": 4}, first)
    # The newcomer gets a share: a ceiling quota for everyone would let a and b keep all four.
    assert sorted(len(v) for v in second.values()) == [1, 1, 2]
    for member in ("a", "b"):
        assert second[member] <= first[member]  # old members only give up, nothing moves between them
    assert set().union(*second.values()) == all_partitions()


@settings(max_examples=300, deadline=None)
@given(
    members=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True),
    partitions=st.integers(0, 20),
    # The previous target: an owner (maybe departed, maybe none) per partition, some past today's count.
    previous_owners=st.lists(st.sampled_from("abcdefghij") | st.none(), max_size=24),
)
@example(members=["a", "b", "c"], partitions=4, previous_owners=["a", "a", "b", "b"])  # c joins two members of 2
def test_S6_2_uniform_assignor_balances_any_group_and_keeps_each_members_share(members, partitions, previous_owners):
    """One subscription, any previous target: every partition has exactly one owner, shares differ by at
    most one, and a member keeps what it had up to its share."""
    previous: dict = {}
    for p, owner in enumerate(previous_owners):
        if owner is not None:
            previous[owner] = previous.get(owner, frozenset()) | {("in", p)}
    result = g.assign("uniform", {member: ["in"] for member in members}, {"in": partitions}, previous)
    owned = [tp for tps in result.values() for tp in tps]
    assert sorted(owned) == sorted(set(owned)) == [("in", p) for p in range(partitions)]
    sizes = [len(tps) for tps in result.values()]
    assert max(sizes) - min(sizes) <= 1
    share = partitions // len(members)
    for member in members:
        had = {tp for tp in previous.get(member, frozenset()) if tp[1] < partitions}
        assert len(result[member] & had) >= min(len(had), share)


# -- S6.3 / S6.4 / KAFKA-19779 ------------------------------------------------------------------


def test_S6_3_revocation_epoch_is_the_member_epoch_before_the_revoking_bump():
    c = Coordinator()
    a = c.join()
    c.join()
    a2 = c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment))
    c.ok(c.heartbeat(a.member_id, a2.member_epoch, a2.assignment))
    current = c.group.members[a.member_id].current
    assert (current.revocation_epoch, current.member_epoch) == (1, 2)
    assert current.revocation_epoch < current.member_epoch <= c.group.target_epoch <= c.group.group_epoch


def test_S6_4_KAFKA_19779_bump_without_revocation_accepts_the_old_epoch_then_revocation_refuses_it():
    """Owning P1 at epoch 1, bumped to 2 without revoking P1: a commit at epoch 1 is accepted.
    After a revocation moves the member 2 -> 3, a commit at epoch 2 is refused."""
    c = Coordinator()
    a = c.join(topics=("in",))
    assert a.member_epoch == 1 and ("in", 1) in a.assignment
    # Subscribing to one more topic bumps the epoch and revokes nothing.
    a2 = c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment, topics=("in", "other")))
    assert a2.member_epoch == 2 and a.assignment <= a2.assignment
    assert c.commit(a.member_id, 1, [("in", 1)]).ok  # the old epoch is still good (an exact check would refuse)
    # A second member joins: the first must revoke, and moves 2 -> 3.
    b = c.join(topics=("in", "other"))
    a3 = c.ok(c.heartbeat(a.member_id, a2.member_epoch, a2.assignment, topics=("in", "other")))
    a4 = c.ok(c.heartbeat(a.member_id, a3.member_epoch, a3.assignment, topics=("in", "other")))
    assert (a3.member_epoch, a4.member_epoch) == (2, 3)
    kept = sorted(a4.assignment)[0]
    refused = c.commit(a.member_id, 2, [kept])
    assert isinstance(refused.error, StaleMemberEpoch)
    assert c.commit(a.member_id, 3, [kept]).ok
    assert isinstance(c.commit(a.member_id, 4, [kept]).error, StaleMemberEpoch)  # ahead of the coordinator
    assert b.member_id in c.group.members


def test_S6_4_partition_level_revocation_epochs_accept_what_the_member_level_bound_refuses():
    """KAFKA-19779's precise check: the partition the member kept was never revoked, so a commit at the
    epoch before the revoking bump is the owner's, not a zombie's."""
    results = {}
    for partition_level in (False, True):
        c = Coordinator(GroupConfig(partition_level_revocation_epochs=partition_level))
        a = c.join()
        c.join()
        a2 = c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment))
        a3 = c.ok(c.heartbeat(a.member_id, a2.member_epoch, a2.assignment))
        kept = sorted(a3.assignment)[0]
        revoked = sorted(a.assignment - a3.assignment)[0]
        results[partition_level] = (c.commit(a.member_id, 1, [kept]), c.commit(a.member_id, 1, [revoked]))
    member_kept, member_revoked = results[False]
    partition_kept, partition_revoked = results[True]
    assert isinstance(member_kept.error, StaleMemberEpoch) and isinstance(member_revoked.error, StaleMemberEpoch)
    assert partition_kept.ok  # rightly accepted: nobody else ever owned it
    assert isinstance(partition_revoked.error, StaleMemberEpoch)  # the zombie case is still refused


def test_S6_4_unknown_member_and_transactional_errors():
    c = Coordinator()
    a = c.join()
    assert isinstance(c.commit("nobody", 1, [("in", 0)]).error, UnknownMemberId)
    txn = g.commit_transactional_offsets(c.state, GroupMetadata(GROUP, a.member_id, 7), 5, 0, {("in", 0): (1, "")}, c.now)
    assert isinstance(txn.error, IllegalGeneration) and txn.records == ()


# -- S6.5 -------------------------------------------------------------------------------------------


def test_S6_5_session_timeout_removes_the_member_and_its_commits_fail():
    c = Coordinator()
    a = c.join(session_timeout_ms=1_000)
    c.now += 2_000
    outcome = c.apply(g.expire_members(c.group, TOPICS, c.now))
    assert outcome.response == [a.member_id]
    assert isinstance(c.commit(a.member_id, a.member_epoch, [("in", 0)]).error, UnknownMemberId)
    assert isinstance(c.heartbeat(a.member_id, a.member_epoch).error, UnknownMemberId)


SESSION_MS = 45_000
HEARTBEAT_MS = 3_000


def test_S6_5_a_settled_member_writes_only_its_lease_renewals_a_third_of_a_session_apart():
    """Liveness is a lease, not a write per heartbeat: over an hour of heartbeats every 3 s, a settled
    member's heartbeats write nothing but a renewal once a third of its session is left, and its lease
    never runs out in between."""
    c = Coordinator()
    responses = c.settle({r.member_id: r for r in (c.join(), c.join())})
    renewals: dict[str, list[int]] = {member_id: [] for member_id in responses}
    for _ in range(3_600_000 // HEARTBEAT_MS):
        c.now += HEARTBEAT_MS
        for member_id, response in responses.items():
            before = c.group.members[member_id].metadata
            assert not before.lease_expired(c.now)
            outcome = c.heartbeat(member_id, response.member_epoch, response.assignment)
            assert c.ok(outcome) == response, "a settled member's answer does not change"
            if outcome.records:
                [renewal] = outcome.records
                assert renewal == dataclasses.replace(before, last_heartbeat_ms=c.now)
                renewals[member_id].append(c.now)
    for times in renewals.values():
        gaps = {later - earlier for earlier, later in itertools.pairwise(times)}
        assert gaps == {SESSION_MS - SESSION_MS // 3}, "renewed when a third of the session is left"
        assert len(times) == 3_600_000 // gaps.pop()


def test_S6_5_the_lease_expires_exactly_at_its_boundary_and_the_member_is_fenced():
    """Expiry is judged from the lease (last renewal + session.timeout.ms) with the clock passed in:
    alive at the last millisecond of the lease, removed one after; then its commits and heartbeats
    are UnknownMemberId and its partitions go to the others (S6.5, S7.2)."""
    c = Coordinator()
    a, b = c.join(), c.join()
    responses = c.settle({a.member_id: a, b.member_id: b})
    for member_id in (a.member_id, b.member_id):  # each renews its lease, b a second later
        c.now += SESSION_MS - SESSION_MS // 3 if member_id == a.member_id else 1_000
        assert c.heartbeat(member_id, responses[member_id].member_epoch, responses[member_id].assignment).records
    lease = c.group.members[a.member_id].metadata
    assert lease.lease_expires_ms == lease.last_heartbeat_ms + SESSION_MS
    c.now = lease.lease_expires_ms
    assert c.apply(g.expire_members(c.group, TOPICS, c.now)).response == []
    c.now += 1
    assert c.apply(g.expire_members(c.group, TOPICS, c.now)).response == [a.member_id]
    stale = responses[a.member_id]
    assert isinstance(c.commit(a.member_id, stale.member_epoch, [("in", 0)]).error, UnknownMemberId)
    transactional = g.commit_transactional_offsets(
        c.state, GroupMetadata(GROUP, a.member_id, stale.member_epoch), 5, 0, {("in", 0): (1, "")}, c.now
    )
    assert isinstance(transactional.error, UnknownMemberId) and transactional.records == ()
    assert isinstance(c.heartbeat(a.member_id, stale.member_epoch, stale.assignment).error, UnknownMemberId)
    final = c.settle({b.member_id: responses[b.member_id]})
    assert final[b.member_id].assignment == all_partitions()


def test_S6_2_a_join_reaches_settled_members_through_heartbeats_that_only_read():
    """Settled members write nothing, yet a new member's join reaches them: the next heartbeat of each
    reads the new target, revokes, and the joiner gets its share (S6.2)."""
    c = Coordinator()
    responses = c.settle({r.member_id: r for r in (c.join(), c.join())})
    for member_id, response in responses.items():
        c.now += HEARTBEAT_MS
        assert c.heartbeat(member_id, response.member_epoch, response.assignment).records == ()
    joiner = c.join()
    responses[joiner.member_id] = joiner
    settled = c.settle(responses)
    assert sorted(len(r.assignment) for r in settled.values()) == [1, 1, 2]
    assert {r.member_epoch for r in settled.values()} == {c.group.group_epoch}
    writes = [c.heartbeat(m, r.member_epoch, r.assignment).records for m, r in settled.items()]
    assert writes == [(), (), ()], "settled again, heartbeats only read"


def test_S6_2_S6_4_a_join_moves_members_with_nothing_to_revoke_in_its_own_write():
    """A join's commit bumps every member it takes nothing from: they learn at their next heartbeat,
    which writes nothing, may still send the epoch they knew (two joins behind here), and their commits
    at it stay valid, since nothing was revoked (KAFKA-19779)."""
    c = Coordinator()
    responses = c.settle({r.member_id: r for r in (c.join(), c.join())})
    for topics in (("other",), ("other",)):
        joined = c.heartbeat(topics=topics)
        bumped = [r for r in joined.records if isinstance(r, g.CurrentRecord) and r.member_id in responses]
        assert {r.member_id for r in bumped} == set(responses)
        assert {r.member_epoch for r in bumped} == {c.group.group_epoch}
    for member_id, known in responses.items():
        assert c.ok(c.commit(member_id, known.member_epoch, sorted(known.assignment)))
        outcome = c.heartbeat(member_id, known.member_epoch, known.assignment)
        assert outcome.records == () and c.ok(outcome) == dataclasses.replace(known, member_epoch=c.group.group_epoch)


def test_S6_5_a_commit_renews_a_lease_that_is_due_in_the_same_write():
    c = Coordinator()
    a = c.join()
    c.now += SESSION_MS // 3
    assert [type(r) for r in c.ok_records(c.commit(a.member_id, a.member_epoch, [("in", 0)]))] == [g.OffsetRecord]
    c.now += SESSION_MS // 3 + 1
    records = c.ok_records(c.commit(a.member_id, a.member_epoch, [("in", 0)]))
    assert [type(r) for r in records] == [g.MemberRecord, g.OffsetRecord]
    assert c.group.members[a.member_id].metadata.last_heartbeat_ms == c.now


def test_S6_5_rebalance_timeout_removes_a_member_that_never_revokes():
    c = Coordinator()
    a = c.join()
    c.join()
    c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment))  # asked to revoke
    c.now += 400_000
    c.group.members[a.member_id].metadata = c.group.members[a.member_id].metadata.__class__(
        **{**c.group.members[a.member_id].metadata.__dict__, "last_heartbeat_ms": c.now}
    )
    assert a.member_id in c.apply(g.expire_members(c.group, TOPICS, c.now)).response


def test_S6_5_static_member_replaced_by_a_new_instance_is_fenced():
    c = Coordinator()
    old = c.join(instance_id="worker-1")
    new = c.join(instance_id="worker-1")
    assert old.member_id not in c.group.members and new.member_id in c.group.members
    assert isinstance(c.heartbeat(old.member_id, old.member_epoch, instance_id="worker-1").error, FencedInstanceId)
    refused = g.commit_offsets(c.group, GROUP, old.member_id, old.member_epoch, {("in", 0): (1, "")}, c.now, "worker-1")
    assert isinstance(refused.error, FencedInstanceId)


def test_heartbeat_with_an_unknown_epoch_is_fenced_member_epoch():
    c = Coordinator()
    a = c.join()
    assert isinstance(c.heartbeat(a.member_id, a.member_epoch + 5, a.assignment).error, FencedMemberEpoch)


def test_bad_group_ids_and_offsets_are_refused_without_records():
    c = Coordinator()
    for bad in ("", "a/b", "x" * 250):
        outcome = g.heartbeat(None, Heartbeat(bad, "", 0, ("in",), frozenset()), TOPICS, 0, new_member_id="m")
        assert isinstance(outcome.error, InvalidGroupId) and outcome.records == ()
    a = c.join()
    negative = g.commit_offsets(c.group, GROUP, a.member_id, a.member_epoch, {("in", 0): (-1, "")}, c.now)
    assert isinstance(negative.error, InvalidRequest) and negative.records == ()


def test_delete_group_only_when_empty():
    c = Coordinator()
    a = c.join()
    assert isinstance(g.delete_group(c.group, GROUP).error, NonEmptyGroup)
    c.ok(c.heartbeat(a.member_id, -1))
    c.ok(c.apply(g.delete_group(c.group, GROUP)))
    assert c.group is None


# -- S7 ------------------------------------------------------------------------------------------


def test_S7_1_pending_offsets_commit_or_vanish_with_their_marker():
    c = Coordinator()
    a = c.join()
    metadata = GroupMetadata(GROUP, a.member_id, a.member_epoch)
    for producer_id, control in ((1, ControlType.COMMIT), (2, ControlType.ABORT)):
        c.ok(c.apply(g.commit_transactional_offsets(c.state, metadata, producer_id, 0, {("in", producer_id): (50, "")}, c.now)))
        g.replay_marker(c.state, producer_id, 1, control)
    offsets = c.ok(g.fetch_offsets(c.group, [("in", 1), ("in", 2)], require_stable=True))
    assert offsets[("in", 1)].offset == 50 and offsets[("in", 2)] is None


def test_S7_2_zombie_offsets_are_refused_even_with_a_current_producer_epoch():
    c = Coordinator()
    a = c.join()
    c.join()
    a2 = c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment))
    c.ok(c.heartbeat(a.member_id, a2.member_epoch, a2.assignment))  # a moved 1 -> 2, revoking at 1
    stale = GroupMetadata(GROUP, a.member_id, 1)
    outcome = g.commit_transactional_offsets(c.state, stale, 9, 0, {sorted(a.assignment)[0]: (1, "")}, c.now)
    assert isinstance(outcome.error, IllegalGeneration) and outcome.records == ()
    static_gone = GroupMetadata(GROUP, "ghost", 1, "worker-9")
    assert isinstance(
        g.commit_transactional_offsets(c.state, static_gone, 9, 0, {("in", 0): (1, "")}, c.now).error, UnknownMemberId
    )


def test_S7_2_offsets_of_a_finished_transaction_are_fenced_by_the_marker_epoch():
    c = Coordinator()
    a = c.join()
    metadata = GroupMetadata(GROUP, a.member_id, a.member_epoch)
    g.replay_marker(c.state, 4, 3, ControlType.ABORT)  # the sweep aborted epoch 2, next epoch is 3
    late = g.commit_transactional_offsets(c.state, metadata, 4, 2, {("in", 0): (1, "")}, c.now)
    assert isinstance(late.error, ProducerFenced)
    assert g.commit_transactional_offsets(c.state, metadata, 4, 3, {("in", 0): (1, "")}, c.now).ok


def test_S7_3_stable_fetch_refuses_while_a_transactional_commit_is_pending():
    c = Coordinator()
    a = c.join()
    metadata = GroupMetadata(GROUP, a.member_id, a.member_epoch)
    c.ok(c.apply(g.commit_transactional_offsets(c.state, metadata, 1, 0, {("in", 0): (5, "")}, c.now)))
    assert isinstance(g.fetch_offsets(c.group, [("in", 0)], require_stable=True).error, UnstableOffsetCommit)
    assert g.fetch_offsets(c.group, [("in", 1)], require_stable=True).ok  # other partitions are stable
    assert g.fetch_offsets(c.group, [("in", 0)], require_stable=False).response[("in", 0)] is None
    g.replay_marker(c.state, 1, 1, ControlType.COMMIT)
    assert c.ok(g.fetch_offsets(c.group, [("in", 0)], require_stable=True))[("in", 0)].offset == 5


def test_records_round_trip_through_rows():
    c = Coordinator()
    a = c.join()
    c.join()
    c.ok(c.heartbeat(a.member_id, a.member_epoch, a.assignment))
    c.commit(a.member_id, 1, [("in", 0)])
    rebuilt = GroupState()
    for record in _all_records(c):
        g.replay(rebuilt, g.from_row(record.to_row()))
    assert rebuilt.group(GROUP).members.keys() == c.group.members.keys()


def _all_records(c: Coordinator):
    group = c.group
    yield g.GroupRecord(GROUP, group.group_epoch, group.assignor)
    for member in group.members.values():
        yield member.metadata
        yield member.current
    yield group.target
    yield from group.offsets.values()


# -- S6.2 / S6.3 under random traffic (hypothesis stateful) -------------------------------------------


class GroupMachine(RuleBasedStateMachine):
    """Random joins, leaves, heartbeats (current and stale ones), subscription changes, timeouts and
    commits. Invariants: no partition has two owners; RevocationEpoch < MemberEpoch <= TargetEpoch <=
    GroupEpoch for every member; a commit is accepted iff S6.4 says so; a group of one subscription
    has a balanced target."""

    def __init__(self) -> None:
        super().__init__()
        self.c = Coordinator()
        self.clients: dict[str, g.HeartbeatResponse] = {}
        # The response before the last one, per member, to send back late.
        self.previous: dict[str, g.HeartbeatResponse] = {}

    @rule(topics=st.sampled_from([("in",), ("in", "other"), ("other",)]))
    def join(self, topics):
        if len(self.clients) < 5:
            response = self.c.join(topics=topics)
            self.clients[response.member_id] = response

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def heartbeat(self, data):
        member_id = data.draw(st.sampled_from(sorted(self.clients)))
        response = self.clients[member_id]
        topics = self.c.group.members[member_id].metadata.subscribed_topics
        outcome = self.c.heartbeat(member_id, response.member_epoch, response.assignment, topics=topics)
        assert outcome.ok, outcome.error
        self.previous[member_id] = response
        self.clients[member_id] = outcome.response

    @precondition(lambda self: self.previous)
    @rule(data=st.data())
    def stale_heartbeat(self, data):
        """A heartbeat that reports an older response (a late or retried request): accepted or fenced."""
        member_id = data.draw(st.sampled_from(sorted(self.previous)))
        stale = self.previous.pop(member_id)
        topics = self.c.group.members[member_id].metadata.subscribed_topics
        outcome = self.c.heartbeat(member_id, stale.member_epoch, stale.assignment, topics=topics)
        if outcome.ok:
            self.clients[member_id] = outcome.response
        else:
            assert isinstance(outcome.error, FencedMemberEpoch), outcome.error
            # A fenced member leaves under its id and joins again (what the Consumer does, S6.5).
            self.c.ok(self.c.heartbeat(member_id, -1))
            del self.clients[member_id]
            response = self.c.join(topics=topics)
            self.clients[response.member_id] = response

    @precondition(lambda self: self.clients)
    @rule(data=st.data(), topics=st.sampled_from([("in",), ("in", "other"), ("other",)]))
    def resubscribe(self, data, topics):
        member_id = data.draw(st.sampled_from(sorted(self.clients)))
        response = self.clients[member_id]
        outcome = self.c.heartbeat(member_id, response.member_epoch, response.assignment, topics=topics)
        assert outcome.ok, outcome.error
        self.previous.pop(member_id, None)
        self.clients[member_id] = outcome.response

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def leave(self, data):
        member_id = data.draw(st.sampled_from(sorted(self.clients)))
        self.c.ok(self.c.heartbeat(member_id, -1))
        del self.clients[member_id]
        self.previous.pop(member_id, None)

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def session_timeout(self, data):
        member_id = data.draw(st.sampled_from(sorted(self.clients)))
        metadata = self.c.group.members[member_id].metadata
        self.c.group.members[member_id].metadata = metadata.__class__(**{**metadata.__dict__, "last_heartbeat_ms": -(10**9)})
        expired = self.c.ok(self.c.apply(g.expire_members(self.c.group, TOPICS, self.c.now)))
        assert member_id in expired
        for gone in expired:
            self.clients.pop(gone, None)
            self.previous.pop(gone, None)

    @precondition(lambda self: self.clients)
    @rule(data=st.data(), back=st.integers(0, 2))
    def commit(self, data, back):
        member_id = data.draw(st.sampled_from(sorted(self.clients)))
        current = self.c.group.members[member_id].current
        epoch = max(current.member_epoch - back, 0)
        partitions = sorted(current.assigned) or [("in", 0)]
        outcome = self.c.commit(member_id, epoch, partitions[:1])
        assert outcome.ok == (current.revocation_epoch < epoch <= current.member_epoch)

    @invariant()
    def one_owner_per_partition(self):
        group = self.c.group
        if group is None:
            return
        seen: dict = {}
        for member_id, member in group.members.items():
            for tp in member.current.assigned | member.current.pending_revocation:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {member_id}"
                seen[tp] = member_id

    @invariant()
    def epochs_are_ordered(self):
        group = self.c.group
        if group is None:
            return
        for member in group.members.values():
            current = member.current
            assert current.revocation_epoch < current.member_epoch <= group.target_epoch <= group.group_epoch, current

    @invariant()
    def a_snapshot_restores_the_state(self):
        """S8.2: a cold coordinator that loads a snapshot (through JSON, as on disk) has the same state."""
        assert g.state_from_snapshot(json.loads(json.dumps(g.snapshot_of(self.c.state)))) == self.c.state

    @invariant()
    def target_is_balanced_when_everyone_subscribes_alike(self):
        group = self.c.group
        if group is None or group.target is None or not group.members:
            return
        subscriptions = {member.metadata.subscribed_topics for member in group.members.values()}
        if len(subscriptions) == 1 and set(group.target.assignment) == set(group.members):
            sizes = [len(tps) for tps in group.target.assignment.values()]
            assert max(sizes) - min(sizes) <= 1, group.target.assignment


TestGroupMachine = GroupMachine.TestCase
TestGroupMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
