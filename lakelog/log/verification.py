"""KIP-890 verification of a transactional write where it lands (S4.4).

A transactional batch is appended to a partition only if its (producer id, epoch)
has an ongoing transaction that holds the partition; otherwise no marker would
ever close it and it would hold the partition's LSO for good (a hanging
transaction). The partition cannot read `__transaction_state` itself (the
coordinator is a layer above it), so the writer hands it a
`TransactionVerification`: its transactional.id and the coordinator to ask. The
question is asked on the coordinator's latest state, inside the decision the
partition then commits on its own snapshot as exactly the next version: a lost
race decides, and so verifies, again.

Like Kafka, only the first batch of (producer id, epoch) at a partition is
verified: once the partition's rows show that producer's transaction open at
that epoch, later batches of the epoch belong to it. Whatever ends it writes a
marker with a bumped epoch here, so a later batch lands before the marker (and
is closed by it) or after it (and is fenced, S4.6).

What the answer needs is an order, not a time: the transaction held the
partition at a moment after the partition's snapshot in hand was read. A
writer's own add of the partition proves it (the coordinator's commit was the
latest state when it landed, S9.5): `proven` names, per partition, the identity
added and the partition's snapshot version read before the add. A decision on
that same version needs no second question; one on any other (a reload after a
lost race) asks the coordinator again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from lakelog.errors import InvalidTxnState, KafkaException
from lakelog.log.producer_state import ProducerEntry
from lakelog.log.records import BatchHeader

logger = logging.getLogger(__name__)


class TransactionVerifier(Protocol):
    """What verification needs of the transaction coordinator: raise unless the partitions are in the transaction."""

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> object: ...


@dataclass(frozen=True)
class TransactionVerification:
    """The transactional.id a writer sends its transactional batches for, and the coordinator that knows it."""

    transactional_id: str
    coordinator: TransactionVerifier
    # (topic, partition) -> (producer id, epoch, snapshot version): the writer's own add of the partition, made
    # after it read that version of the partition (see the module's docstring).
    proven: Mapping[tuple[str, int], tuple[int, int, int]] = field(default_factory=dict)

    def verify(self, producer_id: int, producer_epoch: int, topic: str, partition: int, version: int | None = None) -> None:
        """Raise unless (producer id, epoch) has an ongoing transaction holding topic-partition, on the latest state
        (or, for a decision on snapshot `version`, as the writer's own add proved after that version was read).

        InvalidTxnState carries producer_id, producer_epoch, topic, partition and
        transactional_id; an identity the coordinator fences is refused with its
        own error (ProducerFenced, InvalidProducerEpoch, InvalidProducerIdMapping).
        """
        if version is not None and self.proven.get((topic, partition)) == (producer_id, producer_epoch, version):
            return
        try:
            self.coordinator.verify_partitions(self.transactional_id, producer_id, producer_epoch, [(topic, partition)])
        except InvalidTxnState as error:
            raise InvalidTxnState(
                f"{topic}-{partition}: producer id {producer_id} epoch {producer_epoch} has no ongoing transaction "
                f"of transactional.id {self.transactional_id!r} holding this partition",
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                topic=topic,
                partition=partition,
                transactional_id=self.transactional_id,
            ) from error


def needs_verification(entry: ProducerEntry | None, header: BatchHeader) -> bool:
    """True for a transactional batch unless the partition's rows show its transaction open at its epoch."""
    if not header.is_transactional:
        return False
    return entry is None or not entry.transaction_open or entry.producer_epoch != header.producer_epoch


def verify_batch(
    verification: TransactionVerification | None,
    entry: ProducerEntry | None,
    header: BatchHeader,
    topic: str,
    partition: int,
    version: int | None = None,
) -> None:
    """S4.4 for a batch decided on snapshot `version` of a partition whose entry for its producer is `entry`; raises if refused."""
    if needs_verification(entry, header):
        verify_write(verification, header.producer_id, header.producer_epoch, topic, partition, version)


def verify_write(
    verification: TransactionVerification | None,
    producer_id: int,
    producer_epoch: int,
    topic: str,
    partition: int,
    version: int | None = None,
) -> None:
    """S4.4 for a transactional write to topic-partition: refused without a `verification`, or if it fails."""
    if verification is None:
        raise InvalidTxnState(
            f"{topic}-{partition}: a transactional write of producer id {producer_id} epoch {producer_epoch} "
            "carries no transactional.id to verify it with",
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            topic=topic,
            partition=partition,
            transactional_id=None,
        )
    verification.verify(producer_id, producer_epoch, topic, partition, version)


class StagedVerification:
    """The S4.4 check of a batch whose file went out before the transaction's add of the partition was in:
    called before the commit's put, it waits for `ready` and verifies the batch on the version it was decided on.
    `refused` says the check (not `ready`) raised; `verification` is what `ready` gave."""

    def __init__(
        self,
        ready: Callable[[], TransactionVerification | None],
        entry: ProducerEntry | None,
        header: BatchHeader,
        topic: str,
        partition: int,
        version: int,
    ) -> None:
        self._ready = ready
        self._args = (entry, header, topic, partition, version)
        self.verification: TransactionVerification | None = None
        self.refused = False

    def __call__(self) -> None:
        self.verification = self._ready()
        entry, header, topic, partition, version = self._args
        try:
            verify_batch(self.verification, entry, header, topic, partition, version)
        except KafkaException:
            self.refused = True
            raise


class _AcceptEveryBatch:
    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> None:
        return None


# A private hook for tests and benchmarks that build a partition's history below the coordinator (markers,
# aborted transactions, hanging ones on purpose): S4.4 explicitly bypassed. Library code never uses it.
_UNVERIFIED = TransactionVerification("<unverified test history>", _AcceptEveryBatch())
