"""The AdminClient through confluent-kafka's semantics (issue 14, gap 7): topics, partitions, configs, offsets.

Each call is driven as a confluent program drives it (futures per item, result classes with
confluent's fields, KafkaException with Kafka's codes); every refusal leaves the root's bytes
as they were (S8.3).
"""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog import KafkaError, KafkaException, Producer, TopicPartition
from lakelog.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupState,
    ConsumerGroupType,
    DeletedRecords,
    IsolationLevel,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
    TopicCollection,
)
from lakelog.config.loader import defaults
from lakelog.log import list_topics, open_partition, topic_config
from lakelog.log.topic_changes import complete_topic
from lakelog.log.topic_config import TopicConfig
from lakelog.store import Table


@pytest.fixture
def admin(root: str) -> AdminClient:
    return AdminClient({"lakelog.root": root})


def produce(root: str, topic: str, values: list[tuple[int, str]], partition: int = 0) -> None:
    """Append records (timestamp ms, value) to one partition."""
    producer = Producer({"lakelog.root": root, "linger.ms": 600_000})
    for timestamp, value in values:
        producer.produce(topic, value, partition=partition, timestamp=timestamp)
    producer.flush()


def code(future) -> int:
    error = future.exception()
    assert isinstance(error, KafkaException), error
    return error.args[0].code()


def configs(root: str, topic: str, partition: int) -> dict:
    return dict(TopicConfig.from_table_configuration(Table.open(f"{root}/topics/{topic}/{partition}").configuration).values)


# -- delete_topics ---------------------------------------------------------------------------


@pytest.mark.roots("local", "s3")
def test_delete_topics_removes_every_partition_table_and_a_topic_of_that_name_starts_afresh(root, admin, topic):
    name = topic(partitions=3)
    produce(root, name, [(1000, "a"), (2000, "b")], partition=2)
    first_id = admin.describe_topics(TopicCollection([name]))[name].result().topic_id
    futures = admin.delete_topics([name], operation_timeout=30)
    assert futures[name].result() is None
    assert name not in list_topics(root) and name not in admin.list_topics().topics
    assert table_fingerprint(f"{root}/topics/{name}") == []
    admin.create_topics([NewTopic(name, 3)])[name].result()
    description = admin.describe_topics(TopicCollection([name]))[name].result()
    assert [p.high_watermark for p in description.partitions] == [0, 0, 0]
    assert description.topic_id != first_id


