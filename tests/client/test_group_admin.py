"""AdminClient's consumer-group calls, shaped like confluent-kafka's, on real tables (S6, S7.3, S8.3)."""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog import OFFSET_INVALID, AdminClient, ConsumerGroupTopicPartitions, Producer, TopicPartition
from lakelog.client.admin.groups import ConsumerGroupState
from lakelog.coordinator.group import GroupMetadata, Heartbeat
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.errors import (
    GroupIdNotFound,
    InvalidGroupId,
    InvalidRequest,
    NonEmptyGroup,
    StaleMemberEpoch,
    UnknownTopicOrPartition,
    UnstableOffsetCommit,
)

pytestmark = pytest.mark.roots("local", "s3")


@pytest.fixture
def admin(lake) -> AdminClient:
    return AdminClient({"lakelog.root": lake})


@pytest.fixture
def topic(lake, make_topic) -> str:
    name = make_topic(partitions=2, name="orders")
    producer = Producer({"lakelog.root": lake, "linger.ms": 600_000})
    for n in range(10):
        producer.produce(name, f"v{n}", partition=n % 2)
    producer.flush()
    return name


def join(lake: str, group: str, topic: str) -> str:
    """A member that joins and then stays silent (it stays until its session timeout)."""
    return GroupCoordinator(lake).heartbeat(Heartbeat(group, "", 0, (topic,), frozenset())).member_id


def offsets(requests) -> dict[tuple[str, int], int]:
    return {(p.topic, p.partition): p.offset for p in requests.topic_partitions}


def test_list_and_describe_consumer_groups_with_states_members_and_epochs(lake, admin, topic):
    member_id = join(lake, "live", topic)
    GroupCoordinator(lake).commit_offsets("idle", "", -1, {(topic, 0): (3, "")})
    listed = admin.list_consumer_groups().result()
    assert sorted((g.group_id, g.state) for g in listed.valid) == [
        ("idle", ConsumerGroupState.EMPTY),
        ("live", ConsumerGroupState.STABLE),
    ]
    only_empty = admin.list_consumer_groups(states=[ConsumerGroupState.EMPTY]).result()
    assert [g.group_id for g in only_empty.valid] == ["idle"]
    description = admin.describe_consumer_groups(["live"])["live"].result()
    assert (description.state, description.partition_assignor, description.group_epoch) == (
        ConsumerGroupState.STABLE,
        "uniform",
        1,
    )
    [member] = description.members
    assert (member.member_id, member.member_epoch, member.revocation_epoch) == (member_id, 1, 0)
    assert member.assignment == member.target_assignment == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with pytest.raises(GroupIdNotFound):
        admin.describe_consumer_groups(["nobody"])["nobody"].result()


def test_a_second_member_makes_the_group_reconciling_until_the_first_revokes(lake, admin, topic):
    join(lake, "g", topic)
    join(lake, "g", topic)
    description = admin.describe_consumer_groups(["g"])["g"].result()
    assert description.state is ConsumerGroupState.RECONCILING
    assert sorted(len(m.target_assignment) for m in description.members) == [1, 1]


def test_S7_3_list_consumer_group_offsets_with_require_stable_refuses_pending_ones(lake, admin, topic):
    GroupCoordinator(lake).commit_offsets("g", "", -1, {(topic, 0): (2, "meta")})
    producer = Producer({"lakelog.root": lake, "transactional.id": "t"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic, 1, 4)], GroupMetadata("g"))
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g")])["g"].result()
    assert offsets(listed) == {(topic, 0): 2} and listed.topic_partitions[0].metadata == "meta"
    asked = [ConsumerGroupTopicPartitions("g", [TopicPartition(topic, 0), TopicPartition(topic, 1)])]
    assert offsets(admin.list_consumer_group_offsets(asked)["g"].result()) == {(topic, 0): 2, (topic, 1): OFFSET_INVALID}
    with pytest.raises(UnstableOffsetCommit):
        admin.list_consumer_group_offsets(asked, require_stable=True)["g"].result()
    producer.commit_transaction()
    assert offsets(admin.list_consumer_group_offsets(asked, require_stable=True)["g"].result()) == {
        (topic, 0): 2,
        (topic, 1): 4,
    }


def test_alter_consumer_group_offsets_only_while_the_group_is_empty(lake, admin, topic):
    request = [ConsumerGroupTopicPartitions("g", [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 1)])]
    assert offsets(admin.alter_consumer_group_offsets(request)["g"].result()) == {(topic, 0): 5, (topic, 1): 1}
    assert offsets(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g")])["g"].result()) == {
        (topic, 0): 5,
        (topic, 1): 1,
    }
    join(lake, "g", topic)
    before = table_fingerprint(lake)
    with pytest.raises(NonEmptyGroup, match="STABLE with 1 member"):
        admin.alter_consumer_group_offsets(request)["g"].result()
    assert table_fingerprint(lake) == before
    # The coordinator itself refuses a commit from outside the protocol while members exist (S6.4).
    with pytest.raises(StaleMemberEpoch):
        GroupCoordinator(lake).commit_offsets("g", "", -1, {(topic, 0): (6, "")})


@pytest.mark.parametrize(
    "partitions, error",
    [
        ([TopicPartition("orders", 0, -3)], InvalidRequest),
        ([TopicPartition("orders", 0, 1), TopicPartition("orders", 7, 1)], UnknownTopicOrPartition),
        ([TopicPartition("nowhere", 0, 1)], UnknownTopicOrPartition),
    ],
)
def test_S8_3_a_refused_alter_writes_nothing(lake, admin, topic, partitions, error):
    before = table_fingerprint(lake)
    with pytest.raises(error):
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("g", partitions)])["g"].result()
    with pytest.raises(InvalidGroupId):
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("bad group", partitions)])["bad group"].result()
    assert table_fingerprint(lake) == before


def test_delete_consumer_groups_removes_an_empty_group_and_its_offsets(lake, admin, topic):
    GroupCoordinator(lake).commit_offsets("done", "", -1, {(topic, 0): (2, "")})
    join(lake, "busy", topic)
    futures = admin.delete_consumer_groups(["done", "busy", "nobody"])
    assert futures["done"].result() is None
    with pytest.raises(NonEmptyGroup):
        futures["busy"].result()
    with pytest.raises(GroupIdNotFound):
        futures["nobody"].result()
    assert [g.group_id for g in admin.list_consumer_groups().result().valid] == ["busy"]
    assert offsets(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("done")])["done"].result()) == {}


def test_reading_groups_of_a_root_without_groups_creates_nothing(lake, admin, topic):
    before = table_fingerprint(lake)
    assert admin.list_consumer_groups().result().valid == []
    with pytest.raises(GroupIdNotFound):
        admin.describe_consumer_groups(["g"])["g"].result()
    asked = [ConsumerGroupTopicPartitions("g", [TopicPartition(topic, 0)])]
    assert offsets(admin.list_consumer_group_offsets(asked)["g"].result()) == {(topic, 0): OFFSET_INVALID}
    with pytest.raises(InvalidRequest):
        admin.list_consumer_group_offsets(["g"])
    assert table_fingerprint(lake) == before
