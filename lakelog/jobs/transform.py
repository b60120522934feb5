"""Transform a topic into another exactly once per run: consume, transform, produce (S4.1, S4.2, S7.1, S7.3, S8.3).

A run reads every partition of the input from the group's committed offset (the
log start where the group has none) up to the partition's last stable offset as
seen when the run starts, hands the rows to `transform` as Arrow tables, and
writes what it returns to the output topic. It works in transactions of at most
`max_records_per_transaction` input records: each commits its output rows and
the input offsets it consumed together (KIP-447's `send_offsets_to_transaction`,
S7.1), so an input row is in the output once, whatever stops a run halfway.

The transactional id is stable per task (the Airflow operator uses
`lakelog.transform.<dag>.<task>.<map_index>`), so:

- a retry after a try that died inside a transaction aborts that transaction
  when it starts (`init_transactions`, S4.2) and goes on from the offsets the
  last committed transaction recorded;
- an attempt paused past its heartbeat and resumed after its retry is fenced at
  its next write (S4.1), or, if it was paused before it began, finds the
  group's offsets at the end and has nothing to do.

Offsets are committed as a simple consumer (group metadata with no member,
S6.4): the group coordinator accepts such a commit only while the group has no
members, so a transform needs a group of its own, and one run at a time per
transactional id (a second concurrent run fences the first).

The input is read through `lakelog.log.scan` (the plan Spark's Kafka source
uses) rather than `Consumer.consume`: it yields Arrow tables without a Python
object per record, and its plan is cut at the LSO once, at the start.

Nothing is written before the first batch's output has passed the schema check
(S8.3), unless an earlier attempt left a transaction holding the group's
offsets: that one is aborted first, since no offset can be read past it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import pyarrow as pa

from lakelog.client.admin.groups import read_group
from lakelog.client.producer import Producer
from lakelog.client.types import TopicPartition
from lakelog.config import storage_options as config_storage_options
from lakelog.config import validate_name
from lakelog.coordinator.group import GroupMetadata, fetch_offsets
from lakelog.errors import (
    FatalError,
    InvalidConfig,
    InvalidRequest,
    KafkaException,
    NonEmptyGroup,
    OffsetOutOfRange,
    PurgeQueue,
    UnstableOffsetCommit,
)
from lakelog.jobs.transform_output import OUTPUT_COLUMNS, check_output, milliseconds, outputs
from lakelog.jobs.transform_reader import Reader, Slice, offset_text, offsets_text, span
from lakelog.log import READ_COMMITTED, open_partition, topic_config
from lakelog.log.scan import EARLIEST, KAFKA_SCHEMA, LATEST, plan_scan
from lakelog.store import Location, open_root
from lakelog.store.io.retry import RetryPolicy

if TYPE_CHECKING:
    from lakelog.coordinator.group import OffsetRecord

logger = logging.getLogger(__name__)

TRANSFORM_ID_PREFIX = "lakelog.transform."
# How often a commit that failed with a retriable error is tried again before the transaction is aborted.
COMMIT_RETRIES = 5
TransformOutput: TypeAlias = pa.Table | pa.RecordBatch | Iterable[pa.Table | pa.RecordBatch] | None
Transform = Callable[[pa.Table], TransformOutput]


def transform_transactional_id(dag_id: str, task_id: str, map_index: int | None) -> str:
    """The transactional id of a transform task: one per (dag, task, map index), shared by all its attempts."""
    return f"{TRANSFORM_ID_PREFIX}{dag_id}.{task_id}.{-1 if map_index is None else map_index}"


@dataclass(frozen=True)
class TransformResult:
    """What a run did: records read and written, and the group's committed offset of each input partition."""

    input_topic: str
    output_topic: str
    group_id: str
    records_in: int
    records_out: int
    offsets: Mapping[int, int]
    transactions: int = 0
    transactional_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The operator's XCom: JSON-safe (partitions as text keys, as JSON makes them anyway)."""
        return {
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "group_id": self.group_id,
            "records_in": self.records_in,
            "records_out": self.records_out,
            "offsets": {str(partition): offset for partition, offset in sorted(self.offsets.items())},
        }