def test_S8_3_refused_deletes_leave_the_root_unchanged(root, admin, topic):
    name = topic(partitions=2)
    producer = Producer({"lakelog.root": root, "transactional.id": "t"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(name, "pending", partition=1)
    producer.flush()
    before = table_fingerprint(root)
    futures = admin.delete_topics([name, "missing", "__consumer_offsets"])
    assert code(futures[name]) == KafkaError.CONCURRENT_TRANSACTIONS
    assert code(futures["missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert code(futures["__consumer_offsets"]) == KafkaError.TOPIC_EXCEPTION
    assert table_fingerprint(root) == before
    producer.commit_transaction()
    admin.delete_topics([name])[name].result()
    assert list_topics(root) == []


# -- create_partitions -------------------------------------------------------------------------


def test_create_partitions_grows_the_topic_and_refuses_fewer_or_as_many_with_INVALID_PARTITIONS(root, admin, topic):
    name = topic(partitions=2, config={"segment.files": 50})
    produce(root, name, [(1000, "a")], partition=1)
    before = table_fingerprint(root)
    futures = admin.create_partitions([NewPartitions(name, 1), NewPartitions("missing", 4)])
    assert code(futures[name]) == KafkaError.INVALID_PARTITIONS
    assert "currently has 2 partitions" in str(futures[name].exception())
    assert code(futures["missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert code(admin.create_partitions([NewPartitions(name, 2)])[name]) == KafkaError.INVALID_PARTITIONS
    assert admin.create_partitions([NewPartitions(name, 5)], validate_only=True)[name].result() is None
    assert table_fingerprint(root) == before
    assert admin.create_partitions([NewPartitions(name, 5)])[name].result() is None
    assert sorted(admin.list_topics(name).topics[name].partitions) == [0, 1, 2, 3, 4]
    # Every partition table carries the topic's config, the new count included; old data stays where it was.
    for partition in range(5):
        assert configs(root, name, partition)["num.partitions"] == 5
        assert configs(root, name, partition)["segment.files"] == 50
    assert open_partition(root, name, 1).high_watermark() == 1
    produce(root, name, [(2000, "new")], partition=4)
    assert open_partition(root, name, 4).high_watermark() == 1


# -- configs -----------------------------------------------------------------------------------


def test_describe_configs_gives_a_topics_stored_config_and_the_roots_defaults(root, admin, topic):
    name = topic(config={"retention.ms": 1000})
    resource, broker = ConfigResource(ResourceType.TOPIC, name), ConfigResource("broker", "0")
    futures = admin.describe_configs([resource, broker, ConfigResource(ResourceType.TOPIC, "missing")])
    entries = futures[resource].result()
    assert (entries["retention.ms"].value, entries["retention.ms"].source, entries["retention.ms"].is_default) == (
        "1000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        False,
    )
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert entries["num.partitions"].is_read_only
    root_defaults = futures[broker].result()
    assert root_defaults["transaction.max.timeout.ms"].value == "900000"
    assert all(entry.is_read_only for entry in root_defaults.values())
    assert code(futures[ConfigResource(ResourceType.TOPIC, "missing")]) == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.roots("local", "s3")
def test_incremental_alter_configs_set_delete_append_subtract_reach_every_partition(root, admin, topic):
    name = topic(partitions=3, config={"retention.ms": 1000})
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.bytes", "4096", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    assert admin.incremental_alter_configs([resource])[resource].result() is None
    for partition in range(3):
        stored = configs(root, name, partition)
        assert (stored["retention.bytes"], stored["retention.ms"], stored["cleanup.policy"]) == (
            4096,
            604800000,
            "delete,compact",  # appended after what was there, as Kafka's APPEND
        )
    subtract = ConfigResource(ResourceType.TOPIC, name)
    subtract.add_incremental_config(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    admin.incremental_alter_configs([subtract])[subtract].result()
    assert topic_config(root, name).values["cleanup.policy"] == "compact"
    assert open_partition(root, name, 2).config.compacts and not open_partition(root, name, 2).config.deletes
    # The last one subtracted leaves the empty list, as Kafka 4 stores it: neither retention nor compaction.
    last = _incremental(name, "cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)
    admin.incremental_alter_configs([last])[last].result()
    assert topic_config(root, name).values["cleanup.policy"] == ""
    assert not open_partition(root, name, 2).config.compacts and not open_partition(root, name, 2).config.deletes


def _incremental(name: str, key: str, value: str | None, operation=AlterConfigOpType.SET) -> ConfigResource:
    return ConfigResource(
        ResourceType.TOPIC, name, incremental_configs=[ConfigEntry(key, value, incremental_operation=operation)]
    )


@pytest.mark.parametrize(
    ("key", "value", "operation", "error"),
    [
        ("num.partitions", "1", AlterConfigOpType.SET, KafkaError.INVALID_PARTITIONS),
        ("num.partitions", "3", AlterConfigOpType.SET, KafkaError.INVALID_CONFIG),
        ("retention.ms", "soon", AlterConfigOpType.SET, KafkaError.INVALID_CONFIG),
        ("no.such.key", "1", AlterConfigOpType.SET, KafkaError.INVALID_CONFIG),
        ("retention.ms", "5", AlterConfigOpType.APPEND, KafkaError.INVALID_CONFIG),
        ("cleanup.policy", "remove", AlterConfigOpType.APPEND, KafkaError.INVALID_CONFIG),
    ],
)
def test_S8_3_a_refused_config_change_writes_nothing(root, admin, topic, key, value, operation, error):
    name = topic(partitions=2)
    before = table_fingerprint(root)
    resource = _incremental(name, key, value, operation)
    assert code(admin.incremental_alter_configs([resource])[resource]) == error
    assert table_fingerprint(root) == before


def test_alter_configs_replaces_the_whole_config_keeping_the_partition_count(root, admin, topic):
    name = topic(partitions=2, config={"retention.ms": 1000, "segment.files": 50})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.bytes": "2048"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource])
    assert futures[resource].result() is None
    stored = configs(root, name, 1)
    assert (stored["retention.bytes"], stored["retention.ms"], stored["segment.files"], stored["num.partitions"]) == (
        2048,
        604800000,
        defaults("topic")["segment.files"],
        2,
    )
    before = table_fingerprint(root)
    checked = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "1"})
    assert admin.alter_configs([checked], validate_only=True)[checked].result() is None
    broker = ConfigResource(ResourceType.BROKER, "0", set_config={"transaction.max.timeout.ms": "1"})
    assert code(admin.alter_configs([broker])[broker]) == KafkaError.INVALID_REQUEST
    assert table_fingerprint(root) == before


def test_a_config_change_cut_short_after_partition_0_is_completed_by_the_next_change(root, admin, topic):
    """Partition 0 is the source of truth; a crash after its commit leaves the others behind until the next change."""
    name = topic(partitions=3)
    zero = Table.open(f"{root}/topics/{name}/0")
    changed = TopicConfig.load({**topic_config(root, name).values, "retention.ms": 5000})
    zero.set_configuration(changed.table_configuration())  # the crash: partitions 1 and 2 never changed
    assert [configs(root, name, p)["retention.ms"] for p in range(3)] == [5000, 604800000, 604800000]
    resource = _incremental(name, "max.message.bytes", "2048")
    admin.incremental_alter_configs([resource])[resource].result()
    assert [(configs(root, name, p)["retention.ms"], configs(root, name, p)["max.message.bytes"]) for p in range(3)] == [
        (5000, 2048)
    ] * 3
    versions = [Table.open(f"{root}/topics/{name}/{p}").version for p in range(3)]
    complete_topic(root, name)  # nothing behind: nothing committed
    assert [Table.open(f"{root}/topics/{name}/{p}").version for p in range(3)] == versions


# -- offsets, records, topics, cluster -------------------------------------------------------------


def test_list_offsets_earliest_latest_max_timestamp_and_by_time_under_both_isolation_levels(root, admin, topic):
    name = topic()
    produce(root, name, [(1000, "a"), (5000, "b"), (3000, "c")])
    producer = Producer({"lakelog.root": root, "transactional.id": "t"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(name, "open", partition=0, timestamp=9000)
    producer.flush()
    tp = TopicPartition(name, 0)

    def ask(spec, level=IsolationLevel.READ_UNCOMMITTED):
        [future] = admin.list_offsets({tp: spec}, isolation_level=level).values()
        info = future.result()
        return info.offset, info.timestamp

    assert ask(OffsetSpec.earliest()) == (0, -1)
    assert ask(OffsetSpec.latest()) == (4, -1)
    assert ask(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED) == (3, -1)
    assert ask(OffsetSpec.max_timestamp()) == (3, 9000)
    # Under read_committed the open transaction's record is past the LSO: no answer, as in Kafka.
    assert ask(OffsetSpec.max_timestamp(), IsolationLevel.READ_COMMITTED) == (-1, -1)
    assert ask(OffsetSpec.for_timestamp(2000)) == (1, 5000)
    assert ask(OffsetSpec.for_timestamp(6000), IsolationLevel.READ_COMMITTED) == (-1, -1)
    missing = TopicPartition(name, 7)
    assert code(admin.list_offsets({missing: OffsetSpec.latest()})[TopicPartition(name, 7)]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(TypeError):
        admin.list_offsets({tp: -1})
    with pytest.raises(TypeError):
        admin.list_offsets([tp])
    producer.abort_transaction()


def test_describe_topics_takes_a_TopicCollection_and_gives_confluents_fields(root, admin, topic):
    name = topic(partitions=2)
    futures = admin.describe_topics(TopicCollection([name, "missing"]))
    description = futures[name].result()
    assert (description.name, description.is_internal, description.authorized_operations) == (name, False, None)
    assert len(str(description.topic_id)) == 22  # Kafka's base64 form of a 16-byte id
    [first, second] = description.partitions
    assert (first.id, first.leader.id, [n.id for n in first.replicas], [n.id for n in first.isr]) == (0, 0, [0], [0])
    assert code(futures["missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert admin.describe_topics([name])[name].result().partitions[1].id == 1  # lakelog's list form still works
    cluster = admin.describe_cluster().result()
    assert [node.id for node in cluster.nodes] == [0] and cluster.controller.id == 0 and cluster.cluster_id


def test_delete_records_as_confluent_kafka(root, admin, topic):
    name = topic()
    produce(root, name, [(1000, "a"), (2000, "b"), (3000, "c")])
    request = TopicPartition(name, 0, 2)
    assert admin.delete_records([request])[request].result() == DeletedRecords(low_watermark=2)
    with pytest.raises(ValueError):
        admin.delete_records([TopicPartition(name, -1, 2)])


def test_list_consumer_groups_with_an_empty_set_lists_every_group(root, admin, topic):
    from lakelog.coordinator.group import Heartbeat
    from lakelog.coordinator.group.coordinator import GroupCoordinator

    name = topic()
    GroupCoordinator(root).commit_offsets("idle", "", -1, {(name, 0): (0, "")})
    GroupCoordinator(root).heartbeat(Heartbeat("live", "", 0, (name,), frozenset()))
    assert sorted(g.group_id for g in admin.list_consumer_groups(states=set()).result().valid) == ["idle", "live"]
    assert [g.group_id for g in admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result().valid] == ["idle"]
    assert len(admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result().valid) == 2
    with pytest.raises(TypeError):
        admin.list_consumer_groups(states={"EMPTY"})
    description = admin.describe_consumer_groups(["live"])["live"].result()
    assert (description.coordinator.id, description.type, description.authorized_operations) == (
        0,
        ConsumerGroupType.CONSUMER,
        None,
    )
    [member] = description.members
    assert member.assignment.topic_partitions == [TopicPartition(name, 0)] and member.client_id == ""
    # confluent's classic-protocol state names run in handlers, as KIP-848's nearest states.
    assert ConsumerGroupState.PREPARING_REBALANCING is ConsumerGroupState.ASSIGNING


# -- the client itself ------------------------------------------------------------------------------


def test_broker_only_calls_raise_NOT_IMPLEMENTED(admin):
    from lakelog.admin import AclBinding, ElectionType, ScramMechanism, UserScramCredentialDeletion

    calls = [
        lambda: admin.create_acls([AclBinding(ResourceType.TOPIC, "t", None, "User:a", "*", None, None)]),
        lambda: admin.describe_acls(None),
        lambda: admin.delete_acls([]),
        lambda: admin.describe_user_scram_credentials(),
        lambda: admin.alter_user_scram_credentials([UserScramCredentialDeletion("a", ScramMechanism.SCRAM_SHA_256)]),
        lambda: admin.elect_leaders(ElectionType.PREFERRED),
        lambda: admin.set_sasl_credentials("a", "b"),
    ]
    for call in calls:
        with pytest.raises(KafkaException) as raised:
            call()
        assert raised.value.args[0].code() == -170  # librdkafka's _NOT_IMPLEMENTED
        assert "not implemented by lakelog" in str(raised.value)


def test_a_with_block_closes_the_client_and_poll_waits_and_returns_0(root):
    with AdminClient({"lakelog.root": root}) as admin:
        assert admin.poll(0.01) == 0
        assert len(admin) == 0 and not admin  # confluent's AdminClient has a length and no truth value of its own
    with pytest.raises(RuntimeError, match="AdminClient has been closed"):
        admin.poll(0.001)
    with pytest.raises(RuntimeError, match="AdminClient has been closed"):
        admin.create_topics([NewTopic("t", 1)])
    with pytest.raises(RuntimeError, match="Handle has been closed"):
        admin.list_topics()
    assert admin.__exit__(None, None, None) is None


def test_list_topics_and_list_groups_print_as_confluents_metadata(root, admin, topic):
    from lakelog.coordinator.group import Heartbeat
    from lakelog.coordinator.group.coordinator import GroupCoordinator

    name = topic(partitions=2)
    member_id = GroupCoordinator(root).heartbeat(Heartbeat("g", "", 0, (name,), frozenset())).member_id
    metadata = admin.list_topics(timeout=10)
    assert [str(b) for b in metadata.brokers.values()] == [f"{root}:-1/0"] and metadata.controller_id == 0
    assert (str(metadata.topics[name]), str(metadata.topics[name].partitions[1])) == (name, "1")
    [group] = admin.list_groups(timeout=10)
    assert (str(group), group.state, group.protocol_type, group.protocol) == ("g", "Stable", "consumer", "uniform")
    assert [m.id for m in group.members] == [member_id] and group.error is None
    assert admin.list_groups("other") == []
    missing = admin.list_topics("missing").topics["missing"]
    assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and missing.partitions == {}


def test_a_config_change_that_loses_its_version_to_a_writer_decides_again_on_the_latest_snapshot(root, admin, topic, monkeypatch):
    """The one rule: the change committed to partition 0 is decided on the snapshot it follows; a writer that took
    that version first keeps its record, and the change lands after it."""
    name = topic(partitions=2)
    real = Table.set_configuration
    raced = []

    def racing(table, configuration):
        if not raced and table.uri.endswith(f"{name}/0"):
            raced.append(table.version)
            produce(root, name, [(1000, "raced")], partition=0)  # takes version v+1 first
        return real(table, configuration)

    monkeypatch.setattr(Table, "set_configuration", racing)
    resource = _incremental(name, "retention.ms", "7000")
    admin.incremental_alter_configs([resource])[resource].result()
    zero = Table.open(f"{root}/topics/{name}/0")
    assert zero.version == raced[0] + 2  # the writer's append, then the change
    assert open_partition(root, name, 0).high_watermark() == 1
    assert [configs(root, name, p)["retention.ms"] for p in (0, 1)] == [7000, 7000]


def test_bad_arguments_raise_TypeError_and_ValueError_as_confluents(admin):
    with pytest.raises(TypeError):
        admin.describe_consumer_groups("g")
    with pytest.raises(ValueError):
        admin.delete_consumer_groups([])
    with pytest.raises(TypeError):
        admin.create_partitions([("t", 3)])
    with pytest.raises(ValueError):
        admin.describe_configs([ConfigResource(ResourceType.TOPIC, "t"), ConfigResource("topic", "t")])
    with pytest.raises(ValueError):
        ConfigResource("nonsense", "t")


def test_options_and_requests_are_checked_before_any_future_as_confluents(admin):
    with pytest.raises(TypeError):
        admin.describe_cluster(unknown_operation="it is")
    with pytest.raises(TypeError):
        admin.describe_topics(TopicCollection([]), request_timeout="soon")
    with pytest.raises(ValueError):
        admin.list_offsets({TopicPartition("t", 0): OffsetSpec.earliest()}, request_timeout=-1)
    with pytest.raises(TypeError):
        admin.delete_topics(["t"], validate_only="maybe")
    with pytest.raises(ValueError):
        admin.delete_topics([None, "t"])
    with pytest.raises(TypeError):
        admin.delete_records([TopicPartition(None)])
    with pytest.raises(TypeError):
        admin.incremental_alter_configs([_incremental("t", "retention.ms", "1", operation="SET")])
    with pytest.raises(ValueError):
        admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "t")])
    twice = ConfigResource(
        ResourceType.TOPIC,
        "t",
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    with pytest.raises(KafkaException):
        admin.incremental_alter_configs([twice])
    with pytest.raises(ValueError):
        admin.list_consumer_group_offsets([])
    assert admin.describe_cluster(include_authorized_operations=True, request_timeout=5).result().cluster_id
