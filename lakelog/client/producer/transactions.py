"""The producer's transaction manager (Kafka's `TransactionManager`): its identity, sequences and transaction state.

It holds the producer id and epoch (allocated on the first batch of an idempotent producer, given
by `init_transactions` to a transactional one), each partition's next sequence, and, with
`transactional.id`, the state librdkafka tracks (TransactionState), the partitions the open
transaction holds and the first error that makes it abort-only. It calls the transaction
coordinator (S4) and, for `send_offsets_to_transaction`, the group coordinator (S7).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lakelog.config import Config
from lakelog.errors import (
    FatalError,
    InvalidConfig,
    InvalidRequest,
    KafkaError,
    KafkaException,
    RetriableError,
    TransactionAbortable,
)
from lakelog.log import BatchHeader, PartitionLog, allocate_producer_id
from lakelog.log.partition import Clock
from lakelog.log.records import next_sequence
from lakelog.log.verification import TransactionVerification
from lakelog.store import Location
from lakelog.store.io.retry import RetryPolicy
from lakelog.typedef import TopicPartitionKey

if TYPE_CHECKING:
    from lakelog.coordinator.group.coordinator import GroupCoordinator
    from lakelog.coordinator.transaction.coordinator import TransactionCoordinator

OFFSETS_TOPIC = "__consumer_offsets"


class TransactionState(enum.Enum):
    """Where a transactional producer is, as librdkafka tracks it (idempotent producers stay UNINITIALIZED)."""

    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


class TransactionManager:
    """A producer's identity, sequences and (with transactional.id) its transaction, and the coordinator calls they take.

    `lend_log(topic, partition)`: the producer's open handle of a partition its transaction wrote, lent to the
    coordinator for its marker (None: the coordinator opens its own); the same handle its batches are appended
    with, so the version it holds before an add is what that add proves (lakelog.log.verification)."""

    def __init__(
        self,
        root: Location,
        config: Config,
        retry: RetryPolicy,
        clock: Clock,
        logger: logging.Logger | logging.LoggerAdapter,
        lend_log: Callable[[str, int], PartitionLog | None],
    ) -> None:
        self._root = root
        self._config = config
        self._retry = retry
        self._clock = clock
        self._logger = logger
        self._lend = lend_log
        self.idempotent: bool = config["enable.idempotence"]
        self.transactional_id: str | None = config["transactional.id"] or None
        if self.transactional_id is not None and not self.idempotent:
            raise InvalidConfig("transactional.id requires enable.idempotence=true", key="enable.idempotence")
        self.producer_id: int | None = None
        self.producer_epoch = 0
        self._sequences: dict[TopicPartitionKey, int] = {}
        self.state = TransactionState.UNINITIALIZED
        # Partitions added to the open transaction, and the first error that makes it abort-only.
        self.partitions: set[TopicPartitionKey] = set()
        # Per partition our add proved (S4.4): (producer id, epoch, the version of the handle read before the add).
        self._proven: dict[TopicPartitionKey, tuple[int, int, int]] = {}
        self.error: KafkaException | None = None
        self.coordinator: TransactionCoordinator | None = None
        self.groups: GroupCoordinator | None = None

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def id_text(self) -> str:
        """How log lines and errors name this producer."""
        return f"transactional.id {self.transactional_id!r}"

    # -- identity and sequences -------------------------------------------------------

    def header(self, tp: TopicPartitionKey, expected_offset: int | None) -> BatchHeader:
        """The header of the next batch to `tp`: our identity and the partition's next sequence (allocating the
        id of an idempotent producer on its first batch: an id lost to a failure is only a gap in the ids)."""
        if not self.idempotent:
            return BatchHeader(expected_offset=expected_offset)
        if self.producer_id is None:
            self.producer_id = allocate_producer_id(self._root, self._config["client.id"], retry=self._retry)
        return BatchHeader(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self._sequences.get(tp, 0),
            is_transactional=self.transactional_id is not None,
            expected_offset=expected_offset,
        )

    def sent(self, tp: TopicPartitionKey, header: BatchHeader, count: int) -> None:
        """A batch of `count` records with `header` landed: the partition's sequence moves past it."""
        if header.is_idempotent:
            self._sequences[tp] = next_sequence(header.base_sequence + count - 1)

    def failed(self, error: KafkaException) -> None:
        """A batch could not be appended: a fatal error makes the producer unusable, any other the transaction abort-only."""
        if self.transactional_id is None:
            return
        if error.fatal:
            self.fail(error)
        elif self.error is None:
            self.error = error

    def taint(self, error: KafkaError) -> None:
        """Messages of the open transaction were not delivered (purged, unknown topic): it becomes abort-only."""
        if self.transactional_id is not None and self.error is None:
            self.error = KafkaException(error)

    def abortable(self, error: KafkaException) -> None:
        """The open transaction can only abort now (a refused offsets commit, a suite that does not fit)."""
        self.error = self.error or error
        self.state = TransactionState.ABORTABLE_ERROR

    def fail(self, error: KafkaException) -> None:
        """A fatal error (fenced, S4.1): the producer is unusable; every later call raises it again."""
        if self.state is not TransactionState.FATAL_ERROR:
            self._logger.info("%s: unusable from now on: %s: %s", self.id_text, error.error.name(), error)
        self.state = TransactionState.FATAL_ERROR
        self.error = error

    # -- checks --------------------------------------------------------------------------

    def require_transactional(self, call: str) -> None:
        if self.transactional_id is None:
            raise KafkaException(KafkaError(KafkaError._NOT_CONFIGURED, f"{call}() needs transactional.id to be configured"))

    def require_state(self, call: str, *allowed: TransactionState) -> None:
        state = self.state
        if state is TransactionState.FATAL_ERROR:
            # The error that made the producer unusable (ProducerFenced, ...), again.
            assert self.error is not None
            raise self.error
        if state not in allowed:
            raise KafkaException(
                KafkaError(
                    KafkaError._STATE,
                    f"{call}() is not allowed while the producer is {state.value.replace('_', ' ')}",
                    txn_requires_abort=state is TransactionState.ABORTABLE_ERROR,
                )
            )

    def require_committable(self) -> None:
        """TransactionAbortable if a failed delivery (or purge) made the open transaction abort-only."""
        if self.error is not None:
            self.state = TransactionState.ABORTABLE_ERROR
            raise TransactionAbortable(
                f"transaction of {self.id_text} cannot commit: {self.error.error.str()}; abort it and start again"
            )

    @property
    def open(self) -> bool:
        """Whether a transaction is open (in it, or abort-only)."""
        return self.transactional_id is not None and self.state in (
            TransactionState.IN_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
        )

    # -- the transaction (S4) -----------------------------------------------------------------

    def init(self, timeout_s: float) -> None:
        """Take over the transactional.id: its producer id with a bumped epoch, fencing every earlier instance (S4.1)."""
        transactional_id = self.transactional_id
        result = self.call_coordinator(
            lambda coordinator: coordinator.init_producer_id(transactional_id, self._config["transaction.timeout.ms"], timeout_s)
        )
        self.producer_id, self.producer_epoch = result.producer_id, result.producer_epoch
        self._logger.info(
            "%s: initialised at producer id %d epoch %d; every earlier instance is fenced (S4.1)",
            self.id_text,
            self.producer_id,
            self.producer_epoch,
        )
        self._sequences = {}
        self.state = TransactionState.READY

    def begin(self) -> None:
        self.partitions = set()
        self._proven = {}
        self.error = None
        self.state = TransactionState.IN_TRANSACTION

    def add_partition(self, tp: TopicPartitionKey, queued: Iterable[TopicPartitionKey]) -> None:
        """Add the partition (with every other one holding a queued batch, `queued`) to the transaction
        before its first write (S4.4): one coordinator commit for all of them.

        The partition then verifies the transaction's first batch with the coordinator
        (KIP-890, lakelog.log.verification): a batch of an identity whose transaction
        does not hold the partition is refused there, whoever sends it."""
        add = self.adding(tp, queued)
        if add is not None:
            add()

    def adding(self, tp: TopicPartitionKey, queued: Iterable[TopicPartitionKey]) -> Callable[[], None] | None:
        """`add_partition` as a call to make, on any thread (None: the transaction holds them all already).

        The state is checked and each partition's handle version read here, before the add (its commit then
        proves the transaction held them at a later moment); the call records the partitions and the proofs."""
        if self.state is not TransactionState.IN_TRANSACTION:
            self.require_state("produce", TransactionState.IN_TRANSACTION)
        wanted = ({tp} | set(queued)) - self.partitions
        if not wanted:
            return None
        versions = self._versions(wanted)
        identity = (self.producer_id, self.producer_epoch)

        def add() -> None:
            self.call_coordinator(
                lambda coordinator: coordinator.add_partitions(self.transactional_id, *identity, sorted(wanted))
            )
            self.partitions |= wanted
            self._prove(identity, versions)

        return add

    def _versions(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The snapshot version of each partition's handle (the one its batches and markers go through), now."""
        versions = {}
        for partition in partitions:
            try:
                log = self._lend_log(*partition)
            except KafkaException:
                continue  # no proof for it: its first batch asks the coordinator (and meets the error there)
            if log is not None:
                versions[partition] = log.version
        return versions

    def _prove(self, identity: tuple[int | None, int], versions: dict[TopicPartitionKey, int]) -> None:
        """Our add of these partitions landed after their `versions` were read (see lakelog.log.verification)."""
        producer_id, epoch = identity
        if producer_id is not None:
            for partition, version in versions.items():
                self._proven[partition] = (producer_id, epoch, version)

    def end(self, commit: bool, timeout: float | None = None) -> None:
        """End the transaction, retrying a retriable error until `timeout` (librdkafka's way; None or
        negative: transaction.timeout.ms): a retried end is recognised by the coordinator, which
        answers as the first time and finishes what it left (S4.5). Raises the last error after that."""
        if self.partitions:
            limit_s = self._config["transaction.timeout.ms"] / 1000 if timeout is None or timeout < 0 else timeout
            backoff = self._retry.start(limit_s)
            while True:
                try:
                    # Returns once the markers are written; Complete* rides on our next transaction's first
                    # add_partitions (or the next init, or the sweep): one serial commit less per transaction (S4.5).
                    result = self.call_coordinator(
                        lambda coordinator: coordinator.end_transaction(
                            self.transactional_id, self.producer_id, self.producer_epoch, commit, complete=False
                        )
                    )
                    break
                except RetriableError as error:
                    if not backoff.wait():
                        self._logger.warning(
                            "%s: giving up on ending its transaction after %d attempt(s) in %g s: %s: %s",
                            self.id_text,
                            backoff.retries + 1,
                            limit_s,
                            error.error.name(),
                            error,
                        )
                        raise
                    self._logger.warning(
                        "%s: retrying the end of its transaction (attempt %d) after %s: %s",
                        self.id_text,
                        backoff.retries + 1,
                        error.error.name(),
                        error,
                    )
            # Every end bumps the epoch (S4.6): the next transaction starts every sequence at 0.
            self.producer_id, self.producer_epoch = result.producer_id, result.producer_epoch
            self._sequences = {}
        self.partitions = set()
        self._proven = {}
        self.error = None
        self.state = TransactionState.READY

    def send_offsets(self, positions: list[Any], group_metadata: Any) -> None:
        """Commit the consumer's positions with this transaction (KIP-447, S7.1); see Producer.send_offsets_to_transaction."""
        from lakelog.client.types import TopicPartition
        from lakelog.coordinator.group import GroupMetadata
        from lakelog.coordinator.group.coordinator import GroupCoordinator

        if not isinstance(group_metadata, GroupMetadata):
            raise InvalidRequest("group_metadata must come from Consumer.consumer_group_metadata()")
        if not isinstance(positions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in positions):
            raise InvalidRequest("send_offsets_to_transaction takes a list of TopicPartition")
        # As librdkafka: a partition with no position yet (a logical offset, OFFSET_INVALID) is left out.
        offsets = {(p.topic, p.partition): (p.offset, p.metadata) for p in positions if p.offset >= 0}
        if not offsets:
            return
        if self.groups is None:
            # Kept: the coordinator replays __consumer_offsets incrementally from where it last read.
            self.groups = GroupCoordinator(self._root, retry=self._retry, clock=self._clock)
        groups = self.groups
        offsets_partition = groups.offsets_partition(group_metadata.group_id)
        # In a transaction (checked by the caller), so init_transactions() gave this producer its id.
        assert self.producer_id is not None
        identity = (self.producer_id, self.producer_epoch)
        if offsets_partition not in self.partitions:
            # A zombie's group metadata is refused before the transaction changes (S7.2, S8.3).
            self._offsets_call(lambda: groups.check_transactional_offsets(group_metadata, *identity, offsets))
            versions = self._versions([offsets_partition])
            self.call_coordinator(
                lambda coordinator: coordinator.add_partitions(self.transactional_id, *identity, [offsets_partition])
            )
            self.partitions.add(offsets_partition)
            self._prove(identity, versions)
        self._offsets_call(
            lambda: groups.commit_transactional_offsets(group_metadata, *identity, offsets, transaction=self.verification())
        )

    def _offsets_call(self, call: Callable[[], Any]) -> None:
        """`call()`; a refusal of the offsets makes the transaction abort-only (fenced: the producer unusable)."""
        try:
            call()
        except KafkaException as error:
            if error.fatal:
                self.fail(error)
            else:
                self.abortable(error)
            raise

    # -- the coordinator ----------------------------------------------------------------------

    def transaction_coordinator(self) -> TransactionCoordinator:
        if self.coordinator is None:
            from lakelog.coordinator.transaction.coordinator import TransactionCoordinator

            self.coordinator = TransactionCoordinator(
                self._root, partition_logs=self._lend_log, retry=self._retry, clock=self._clock
            )
        return self.coordinator

    def call_coordinator(self, request: Callable[[Any], Any]) -> Any:
        """Run a coordinator request; a fatal error (fenced, S4.1) leaves the producer unusable."""
        coordinator = self.transaction_coordinator()
        try:
            return request(coordinator)
        except FatalError as error:
            self.fail(error)
            raise

    def verification(self) -> TransactionVerification:
        """What a partition verifies our transactional batches with (KIP-890, S4.4): the coordinator we add partitions through."""
        assert self.transactional_id is not None
        return TransactionVerification(self.transactional_id, self.transaction_coordinator(), dict(self._proven))

    def _lend_log(self, topic: str, partition: int) -> PartitionLog | None:
        """Our open handle of a partition the transaction wrote, for its marker (see TransactionCoordinator)."""
        if not topic.startswith("__"):
            return self._lend(topic, partition)
        if self.groups is not None and topic == OFFSETS_TOPIC:
            return self.groups.offsets_log(partition)
        return None

    def release(self) -> None:
        """Let go of the coordinators (a closed producer)."""
        self.coordinator = None
        self.groups = None
