"""`describe_topic`: a topic's partitions, offsets, files and config, as AdminClient.describe_topics reports them."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from lakelog.client.admin.types import NODE_ID, Node, Uuid
from lakelog.client.types import PartitionDescription, TopicDescription
from lakelog.log import PartitionLog, plan_handles, topic_config
from lakelog.log.partition_file import partition_files
from lakelog.store import Location

# Partitions described side by side: on an object store each is a few small reads that wait on the store.
DESCRIBE_THREADS = 16
T = TypeVar("T")


def describe_topic(root: str | Location, topic: str) -> TopicDescription:
    """A topic's partitions (offsets incl. HW and LSO, files, table version, the node), its config and topic id.

    Each partition is read at its latest version through the process's kept handles (lakelog.log.plan_handles):
    a process that describes a topic again (a console's refresh) refreshes them, two GETs each on an
    object store, instead of opening every partition cold.
    """
    return describe_topic_and(root, topic, _nothing)[0]


def describe_topic_and(root: str | Location, topic: str, also: Callable[[PartitionLog], T]) -> tuple[TopicDescription, list[T]]:
    """`describe_topic`, and `also(log)` of each partition's handle in the same refresh (a console's history of
    the topic, lakelog.client.admin.timeline, costs no request more)."""
    tc = topic_config(root, topic)
    node = Node(NODE_ID, str(root))

    def describe(partition: int) -> tuple[PartitionDescription, str, T]:
        with plan_handles.kept(root, topic, partition) as log:
            return (
                PartitionDescription(
                    id=partition,
                    log_start_offset=log.log_start_offset(),
                    high_watermark=log.high_watermark(),
                    last_stable_offset=log.last_stable_offset(),
                    log_end_offset=log.log_end_offset(),
                    files=len(partition_files(log.table)),
                    table_version=log.version,
                    leader=node,
                    replicas=[node],
                    isr=[node],
                ),
                log.table.table_id,
                also(log),
            )

    if tc.num_partitions == 1:
        described = [describe(0)]
    else:
        with ThreadPoolExecutor(min(tc.num_partitions, DESCRIBE_THREADS), thread_name_prefix="lakelog-describe") as pool:
            described = list(pool.map(describe, range(tc.num_partitions)))
    partitions = [description for description, _, _ in described]
    topic_id = Uuid.of(described[0][1]) if described else None
    description = TopicDescription(topic, partitions, dict(tc.values), topic_id=topic_id, is_internal=topic.startswith("__"))
    return description, [extra for _, _, extra in described]


def _nothing(log: PartitionLog) -> None:
    return None