def run_transform(
    root: str | Location,
    input_topic: str,
    output_topic: str,
    group_id: str,
    transform: Transform,
    *,
    transactional_id: str,
    max_records_per_transaction: int = 10_000,
    storage_options: Mapping[str, Any] | None = None,
    producer_config: Mapping[str, Any] | None = None,
    should_stop: Callable[[], bool] | None = None,
    stable_offsets_timeout_s: float = 120.0,
) -> TransformResult:
    """Transform `input_topic` into `output_topic` once, as group `group_id`, up to the input's LSO at the start.

    `transform` is called with each batch of input: a pyarrow Table of data rows
    (read_committed: no aborted rows, no markers) of one partition, in offset
    order, at most `max_records_per_transaction` rows, with the columns of
    Spark's Kafka source: `key` (binary), `value` (binary), `topic` (string),
    `partition` (int32), `offset` (int64), `timestamp` (timestamp[us, UTC]),
    `timestampType` (int32) and `headers` (list<struct<key: string, value: binary>>).
    It returns a Table or RecordBatch (a list of them, or None for nothing)
    whose columns are `value` (binary or string, null for a tombstone) and
    optionally `key` (binary or string), `headers` (as above) and `timestamp`
    (a timestamp, or int64 milliseconds; null or absent: the time of writing).
    Output rows are spread over the output's partitions as the Producer spreads
    them: by key with the producer's `partitioner`. Any other column or type is
    refused with InvalidRequest, naming it: in the first batch, before anything
    is written; later, the open transaction is aborted (transactions committed
    before it stay, with their offsets).

    `producer_config` is the producer's config (`transaction.timeout.ms`,
    `batch.num.messages`, ...); `transactional.id` is `transactional_id`. Each
    transaction is logged (records in and out, offsets). `should_stop()` is
    asked before each batch and before each commit: once true, the open
    transaction is aborted and PurgeQueue raised.

    Raises UnknownTopicOrPartition for a missing topic and InvalidRequest for bad
    arguments, before anything is written; NonEmptyGroup if the group has
    members; ProducerFenced if a newer attempt with the same transactional id
    fenced this one (S4.1); UnstableOffsetCommit if another transaction holds the
    group's offsets past `stable_offsets_timeout_s`.
    """
    if not callable(transform):
        raise InvalidRequest(f"transform must be a callable taking a pyarrow Table, not {transform!r}")
    max_records = max_records_per_transaction
    if not isinstance(max_records, int) or isinstance(max_records, bool) or max_records < 1:
        raise InvalidRequest(f"max_records_per_transaction must be a positive integer, not {max_records!r}")
    validate_name(input_topic)
    validate_name(output_topic)
    validate_name(group_id, what="group.id")
    validate_name(transactional_id, what="transactional.id")
    if input_topic == output_topic:
        raise InvalidRequest(f"input and output are both {input_topic!r}: a transform must not read what it writes")
    config = dict(producer_config or {})
    if config.get("transactional.id") not in (None, "", transactional_id):
        raise InvalidConfig(
            f"transactional.id is {transactional_id!r} for this transform, not {config['transactional.id']!r}",
            key="transactional.id",
        )
    # A client config from a connection names the root and its storage options too: those are the same root.
    config.pop("lakelog.root", None)
    location = open_root(root, {**config_storage_options(config), **(storage_options or {})})
    input_partitions = topic_config(location, input_topic).num_partitions
    topic_config(location, output_topic)  # UnknownTopicOrPartition before anything is written
    job = _Job(
        location=location,
        input_topic=input_topic,
        output_topic=output_topic,
        group_id=group_id,
        transform=transform,
        transactional_id=transactional_id,
        max_records=max_records,
        # One append per output partition per transaction, unless the caller asks for smaller batches.
        producer_config={
            "linger.ms": 600_000,
            "batch.num.messages": min(max_records, 1_000_000),
            "batch.size": 1 << 30,
            **config,
            "lakelog.root": location,
            "transactional.id": transactional_id,
        },
        should_stop=should_stop or (lambda: False),
        stable_offsets_timeout_s=stable_offsets_timeout_s,
        input_partitions=input_partitions,
    )
    return _TransformRun(job).run()


