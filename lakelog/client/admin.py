"""`AdminClient`: create, list and describe topics, shaped like confluent_kafka.admin.AdminClient.

Time is passed in: `clock` (milliseconds, the wall clock by default) is what
`find_hanging_transactions` judges transaction timeouts on and the clock of the
partition logs `delete_records` commits to.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from lakelog import config
from lakelog.client.producer import split_callbacks
from lakelog.client.types import (
    ClusterMetadata,
    NewTopic,
    PartitionDescription,
    PartitionMetadata,
    TopicDescription,
    TopicMetadata,
    TopicPartition,
)
from lakelog.client import group_admin, transaction_admin
from lakelog.client.group_admin import ConsumerGroupTopicPartitions, ListConsumerGroupsResult
from lakelog.errors import InvalidProducerIdMapping, InvalidRequest, KafkaException
from lakelog.log import create_topic, list_topics, open_partition, retention, topic_config
from lakelog.log.partition import Clock, wall_clock_ms
from lakelog.log.topics import validate_new_topic
from lakelog.config import storage_options
from lakelog.store import check_root
from lakelog.store.retry import RetryPolicy

logger = logging.getLogger(__name__)


def _resolved(result: Any = None, error: BaseException | None = None) -> Future:
    future: Future = Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
    return future


def cluster_metadata(root: str, topic: str | None = None) -> ClusterMetadata:
    """Every topic of the root (or one), with its partitions."""
    names = [topic] if topic is not None else list_topics(root)
    topics = {}
    for name in names:
        count = topic_config(root, name).num_partitions
        topics[name] = TopicMetadata(name, {p: PartitionMetadata(p) for p in range(count)})
    return ClusterMetadata(topics=topics, cluster_id=str(root))


def describe_topic(root: str, topic: str) -> TopicDescription:
    """A topic's partitions (offsets incl. HW and LSO, files, table version) and its config."""
    tc = topic_config(root, topic)
    partitions = []
    for partition in range(tc.num_partitions):
        log = open_partition(root, topic, partition)
        partitions.append(
            PartitionDescription(
                id=partition,
                log_start_offset=log.log_start_offset(),
                high_watermark=log.high_watermark(),
                last_stable_offset=log.last_stable_offset(),
                log_end_offset=log.log_end_offset(),
                files=len(log.table.files()),
                table_version=log.version,
            )
        )
    return TopicDescription(topic, partitions, dict(tc.values))


@dataclass(frozen=True)
class DeletedRecords:
    """What `delete_records` did to one partition: its log start offset afterwards, as confluent-kafka's."""

    low_watermark: int


