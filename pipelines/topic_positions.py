"""A topic's partition positions as a pipeline reads them through the Admin API, and its output made on first use."""

from __future__ import annotations

import logging

from lakelog import TopicPartition
from lakelog.admin import AdminClient, ConsumerGroupTopicPartitions, IsolationLevel, NewTopic, OffsetSpec
from lakelog.client.roots import partition_count
from lakelog.errors import TopicAlreadyExists, UnknownTopicOrPartition, UnstableOffsetCommit

logger = logging.getLogger(__name__)


def end_offsets(root: str, topic: str) -> dict[int, int]:
    """Where a read_committed reader of each partition ends now: its last stable offset."""
    return latest_offsets(root, topic, IsolationLevel.READ_COMMITTED)


def latest_offsets(root: str, topic: str, isolation_level: IsolationLevel) -> dict[int, int]:
    """Each partition's latest offset: its last stable offset under READ_COMMITTED, else its high watermark (S5.1)."""
    requests = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partition_count(root, topic))}
    futures = AdminClient({"lakelog.root": root}).list_offsets(requests, isolation_level=isolation_level)
    return {tp.partition: futures[tp].result().offset for tp in requests}


def earliest_offsets(root: str, topic: str) -> dict[int, int]:
    """Each partition's log start offset."""
    requests = {TopicPartition(topic, p): OffsetSpec.earliest() for p in range(partition_count(root, topic))}
    futures = AdminClient({"lakelog.root": root}).list_offsets(requests)
    return {tp.partition: futures[tp].result().offset for tp in requests}


def committed_offsets(root: str, group: str, topic: str) -> dict[int, int | None] | None:
    """The group's committed offset of each partition (None for none), or None while a transaction holds one."""
    partitions = [TopicPartition(topic, p) for p in range(partition_count(root, topic))]
    admin = AdminClient({"lakelog.root": root})
    try:
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        listed = admin.list_consumer_group_offsets(request, require_stable=True)[group].result()
    except UnstableOffsetCommit:
        return None
    return {tp.partition: None if tp.offset < 0 else tp.offset for tp in listed.topic_partitions}


def records_behind(root: str, group: str, topic: str) -> dict[int, int] | None:
    """Records of each partition the group has still to commit (only partitions with some), or None while a
    transaction holds an offset. A partition the group never committed counts from its log start offset, where a new
    member begins (`auto.offset.reset=earliest`): an empty or fully deleted one is never behind."""
    committed = committed_offsets(root, group, topic)
    if committed is None:
        return None
    ends, starts = end_offsets(root, topic), earliest_offsets(root, topic)
    positions = {p: max(starts[p], committed.get(p) or 0) for p in ends}
    return {p: ends[p] - positions[p] for p in ends if positions[p] < ends[p]}


def ensure_output(root: str, input_topic: str, output_topic: str) -> None:
    """Create the output topic with the input's partition count if it does not exist yet, as a Kafka producer's
    topic auto-creation would (the input must exist), and say so."""
    inputs = partition_count(root, input_topic)
    try:
        partition_count(root, output_topic)
        return
    except UnknownTopicOrPartition:
        pass
    try:
        AdminClient({"lakelog.root": root}).create_topics([NewTopic(output_topic, num_partitions=inputs)])[output_topic].result()
    except TopicAlreadyExists:
        return  # another run made it meanwhile
    logger.info("created the output topic %s with %d partitions, as the input %s has", output_topic, inputs, input_topic)
