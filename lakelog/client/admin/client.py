"""`AdminClient`: the admin calls of confluent_kafka.admin.AdminClient on the topics and groups of a root.

Results come as futures, one per item, resolved before the call returns (there is
no broker to wait for). A root is one cluster of one node (id 0). Time is passed in:
`clock` (milliseconds, the wall clock by default) is what `find_hanging_transactions`
judges transaction timeouts on and the clock of the partition logs `delete_records`
commits to. Calls that need a broker (ACLs, SCRAM, leader election) raise
`_NOT_IMPLEMENTED` (lakelog.client.admin.broker_only).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any

from lakelog import catalog, config
from lakelog.client.admin import configs as admin_configs
from lakelog.client.admin import groups as group_admin
from lakelog.client.admin import transactions as transaction_admin
from lakelog.client.admin.broker_only import BrokerOnlyCalls
from lakelog.client.admin.groups import ConsumerGroupState, ConsumerGroupTopicPartitions, ListConsumerGroupsResult
from lakelog.client.admin.offsets import list_offset
from lakelog.client.admin.requests import (
    check_group_requests,
    check_resources,
    describe_transaction,
    future_of,
    kept_values,
    resolved,
    while_open,
)
from lakelog.client.admin.topics import describe_topic
from lakelog.client.admin.types import (
    NODE_ID,
    BrokerMetadata,
    ConfigResource,
    ConsumerGroupType,
    DeletedRecords,
    DescribeClusterResult,
    GroupMember,
    GroupMetadata,
    IsolationLevel,
    NewPartitions,
    Node,
    OffsetSpec,
    TopicCollection,
)
from lakelog.client.conf import split_callbacks
from lakelog.client.metadata import cluster_metadata
from lakelog.client.types import (
    ClusterMetadata,
    NewTopic,
    TopicPartition,
)
from lakelog.config import storage_options
from lakelog.errors import (
    InvalidArgument,
    InvalidType,
    KafkaException,
)
from lakelog.log import create_topic, open_partition, retention
from lakelog.log.partition import Clock, wall_clock_ms
from lakelog.log.topic_changes import create_partitions, delete_topic
from lakelog.log.topics import validate_new_topic
from lakelog.store import Location, check_root, open_root
from lakelog.store.io.retry import RetryPolicy

logger = logging.getLogger(__name__)


class AdminClient(BrokerOnlyCalls):
    """Admin operations on the topics and groups of `lakelog.root`; a context manager, as confluent-kafka's."""

    def __init__(self, conf: Mapping[str, Any] | None = None, *, clock: Clock = wall_clock_ms, **kwargs: Any) -> None:
        values, _ = split_callbacks(conf, ("error_cb",), kwargs)
        self.config = config.load("admin", values)
        # confluent-kafka's `logger`: this client's own log lines go there (default: this package's loggers).
        self._logger: logging.Logger | logging.LoggerAdapter = self.config.get("logger") or logger
        self._clock = clock
        # Checked when used (`_root`): only create_topics may make a root of a folder or prefix that is none yet.
        self._location = check_root(self.config["lakelog.root"], storage_options(self.config))
        # retry.backoff.ms / retry.backoff.max.ms: the retries of the writes admin operations make.
        self._retry = RetryPolicy.from_config(self.config)
        self._closed = False

    @property
    def _root(self) -> Location:
        """The root, if it is an initialised one (UnresolvedRoot if not, e.g. a typo); a set lookup once it was."""
        return open_root(self._location)

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_exc: Any) -> None:
        """Close the client (confluent-kafka destroys it): every later call raises RuntimeError."""
        self._closed = True

    def __len__(self) -> int:
        # confluent-kafka: requests still queued; a root answers each call before it returns. As in confluent
        # (whose AdminClient, unlike its Producer, defines no truth value), bool(admin) is therefore False.
        return 0

    @while_open
    def poll(self, timeout: float) -> int:
        """Serve queued callbacks: a root queues none, so this waits `timeout` seconds (as librdkafka's
        poll does when idle, so a `while: poll(1.0)` loop does not spin) and returns 0."""
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
            raise InvalidType(f"poll() takes a timeout in seconds, not {timeout!r}")
        if timeout > 0:
            time.sleep(timeout)
        return 0

    # -- topics -----------------------------------------------------------------------------

    @while_open
    def create_topics(self, new_topics: list[NewTopic], validate_only: bool = False, **_timeouts: Any) -> dict[str, Future]:
        """Create each topic; a future per topic resolves to None or raises (TopicAlreadyExists, ...)."""
        if not isinstance(new_topics, (list, tuple)) or not all(isinstance(t, NewTopic) for t in new_topics):
            raise InvalidType("create_topics takes a list of NewTopic")
        futures = {}
        for new_topic in new_topics:
            partitions = None if new_topic.num_partitions == -1 else new_topic.num_partitions
            try:
                if validate_only:
                    validate_new_topic(new_topic.topic, partitions, new_topic.config)
                else:
                    # The explicit admin path: a valid topic makes the root first if it is none yet.
                    create_topic(self._location, new_topic.topic, partitions, new_topic.config)
                futures[new_topic.topic] = resolved()
            except KafkaException as error:
                futures[new_topic.topic] = resolved(error=error)
        return futures

    @while_open
    def delete_topics(self, topics: list[str], **_timeouts: Any) -> dict[str, Future]:
        """Delete each topic's partition tables and its derived views and status (lakelog.log.topic_changes);
        a future per topic resolves to None or raises (UnknownTopicOrPartition, InvalidTopic for `__*`,
        ConcurrentTransactions while a transaction is open in it)."""
        if not isinstance(topics, list):
            raise InvalidType("delete_topics takes a list of topic names")
        if not topics or not all(isinstance(t, str) for t in topics):
            raise InvalidArgument("Expected a non-empty list of topic names to delete")
        return {topic: future_of(self._delete_topic, topic) for topic in topics}

    def _delete_topic(self, topic: str) -> None:
        delete_topic(self._root, topic)
        # A view or status table kept for an earlier topic of the same name would read as the next one's.
        for derived in (catalog.view_path(self._root, topic), catalog.status_path(self._root, topic)):
            derived.io.delete_tree(derived.uri)
        self._logger.info("topic %s deleted", topic)

    @while_open
    def create_partitions(
        self, new_partitions: list[NewPartitions], validate_only: bool = False, **_timeouts: Any
    ) -> dict[str, Future]:
        """Grow each topic to `new_total_count` partitions; a future per topic resolves to None or raises
        InvalidPartitions (fewer than now, or as many), UnknownTopicOrPartition. Keys hash over the new count."""
        if not isinstance(new_partitions, list) or not all(isinstance(p, NewPartitions) for p in new_partitions):
            raise InvalidType("create_partitions takes a list of NewPartitions")
        if not new_partitions:
            raise InvalidArgument("Expected at least one NewPartitions")
        return {request.topic: future_of(self._create_partitions, request, validate_only) for request in new_partitions}

    def _create_partitions(self, request: NewPartitions, validate_only: bool) -> None:
        create_partitions(self._root, request.topic, request.new_total_count, validate_only=validate_only, retry=self._retry)

    @while_open
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """Every topic of the root, or one; a missing topic comes back carrying UNKNOWN_TOPIC_OR_PART, as confluent's."""
        if topic is not None and not isinstance(topic, str):
            raise InvalidType(f"topic must be a str, not {type(topic).__name__}")
        return cluster_metadata(self._root, topic)

    @while_open
    def describe_topics(self, topics: TopicCollection | list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per topic resolving to its TopicDescription (partitions, offsets, config, topic id).

        Takes confluent-kafka's TopicCollection, or a list of names (lakelog's earlier form)."""
        names = topics.topic_names if isinstance(topics, TopicCollection) else topics
        if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
            raise InvalidType("describe_topics takes a TopicCollection or a list of topic names")
        return {name: future_of(describe_topic, self._root, name) for name in names}

    @while_open
    def describe_cluster(self, **_timeouts: Any) -> Future:
        """A future resolving to the root as a cluster: one node (id 0, host the root), its controller."""
        node = Node(NODE_ID, str(self._root))
        return resolved(DescribeClusterResult(controller=node, nodes=[node], cluster_id=str(self._root)))

    # -- configs ----------------------------------------------------------------------------

    @while_open
    def describe_configs(self, resources: list[ConfigResource], **_timeouts: Any) -> dict[ConfigResource, Future]:
        """A future per resource resolving to {name: ConfigEntry}: a topic's stored config, or the root's
        defaults (RESOURCE_BROKER "0")."""
        check_resources(resources, "describe_configs")
        return {resource: future_of(admin_configs.describe, self._root, resource) for resource in resources}

    @while_open
    def alter_configs(
        self, resources: list[ConfigResource], validate_only: bool = False, **_timeouts: Any
    ) -> dict[ConfigResource, Future]:
        """Replace each topic's config with `set_config_dict` (keys not set go back to their defaults);
        a future per resource resolves to None or raises (InvalidConfig, InvalidPartitions, ...)."""
        warnings.warn(
            "alter_configs has been deprecated. Use incremental_alter_configs instead.", DeprecationWarning, stacklevel=3
        )
        check_resources(resources, "alter_configs")
        alter = partial(admin_configs.alter, incremental=False, validate_only=validate_only, retry=self._retry)
        return {resource: future_of(alter, self._root, resource) for resource in resources}

    @while_open
    def incremental_alter_configs(
        self, resources: list[ConfigResource], validate_only: bool = False, **_timeouts: Any
    ) -> dict[ConfigResource, Future]:
        """Apply each resource's `incremental_configs` (SET, DELETE, APPEND, SUBTRACT) to its topic's config."""
        check_resources(resources, "incremental_alter_configs")
        for resource in resources:
            admin_configs.check_incremental(resource)
        alter = partial(admin_configs.alter, incremental=True, validate_only=validate_only, retry=self._retry)
        return {resource: future_of(alter, self._root, resource) for resource in resources}

    # -- offsets and records ----------------------------------------------------------------

    @while_open
    def list_offsets(
        self,
        topic_partition_offsets: dict[TopicPartition, OffsetSpec],
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
        **_timeouts: Any,
    ) -> dict[TopicPartition, Future]:
        """A future per partition resolving to ListOffsetsResultInfo(offset, timestamp, leader_epoch); the
        latest offset is the high watermark, or the last stable offset under READ_COMMITTED (S5.1)."""
        if not isinstance(topic_partition_offsets, dict):
            raise InvalidType(
                "Expected topic_partition_offsets to be dict of [TopicPartitions,OffsetSpec] for list offsets request"
            )
        for partition, spec in topic_partition_offsets.items():
            if not isinstance(partition, TopicPartition):
                raise InvalidType("partition must be a TopicPartition")
            if not isinstance(partition.topic, str):
                raise InvalidType("partition topic name must be string")
            if not partition.topic:
                raise InvalidArgument("partition topic name cannot be empty")
            if partition.partition < 0:
                raise InvalidArgument("partition index must be non-negative")
            if not isinstance(spec, OffsetSpec):
                raise InvalidType("Value must be a OffsetSpec")
        if not isinstance(isolation_level, IsolationLevel):
            raise InvalidType("isolation_level argument should be an IsolationLevel")
        return {
            TopicPartition(p.topic, p.partition, spec._value): future_of(
                list_offset, self._root, p.topic, p.partition, spec, isolation_level
            )
            for p, spec in topic_partition_offsets.items()
        }

    @while_open
    def delete_records(self, topic_partition_offsets: list[TopicPartition], **_timeouts: Any) -> dict[TopicPartition, Future]:
        """Delete every record before each partition's offset (-1: the high watermark); S9.1.

        A future per partition resolves to DeletedRecords(low_watermark), the log
        start offset afterwards, or raises: OffsetOutOfRange beyond the high
        watermark or above the last stable offset (an open transaction's rows
        stay, S9.2), PolicyViolation on a topic without cleanup.policy=delete,
        UnknownTopicOrPartition. A refused partition is left unchanged (S8.3).
        """
        if not isinstance(topic_partition_offsets, (list, tuple)):
            raise InvalidType(f"Expected Request to be a list, got '{type(topic_partition_offsets).__name__}' ")
        for request in topic_partition_offsets:
            if not isinstance(request, TopicPartition):
                raise InvalidType(f"Element of the request list must be of type 'TopicPartition' got '{type(request).__name__}' ")
            if not isinstance(request.topic, str):
                raise InvalidType(f"the topic of {request} must be a string")
        keys = [(p.topic, p.partition) for p in topic_partition_offsets]
        if len(set(keys)) != len(keys):
            raise InvalidArgument("delete_records got the same partition twice")
        if any(p.partition < 0 for p in topic_partition_offsets):
            raise InvalidArgument("'partition' cannot be negative")
        return {p: future_of(self._delete_records, p) for p in topic_partition_offsets}

    def _delete_records(self, partition: TopicPartition) -> DeletedRecords:
        log = open_partition(self._root, partition.topic, partition.partition, clock=self._clock)
        low_watermark = retention.delete_records(log, partition.offset, backoff=self._retry.start(retention.TRIM_TIMEOUT_S))
        self._logger.info(
            "%s-%d: records before offset %d deleted (log start offset now %d)",
            partition.topic,
            partition.partition,
            low_watermark,
            low_watermark,
        )
        return DeletedRecords(low_watermark)

    # -- transactions (S8.1), like Kafka's Admin and kafka-transactions.sh ------------------

    @while_open
    def list_transactions(self, **_timeouts: Any) -> Future:
        """A future resolving to every transactional id with its producer id and state."""
        return future_of(transaction_admin.list_transactions, self._root)

    @while_open
    def describe_transactions(self, transactional_ids: list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per id resolving to its TransactionDescription (unknown ids: InvalidProducerIdMapping...)."""
        if not isinstance(transactional_ids, (list, tuple)) or not all(isinstance(i, str) for i in transactional_ids):
            raise InvalidType("describe_transactions takes a list of transactional ids")
        return {tid: future_of(describe_transaction, self._root, tid) for tid in transactional_ids}

    @while_open
    def describe_producers(self, partitions: list[TopicPartition], **_timeouts: Any) -> dict[TopicPartition, Future]:
        """A future per partition resolving to the producer states it holds (S3.5), open transactions included."""
        if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in partitions):
            raise InvalidType("describe_producers takes a list of TopicPartition")
        return {p: future_of(transaction_admin.describe_producers, self._root, p.topic, p.partition) for p in partitions}

    @while_open
    def find_hanging_transactions(self, topic: str | None = None, **_timeouts: Any) -> Future:
        """A future resolving to the transactions that hold an LSO and that no live producer will close."""
        return future_of(transaction_admin.find_hanging_transactions, self._root, topic, self._clock())

    @while_open
    def abort_transaction(self, partition: TopicPartition, producer_id: int, **_timeouts: Any) -> Future:
        """Abort a hanging transaction of `producer_id` in `partition` (KIP-664); resolves to the marker's offset."""
        if not isinstance(partition, TopicPartition) or not isinstance(producer_id, int):
            raise InvalidType("abort_transaction takes a TopicPartition and a producer id")
        self._logger.info(
            "%s-%d: aborting the hanging transaction of producer id %d (KIP-664)",
            partition.topic,
            partition.partition,
            producer_id,
        )
        return future_of(
            partial(transaction_admin.abort_hanging_transaction, retry=self._retry),
            self._root,
            partition.topic,
            partition.partition,
            producer_id,
        )

    # -- consumer groups (S6), like Kafka's Admin and kafka-consumer-groups.sh --------------

    @while_open
    def list_consumer_groups(self, states: Any = None, types: Any = None, **_timeouts: Any) -> Future:
        """A future resolving to a ListConsumerGroupsResult (`valid`: a ConsumerGroupListing per group),
        only groups in `states` / of `types` when given; an empty set (or None) means all, as in confluent-kafka."""
        wanted = kept_values(states, ConsumerGroupState, "states")
        kinds = kept_values(types, ConsumerGroupType, "types")

        def listing() -> ListConsumerGroupsResult:
            groups = group_admin.list_groups(self._root)
            return ListConsumerGroupsResult(
                [g for g in groups if (not wanted or g.state in wanted) and (not kinds or g.type in kinds)]
            )

        return future_of(listing)

    @while_open
    def list_groups(self, group: str | None = None, timeout: float = -1) -> list[GroupMetadata]:
        """confluent-kafka's deprecated classic listing: every group (or one) with its members and state."""
        node = BrokerMetadata(NODE_ID, str(self._root))
        groups = []
        for listing in group_admin.list_groups(self._root):
            if group is not None and listing.group_id != group:
                continue
            try:
                description = group_admin.describe_group(self._root, listing.group_id)
            except KafkaException as error:
                groups.append(GroupMetadata(listing.group_id, node, "Unknown", members=[], error=error.args[0]))
                continue
            members = [GroupMember(m.member_id) for m in description.members]
            state = description.state.value.capitalize()
            groups.append(GroupMetadata(listing.group_id, node, state, protocol=description.partition_assignor, members=members))
        return groups

    @while_open
    def describe_consumer_groups(self, group_ids: list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per group resolving to its ConsumerGroupDescription (members, epochs, assignments, state)."""
        if not isinstance(group_ids, (list, tuple)) or not all(isinstance(g, str) for g in group_ids):
            raise InvalidType("describe_consumer_groups takes a list of group ids")
        if not group_ids:
            raise InvalidArgument("Expected at least one group to be described")
        return {group_id: future_of(group_admin.describe_group, self._root, group_id) for group_id in group_ids}

    @while_open
    def list_consumer_group_offsets(
        self, requests: list[ConsumerGroupTopicPartitions], require_stable: bool = False, **_timeouts: Any
    ) -> dict[str, Future]:
        """A future per group resolving to its committed offsets (all, or the partitions asked), as
        ConsumerGroupTopicPartitions; `require_stable` refuses pending ones (UnstableOffsetCommit, S7.3)."""
        check_group_requests(requests, "list_consumer_group_offsets", offsets=False)
        futures = {}
        for request in requests:
            partitions = None
            if request.topic_partitions is not None:
                partitions = [(p.topic, p.partition) for p in request.topic_partitions]
            futures[request.group_id] = future_of(
                group_admin.list_offsets, self._root, request.group_id, partitions, require_stable
            )
        return futures

    @while_open
    def alter_consumer_group_offsets(self, requests: list[ConsumerGroupTopicPartitions], **_timeouts: Any) -> dict[str, Future]:
        """A future per group resolving to the offsets committed; only for a group without members
        (NonEmptyGroup), all partitions of a group or none."""
        check_group_requests(requests, "alter_consumer_group_offsets", offsets=True)
        return {
            request.group_id: future_of(
                partial(group_admin.alter_offsets, retry=self._retry),
                self._root,
                request.group_id,
                # `or ()`: never taken, check_group_requests(offsets=True) refused a request without partitions.
                {(p.topic, p.partition): (p.offset, p.metadata) for p in request.topic_partitions or ()},
            )
            for request in requests
        }

    @while_open
    def delete_consumer_groups(self, group_ids: list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per group resolving to None once the group and its offsets are deleted
        (GroupIdNotFound, NonEmptyGroup)."""
        if not isinstance(group_ids, (list, tuple)) or not all(isinstance(g, str) for g in group_ids):
            raise InvalidType("delete_consumer_groups takes a list of group ids")
        if not group_ids:
            raise InvalidArgument("Expected at least one group to be deleted")
        delete = partial(group_admin.delete_group, retry=self._retry)
        return {group_id: future_of(delete, self._root, group_id) for group_id in group_ids}