class AdminClient:
    """Admin operations on the topics of `lakelog.root`; results come as resolved futures."""

    def __init__(self, conf: Mapping[str, Any] | None = None, *, clock: Clock = wall_clock_ms, **kwargs: Any) -> None:
        values, _ = split_callbacks(conf, ("error_cb",), kwargs)
        self.config = config.load("admin", values)
        # confluent-kafka's `logger`: this client's own log lines go there (default: this package's loggers).
        self._logger: logging.Logger | logging.LoggerAdapter = self.config.get("logger") or logger
        self._clock = clock
        self._root = check_root(self.config["lakelog.root"], storage_options(self.config))
        # retry.backoff.ms / retry.backoff.max.ms: the retries of the writes admin operations make.
        self._retry = RetryPolicy.from_config(self.config)

    def create_topics(self, new_topics: list[NewTopic], validate_only: bool = False, **_timeouts: Any) -> dict[str, Future]:
        """Create each topic; a future per topic resolves to None or raises (TopicAlreadyExists, ...)."""
        if not isinstance(new_topics, (list, tuple)) or not all(isinstance(t, NewTopic) for t in new_topics):
            raise InvalidRequest("create_topics takes a list of NewTopic")
        futures = {}
        for new_topic in new_topics:
            partitions = None if new_topic.num_partitions == -1 else new_topic.num_partitions
            try:
                if validate_only:
                    validate_new_topic(new_topic.topic, partitions, new_topic.config)
                else:
                    create_topic(self._root, new_topic.topic, partitions, new_topic.config)
                futures[new_topic.topic] = _resolved()
            except KafkaException as error:
                futures[new_topic.topic] = _resolved(error=error)
        return futures

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return cluster_metadata(self._root, topic)

    def describe_topics(self, topics: list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per topic resolving to its TopicDescription (partitions, offsets, config)."""
        names = getattr(topics, "topic_names", topics)
        if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
            raise InvalidRequest("describe_topics takes a list of topic names")
        futures = {}
        for name in names:
            try:
                futures[name] = _resolved(describe_topic(self._root, name))
            except KafkaException as error:
                futures[name] = _resolved(error=error)
        return futures

    def delete_records(self, topic_partition_offsets: list[TopicPartition], **_timeouts: Any) -> dict[TopicPartition, Future]:
        """Delete every record before each partition's offset (-1: the high watermark); S9.1.

        A future per partition resolves to DeletedRecords(low_watermark), the log
        start offset afterwards, or raises: OffsetOutOfRange beyond the high
        watermark or above the last stable offset (an open transaction's rows
        stay, S9.2), PolicyViolation on a topic without cleanup.policy=delete,
        UnknownTopicOrPartition. A refused partition is left unchanged (S8.3).
        """
        if not isinstance(topic_partition_offsets, (list, tuple)) or not all(
            isinstance(p, TopicPartition) for p in topic_partition_offsets
        ):
            raise InvalidRequest("delete_records takes a list of TopicPartition")
        keys = [(p.topic, p.partition) for p in topic_partition_offsets]
        if len(set(keys)) != len(keys):
            raise InvalidRequest("delete_records got the same partition twice")
        return {p: _call(self._delete_records, p) for p in topic_partition_offsets}

    def _delete_records(self, partition: TopicPartition) -> DeletedRecords:
        log = open_partition(self._root, partition.topic, partition.partition, clock=self._clock)
        low_watermark = retention.delete_records(log, partition.offset, backoff=self._retry.start(retention.TRIM_TIMEOUT_S))
        self._logger.info("%s-%d: records before offset %d deleted (log start offset now %d)", partition.topic,
                       partition.partition, low_watermark, low_watermark)
        return DeletedRecords(low_watermark)

    # -- transactions (S8.1), like Kafka's Admin and kafka-transactions.sh ------------------

    def list_transactions(self, **_timeouts: Any) -> Future:
        """A future resolving to every transactional id with its producer id and state."""
        return _call(transaction_admin.list_transactions, self._root)

    def describe_transactions(self, transactional_ids: list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per id resolving to its TransactionDescription (unknown ids: InvalidProducerIdMapping...)."""
        if not isinstance(transactional_ids, (list, tuple)) or not all(isinstance(i, str) for i in transactional_ids):
            raise InvalidRequest("describe_transactions takes a list of transactional ids")
        return {tid: _call(_describe_transaction, self._root, tid) for tid in transactional_ids}

    def describe_producers(self, partitions: list[TopicPartition], **_timeouts: Any) -> dict[TopicPartition, Future]:
        """A future per partition resolving to the producer states it holds (S3.5), open transactions included."""
        if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in partitions):
            raise InvalidRequest("describe_producers takes a list of TopicPartition")
        return {p: _call(transaction_admin.describe_producers, self._root, p.topic, p.partition) for p in partitions}

    def find_hanging_transactions(self, topic: str | None = None, **_timeouts: Any) -> Future:
        """A future resolving to the transactions that hold an LSO and that no live producer will close."""
        return _call(transaction_admin.find_hanging_transactions, self._root, topic, self._clock())

    def abort_transaction(self, partition: TopicPartition, producer_id: int, **_timeouts: Any) -> Future:
        """Abort a hanging transaction of `producer_id` in `partition` (KIP-664); resolves to the marker's offset."""
        if not isinstance(partition, TopicPartition) or not isinstance(producer_id, int):
            raise InvalidRequest("abort_transaction takes a TopicPartition and a producer id")
        self._logger.info("%s-%d: aborting the hanging transaction of producer id %d (KIP-664)", partition.topic,
                       partition.partition, producer_id)
        return _call(
            partial(transaction_admin.abort_hanging_transaction, retry=self._retry),
            self._root, partition.topic, partition.partition, producer_id,
        )


    # -- consumer groups (S6), like Kafka's Admin and kafka-consumer-groups.sh --------------

    def list_consumer_groups(self, states: Any = None, **_timeouts: Any) -> Future:
        """A future resolving to a ListConsumerGroupsResult (`valid`: a ConsumerGroupListing per group),
        optionally only groups in `states` (ConsumerGroupState values)."""
        wanted = None if states is None else set(states)

        def listing() -> ListConsumerGroupsResult:
            groups = group_admin.list_groups(self._root)
            return ListConsumerGroupsResult([g for g in groups if wanted is None or g.state in wanted])

        return _call(listing)

    def describe_consumer_groups(self, group_ids: list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per group resolving to its ConsumerGroupDescription (members, epochs, assignments, state)."""
        if not isinstance(group_ids, (list, tuple)) or not all(isinstance(g, str) for g in group_ids):
            raise InvalidRequest("describe_consumer_groups takes a list of group ids")
        return {group_id: _call(group_admin.describe_group, self._root, group_id) for group_id in group_ids}

    def list_consumer_group_offsets(
        self, requests: list[ConsumerGroupTopicPartitions], require_stable: bool = False, **_timeouts: Any
    ) -> dict[str, Future]:
        """A future per group resolving to its committed offsets (all, or the partitions asked), as
        ConsumerGroupTopicPartitions; `require_stable` refuses pending ones (UnstableOffsetCommit, S7.3)."""
        _check_group_requests(requests, "list_consumer_group_offsets", offsets=False)
        futures = {}
        for request in requests:
            partitions = None
            if request.topic_partitions is not None:
                partitions = [(p.topic, p.partition) for p in request.topic_partitions]
            futures[request.group_id] = _call(
                group_admin.list_offsets, self._root, request.group_id, partitions, require_stable
            )
        return futures

    def alter_consumer_group_offsets(
        self, requests: list[ConsumerGroupTopicPartitions], **_timeouts: Any
    ) -> dict[str, Future]:
        """A future per group resolving to the offsets committed; only for a group without members
        (NonEmptyGroup), all partitions of a group or none."""
        _check_group_requests(requests, "alter_consumer_group_offsets", offsets=True)
        return {
            request.group_id: _call(
                partial(group_admin.alter_offsets, retry=self._retry),
                self._root,
                request.group_id,
                {(p.topic, p.partition): (p.offset, p.metadata or "") for p in request.topic_partitions},
            )
            for request in requests
        }

    def delete_consumer_groups(self, group_ids: list[str], **_timeouts: Any) -> dict[str, Future]:
        """A future per group resolving to None once the group and its offsets are deleted
        (GroupIdNotFound, NonEmptyGroup)."""
        if not isinstance(group_ids, (list, tuple)) or not all(isinstance(g, str) for g in group_ids):
            raise InvalidRequest("delete_consumer_groups takes a list of group ids")
        delete = partial(group_admin.delete_group, retry=self._retry)
        return {group_id: _call(delete, self._root, group_id) for group_id in group_ids}


def _check_group_requests(requests: Any, call: str, offsets: bool) -> None:
    if not isinstance(requests, (list, tuple)) or not all(isinstance(r, ConsumerGroupTopicPartitions) for r in requests):
        raise InvalidRequest(f"{call} takes a list of ConsumerGroupTopicPartitions")
    for request in requests:
        partitions = request.topic_partitions
        if partitions is None and not offsets:
            continue
        if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in partitions):
            raise InvalidRequest(f"{call}: topic_partitions of group {request.group_id!r} must be a list of TopicPartition")


def _call(function: Any, *args: Any) -> Future:
    try:
        return _resolved(function(*args))
    except KafkaException as error:
        return _resolved(error=error)


def _describe_transaction(root: str, transactional_id: str) -> transaction_admin.TransactionDescription:
    found = transaction_admin.describe_transaction(root, transactional_id)
    if found is None:
        raise InvalidProducerIdMapping(f"transactional id {transactional_id!r} is unknown (never initialised, or expired)")
    return found
