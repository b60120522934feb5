"""Random histories of a partition checked against a reference model of S5 (LSO, read_committed, aborted index).

Each example appends a random history over several producer ids: transactional
batches, COMMIT and ABORT markers (also for producers with nothing open),
plain batches, compactions, and transactions left open. After every step the
log, read by a handle that catches up incrementally and by a freshly opened one,
must agree with a model that walks the rows one by one. So must transaction
indexes that write snapshots every few offsets: one caught up after every
step, and a cold one per step that starts from the newest snapshot.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog.log import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AbortedTransaction,
    BatchHeader,
    ControlType,
    PartitionLog,
    create_topic,
    open_partition,
    payload_table,
)
from lakelog.log.partition_file import PARTITION_ORDER
from lakelog.log.transactions import TransactionIndex
from lakelog.log.verification import _UNVERIFIED
from lakelog.store.upkeep.maintenance import compact

PRODUCERS = (1, 2, 3)

steps = st.one_of(
    st.tuples(st.just("txn"), st.sampled_from(PRODUCERS), st.integers(1, 3)),
    st.tuples(st.just("plain"), st.just(0), st.integers(1, 3)),
    st.tuples(st.just("marker"), st.sampled_from(PRODUCERS), st.sampled_from([ControlType.COMMIT, ControlType.ABORT])),
    st.tuples(st.just("compact"), st.just(0), st.just(0)),
)


@dataclass
class Model:
    """The reference: every row as (producer id, kind, value), and each transactional row's fate."""

    rows: list[tuple[int, str, str]] = field(default_factory=list)

    def outcome(self) -> tuple[int, dict[int, int], list[AbortedTransaction], list[str], list[str]]:
        """(LSO, open transactions, aborted index, read_committed values, read_uncommitted values)."""
        open_first: dict[int, int] = {}
        members: dict[int, list[int]] = {}
        fate: dict[int, str] = {}
        aborted = []
        for offset, (producer_id, kind, _) in enumerate(self.rows):
            if kind == "txn":
                open_first.setdefault(producer_id, offset)
                members.setdefault(producer_id, []).append(offset)
            elif kind in ("COMMIT", "ABORT") and producer_id in open_first:
                for member in members.pop(producer_id):
                    fate[member] = kind
                first = open_first.pop(producer_id)
                if kind == "ABORT":
                    aborted.append(AbortedTransaction(producer_id, first, offset))
        lso = min(open_first.values(), default=len(self.rows))
        committed = [
            value
            for offset, (_, kind, value) in enumerate(self.rows[:lso])
            if kind == "plain" or kind == "txn" and fate[offset] == "COMMIT"
        ]
        uncommitted = [value for _, _, value in self.rows]
        return lso, open_first, aborted, committed, uncommitted


def read_values(log: PartitionLog, isolation_level: str, max_records: int) -> list[str]:
    out, offset = [], 0
    end = log.last_stable_offset() if isolation_level == READ_COMMITTED else log.high_watermark()
    last = -1
    while offset < end:
        fetched = log.fetch(offset, max_records=max_records, isolation_level=isolation_level)
        assert fetched.next_offset > offset
        for row in fetched.rows.to_pylist():
            assert row["offset"] > last
            last = row["offset"]
            out.append(row["value"].decode() if row["control"] is None else row["control"])
        offset = fetched.next_offset
    return out


def observed(log: PartitionLog, max_records: int):
    hw = log.high_watermark()
    return (
        log.last_stable_offset(),
        log.open_transactions(),
        log.aborted_transactions(0, hw),
        read_values(log, READ_COMMITTED, max_records),
        read_values(log, READ_UNCOMMITTED, max_records),
    )


names = itertools.count()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=st.lists(steps, min_size=1, max_size=10), max_records=st.integers(1, 4))
def test_S5_random_histories_match_the_reference_model(root, history, max_records):
    """S5.1-S5.4: LSO, open transactions, aborted index and both isolation levels, after every step."""
    topic = f"model-{next(names)}"
    create_topic(root, topic, 1)
    writer = open_partition(root, topic, 0)
    incremental = open_partition(root, topic, 0)
    model = Model()
    epochs = dict.fromkeys(PRODUCERS, 0)
    sequences = dict.fromkeys(PRODUCERS, 0)
    lso_seen = [0]
    snapshotting = TransactionIndex(snapshot_every_offsets=3)
    for step, (kind, producer_id, argument) in enumerate(history):
        if kind == "txn":
            texts = [f"{step}.{i}" for i in range(argument)]
            header = BatchHeader(producer_id, epochs[producer_id], sequences[producer_id], is_transactional=True)
            writer.append(payload_table([text.encode() for text in texts]), header, transaction=_UNVERIFIED)
            sequences[producer_id] += argument
            model.rows += [(producer_id, "txn", text) for text in texts]
        elif kind == "plain":
            texts = [f"{step}.{i}" for i in range(argument)]
            writer.append(payload_table([text.encode() for text in texts]))
            model.rows += [(-1, "plain", text) for text in texts]
        elif kind == "marker":
            epochs[producer_id] += 1
            sequences[producer_id] = 0
            writer.append_marker(producer_id, epochs[producer_id], argument)
            model.rows.append((producer_id, argument.value, argument.value))
        else:
            compact(writer.table, PARTITION_ORDER, fan_in=2)
        incremental.refresh()
        expected = model.outcome()
        assert observed(incremental, max_records) == expected
        assert observed(open_partition(root, topic, 0), max_records) == expected
        cold = TransactionIndex(snapshot_every_offsets=3)
        for index in (snapshotting, cold):
            index.catch_up(incremental.table, incremental.log_end_offset())
            state = (index.last_stable_offset(), index.open_transactions(), index.aborted_transactions(0, 1 << 62))
            assert state == expected[:3]
        lso_seen.append(incremental.last_stable_offset())
    assert lso_seen == sorted(lso_seen)
