"""The group coordinator's assignors as pure functions (S6.2): properties every assignment keeps, for any members,
subscriptions and partition counts (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.coordinator.group.assignors import ASSIGNORS, assign

TOPICS = ("a", "b", "c")
members = st.dictionaries(
    st.text("mnopqrstuvwxyz", min_size=1, max_size=3), st.sets(st.sampled_from(TOPICS), min_size=1), min_size=1, max_size=6
)
counts = st.fixed_dictionaries({topic: st.integers(0, 12) for topic in TOPICS})


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ASSIGNORS), members, counts)
def test_S6_2_every_subscribed_partition_goes_to_exactly_one_subscriber(assignor, subscriptions, partitions):
    result = assign(assignor, subscriptions, partitions)
    assert set(result) == set(subscriptions)
    owners: dict = {}
    for member, owned in result.items():
        for topic, partition in owned:
            assert topic in subscriptions[member]
            assert (topic, partition) not in owners
            owners[(topic, partition)] = member
    subscribed = {topic for topics in subscriptions.values() for topic in topics}
    assert set(owners) == {(topic, p) for topic in subscribed for p in range(partitions[topic])}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ASSIGNORS), members, counts)
def test_S6_2_an_assignment_is_a_function_of_its_inputs(assignor, subscriptions, partitions):
    assert assign(assignor, subscriptions, partitions) == assign(assignor, dict(reversed(subscriptions.items())), partitions)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ASSIGNORS), st.sets(st.text("mnop", min_size=1, max_size=2), min_size=1, max_size=6), counts)
def test_S6_2_members_of_one_subscription_get_shares_within_one(assignor, names, partitions):
    result = assign(assignor, dict.fromkeys(names, TOPICS), partitions)
    if assignor == "range":
        for topic in TOPICS:  # range balances each topic on its own
            sizes = [sum(1 for t, _ in owned if t == topic) for owned in result.values()]
            assert max(sizes) - min(sizes) <= 1
    else:
        sizes = [len(owned) for owned in result.values()]
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=200, deadline=None)
@given(members, st.integers(0, 12))
def test_S6_2_range_co_partitions_topics_of_equal_partition_count(subscriptions, count):
    """Partition n of every topic of one partition count, subscribed by the same members, has one owner."""
    both = {member: {"a", "b"} for member in subscriptions}
    result = assign("range", both, {"a": count, "b": count, "c": 0})
    owner = {tp: member for member, owned in result.items() for tp in owned}
    assert all(owner[("a", p)] == owner[("b", p)] for p in range(count))


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(("uniform", "cooperative-sticky")),
    st.sets(st.text("mnop", min_size=1, max_size=2), min_size=1, max_size=5),
    counts,
)
def test_S6_2_sticky_assignors_keep_what_a_member_had_within_its_share(assignor, names, partitions):
    before = assign(assignor, dict.fromkeys(names, TOPICS), partitions)
    after = assign(assignor, {**dict.fromkeys(names, TOPICS), "zzz": TOPICS}, partitions, before)
    share = sum(partitions.values()) // (len(names) + 1)
    for member in names:
        assert len(after[member] & before[member]) >= min(len(before[member]), share)
