"""`describe_topic`: a topic's partitions, offsets, files and config, as AdminClient.describe_topics reports them."""

from __future__ import annotations

from lakelog.client.admin.types import NODE_ID, Node, Uuid
from lakelog.client.types import PartitionDescription, TopicDescription
from lakelog.log import open_partition, topic_config
from lakelog.log.partition_file import partition_files
from lakelog.store import Location


def describe_topic(root: str | Location, topic: str) -> TopicDescription:
    """A topic's partitions (offsets incl. HW and LSO, files, table version, the node), its config and topic id."""
    tc = topic_config(root, topic)
    node = Node(NODE_ID, str(root))
    partitions = []
    topic_id = None
    for partition in range(tc.num_partitions):
        log = open_partition(root, topic, partition)
        if partition == 0:
            topic_id = Uuid.of(log.table.table_id)
        partitions.append(
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
            )
        )
    return TopicDescription(topic, partitions, dict(tc.values), topic_id=topic_id, is_internal=topic.startswith("__"))