# -- the run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    """The arguments of `run_transform`, checked: the root as a Location, the producer's whole config."""

    location: Location
    input_topic: str
    output_topic: str
    group_id: str
    transform: Transform
    transactional_id: str
    max_records: int
    producer_config: Mapping[str, Any]
    should_stop: Callable[[], bool]
    stable_offsets_timeout_s: float
    input_partitions: int


class _TransformRun:
    """One run of a job: its producer once it has taken over the transactional id, and what it did so far."""

    def __init__(self, job: _Job) -> None:
        self.job = job
        self.producer: Producer | None = None
        self.records_in = self.records_out = self.transactions = 0

    def run(self) -> TransformResult:
        committed = self._committed(wait=False)
        if committed is None:
            # An earlier attempt's transaction holds the offsets: only fencing it (S4.2) lets them be read.
            self._init_producer("an open transaction holds the group's offsets")
            committed = self._committed_after_init()
        reader = self._plan(committed)
        pending: list[Slice] = []
        if self.producer is None:
            # Up to the first rows: partitions passed on the way hold no data (empty, or only markers and aborted rows).
            while not pending or pending[-1].rows is None:
                piece = self._next_slice(reader, self.job.max_records)
                if piece is None:
                    logger.info(
                        "nothing to transform: group %s is at the LSO of every partition of %s (%s); nothing written",
                        self.job.group_id,
                        self.job.input_topic,
                        offsets_text(self.job.input_topic, committed),
                    )
                    return self._result(committed)
                pending.append(piece)
            # Checked before the first write (S8.3): a transform whose output is wrong writes nothing.
            pending[-1].outputs = self._transformed(pending[-1])
            self._init_producer("the first batch is ready")
            after_init = self._committed_after_init()
            if after_init != committed:
                logger.info(
                    "the group's offsets moved before this attempt fenced the last one (%s, not %s): planning again",
                    offsets_text(self.job.input_topic, after_init),
                    offsets_text(self.job.input_topic, committed),
                )
                committed, pending = after_init, []
                reader = self._plan(committed)
        positions = {p: offset for p, offset in committed.items() if offset is not None}
        done = False
        while not done:
            done = self._transaction(reader, pending, committed, positions)
        return self._result(committed)

    # -- offsets and the plan ------------------------------------------------------------

    def _committed_after_init(self) -> dict[int, int | None]:
        """The committed offsets once this run's producer is initialised: with it, `_committed` waits (S7.3) or raises."""
        committed = self._committed(wait=True)
        if committed is None:
            raise AssertionError("with a producer, the committed offsets are waited for, not given up on")
        return committed

    def _committed(self, wait: bool) -> dict[int, int | None] | None:
        """The group's committed offset of each input partition (None: none), read only; None if a transaction holds one
        (then, with `wait`, asked again after the producer's backoff until `stable_offsets_timeout_s`, S7.3)."""
        job = self.job
        backoff = None
        if wait and self.producer is not None:
            backoff = RetryPolicy.from_config(self.producer.config).start(job.stable_offsets_timeout_s)
        wanted = [(job.input_topic, p) for p in range(job.input_partitions)]
        while True:
            group = read_group(job.location, job.group_id)
            if group is not None and not group.is_empty():
                raise NonEmptyGroup(
                    f"group {job.group_id!r} has {len(group.members)} member(s); a transform commits as a simple "
                    f"consumer, which the coordinator accepts only for a group without members: give it a group of its own"
                )
            outcome = fetch_offsets(group, wanted, require_stable=True)
            if outcome.error is None:
                records = cast("dict[tuple[str, int], OffsetRecord | None]", outcome.response)  # OffsetFetch's answer
                return {tp[1]: None if record is None else record.offset for tp, record in records.items()}
            if not isinstance(outcome.error, UnstableOffsetCommit):
                raise outcome.error
            if backoff is None:
                return None
            if not backoff.wait():
                raise UnstableOffsetCommit(
                    f"another transaction held group {job.group_id!r}'s offsets of {job.input_topic} for "
                    f"{job.stable_offsets_timeout_s:g} s; retry once it has ended or the sweep has aborted it"
                )

    def _plan(self, committed: Mapping[int, int | None]) -> Reader:
        """Scans of every input partition from the committed offset (the log start if none) to the LSO now.

        Each scan pins the snapshot it was planned on, and every batch of the run is read from it."""
        job = self.job
        starts = {partition: EARLIEST if offset is None else offset for partition, offset in committed.items()}
        while True:
            try:
                scans = plan_scan(job.location, job.input_topic, READ_COMMITTED, starts, LATEST)
                break
            except OffsetOutOfRange:
                behind = self._behind_log_start(starts)
                if not behind:
                    raise
                starts.update(dict.fromkeys(behind, EARLIEST))
        logger.info(
            "plan: %s from the group's offsets to the LSO seen now (%s)",
            job.input_topic,
            ", ".join(f"{job.input_topic}-{s.partition} [{s.start_offset}, {s.end_offset})" for s in scans),
        )
        return Reader(scans)

    def _behind_log_start(self, starts: Mapping[int, int]) -> list[int]:
        """Partitions whose start is below the log start: retention removed rows the group had not read (S9.1)."""
        behind = []
        for partition, offset in starts.items():
            if offset == EARLIEST:
                continue
            log_start = open_partition(self.job.location, self.job.input_topic, partition).log_start_offset()
            if offset < log_start:
                logger.warning(
                    "%s-%d: the group's offset %d is below the log start %d (retention removed those rows): starting there",
                    self.job.input_topic,
                    partition,
                    offset,
                    log_start,
                )
                behind.append(partition)
        return behind

    # -- one transaction -----------------------------------------------------------------

    def _transaction(
        self, reader: Reader, pending: list[Slice], committed: dict[int, int | None], positions: dict[int, int]
    ) -> bool:
        """Transform up to max_records input records and commit them with their offsets; True once the input is done."""
        producer = self.producer
        assert producer is not None
        records_in = records_out = 0
        done = False
        producer.begin_transaction()
        try:
            while records_in < self.job.max_records:
                piece = pending.pop(0) if pending else self._next_slice(reader, self.job.max_records - records_in)
                if piece is None:
                    done = True
                    break
                if piece.rows is not None:
                    outputs = piece.outputs if piece.outputs is not None else self._transformed(piece)
                    for output in outputs:
                        self._produce(producer, output)
                        records_out += output.num_rows
                    records_in += piece.rows.num_rows
                positions[piece.partition] = piece.next_offset
            moved = {p: offset for p, offset in sorted(positions.items()) if committed.get(p) != offset}
            self._check_stop("before its commit")
            if not moved:
                producer.abort_transaction()  # nothing was written: ends the (empty) transaction without a write
                return True
            # The output goes before the offsets, as KIP-447's example does.
            producer.flush()
            offsets = [TopicPartition(self.job.input_topic, p, offset) for p, offset in moved.items()]
            # A simple consumer's commit, outside the group protocol: no member, no member epoch (S6.4).
            producer.send_offsets_to_transaction(offsets, GroupMetadata(self.job.group_id))
            self._commit(producer)
        except BaseException as error:
            self._abort(producer, error)
            raise
        self.transactions += 1
        self.records_in += records_in
        self.records_out += records_out
        logger.info(
            "transaction %d of %s committed: %d records in, %d out; offsets %s",
            self.transactions,
            self.job.transactional_id,
            records_in,
            records_out,
            ", ".join(f"{self.job.input_topic}-{p} {offset_text(committed.get(p))}->{offset}" for p, offset in moved.items()),
        )
        committed.update(moved)
        return done

    def _next_slice(self, reader: Reader, limit: int) -> Slice | None:
        self._check_stop("before its next batch")
        return reader.next_slice(limit)

    def _check_stop(self, where: str) -> None:
        if self.job.should_stop():
            raise PurgeQueue(f"the transform of {self.job.input_topic} was told to stop {where}; its open transaction is aborted")

    def _transformed(self, piece: Slice) -> list[pa.Table]:
        assert piece.rows is not None
        where = f"{self.job.input_topic}-{piece.partition} offsets {span(piece.rows)}"
        return [check_output(output, where) for output in outputs(self.job.transform(piece.rows), where)]

    def _produce(self, producer: Producer, output: pa.Table) -> None:
        count = output.num_rows
        if count == 0:
            return
        names = output.column_names
        values = output.column("value").to_pylist()
        keys = output.column("key").to_pylist() if "key" in names else [None] * count
        headers = (
            [None if h is None else [(item["key"], item["value"]) for item in h] for h in output.column("headers").to_pylist()]
            if "headers" in names
            else [None] * count
        )
        timestamps = milliseconds(output.column("timestamp")) if "timestamp" in names else [0] * count
        for value, key, header, timestamp in zip(values, keys, headers, timestamps, strict=True):
            producer.produce(self.job.output_topic, value=value, key=key, headers=header, timestamp=timestamp or 0)

    def _commit(self, producer: Producer) -> None:
        """Commit, trying a retriable failure again after the producer's backoff (retry.backoff.ms, .max.ms)."""
        backoff = RetryPolicy.from_config(producer.config).start(None)
        for attempt in range(COMMIT_RETRIES):
            try:
                producer.commit_transaction()
                return
            except KafkaException as error:
                if not error.error.retriable() or attempt == COMMIT_RETRIES - 1:
                    raise
                logger.warning("commit of %s failed (%s), trying again: %s", self.job.transactional_id, error.error.name(), error)
                backoff.wait()

    def _abort(self, producer: Producer, error: BaseException) -> None:
        """Abort the open transaction; if this producer was fenced meanwhile, say so (S4.1) rather than the error."""
        transactional_id = self.job.transactional_id
        try:
            producer.abort_transaction()
        except FatalError as fenced:
            # Fenced (S4.1): the newer attempt's init_transactions aborts what this one left open (S4.2).
            logger.warning(
                "transaction of %s left to the attempt that fenced this one (%s: %s); it was open because: %s",
                transactional_id,
                fenced.error.name(),
                fenced,
                error,
            )
            if fenced is not error:
                raise fenced from error
        except KafkaException as abort_error:
            # The next attempt's init or the coordinator sweep aborts it (S4.2, S4.7).
            logger.warning("transaction of %s could not be aborted (%s): %s", transactional_id, abort_error, error)
        else:
            logger.warning("transaction of %s aborted: %s", transactional_id, error)

    # -- clients -------------------------------------------------------------------------

    def _init_producer(self, why: str) -> None:
        producer = Producer(self.job.producer_config)
        producer.init_transactions()
        self.producer = producer
        logger.info(
            "%s: %s took over the transactional id, fencing earlier attempts (S4.1, S4.2)", why, self.job.transactional_id
        )

    def _result(self, committed: Mapping[int, int | None]) -> TransformResult:
        return TransformResult(
            self.job.input_topic,
            self.job.output_topic,
            self.job.group_id,
            self.records_in,
            self.records_out,
            {p: offset for p, offset in committed.items() if offset is not None},
            self.transactions,
            self.job.transactional_id,
        )


__all__ = [
    "KAFKA_SCHEMA",
    "OUTPUT_COLUMNS",
    "TRANSFORM_ID_PREFIX",
    "Transform",
    "TransformResult",
    "check_output",
    "run_transform",
    "transform_transactional_id",
]
