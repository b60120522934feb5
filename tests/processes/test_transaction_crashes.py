"""Transactions across real processes: SIGKILL at every step of an end, zombies, a paused producer, a
read_committed reader beside writers (S4.1, S4.2, S4.5-S4.8, S5.1, S5.2, S8.2).

Jepsen's split (STYLE.md): txn_workers.py holds the clients, one process per
producer instance, reader and sweep; the nemesis is a process SIGKILLing itself
at an exact fault point of the coordinator, a second instance of a
transactional.id, or SIGSTOP/SIGCONT; the checker reads the raw rows of every
partition (data rows, markers, producer ids and epochs, from
`PartitionLog.fetch`), the `__transaction_state` records, and what a
read_committed Consumer reads.

Processes come from multiprocessing's "forkserver" context: the server is a
fresh interpreter that imports lakelog (and pyarrow, pandas) once and shares
nothing with the test process but the root; each worker is forked from it
before touching any table, so it starts in about 0.1 s instead of the 1 s and
more a spawned interpreter takes to import them, over some 80 processes here.
The server's environment is the one it started with, so each worker is handed
the test process's AWS_* settings (the S3 emulator's) before it runs.

Every test runs on a local folder and on an S3 prefix of the session's emulator
(S12.1). A commit there costs several times what it costs locally, so the s3
run of the crash matrix kills a process once at each fault point (both ends and
both finishers among them) rather than at every combination.
Random choices come from one seeded generator; the seed is printed (and set
with $LAKELOG_TEST_SEED to replay a run).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakelog import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from lakelog.coordinator import TransactionMetadata, TxnState, partition_for_transactional_id
from lakelog.coordinator.transaction.coordinator import (
    FAULT_AFTER_DECISION,
    FAULT_AFTER_MARKER,
    FAULT_BEFORE_COMPLETE,
    FAULT_BEFORE_COMPLETE_AND_BEGIN,
    TRANSACTION_STATE_LOG,
    TransactionCoordinator,
)
from lakelog.log import PartitionLog, create_topic, open_partition
from lakelog.log.partition import wall_clock_ms
from lakelog.log.topics import open_internal_partition
from processes import txn_workers

pytestmark = [pytest.mark.slow, pytest.mark.roots("local", "s3")]

TOPIC = "orders"
PARTITIONS = [0, 1, 2]
TRANSACTIONAL_ID = "orders-app"
WAIT_S = 60.0

CONTEXT = multiprocessing.get_context("forkserver")
# pandas too: pyarrow imports it on the first pa.array() of a list, which every producer makes.
CONTEXT.set_forkserver_preload(["processes.txn_workers", "pandas"])


@pytest.fixture
def lake(root) -> str:
    """The test's root (a local folder or an S3 prefix) with the topic in it."""
    create_topic(root, TOPIC, len(PARTITIONS))
    return root


# -- processes ------------------------------------------------------------------------------------


class Worker:
    """One worker process and the read end of its report pipe (see txn_workers)."""

    def __init__(self, target, *args) -> None:
        self.name = target.__name__
        self.conn, child = CONTEXT.Pipe()
        environment = {key: value for key, value in os.environ.items() if key.startswith("AWS_")}
        self.process = CONTEXT.Process(target=txn_workers.in_environment, args=(environment, target, child, *args), daemon=True)
        self.process.start()
        child.close()
        self.reports: list[tuple] = []

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, message) -> None:
        self.conn.send(message)

    def next_report(self, timeout_s: float = WAIT_S) -> tuple | None:
        """The next report, or None once the process has closed its end (exited)."""
        if not self.conn.poll(timeout_s):
            raise AssertionError(f"{self.name}: no report within {timeout_s:g} s; last ones: {self.reports[-5:]}")
        try:
            report = self.conn.recv()
        except EOFError:
            return None
        if report[0] == "crashed":
            raise AssertionError(f"{self.name} crashed:\n{report[1]}")
        self.reports.append(report)
        return report

    def wait_for(self, kind: str, timeout_s: float = WAIT_S) -> tuple:
        deadline = time.monotonic() + timeout_s
        while True:
            report = self.next_report(max(deadline - time.monotonic(), 0.0))
            if report is None:
                self.process.join(5)
                raise AssertionError(
                    f"{self.name} exited (code {self.process.exitcode}) before reporting {kind!r}: {self.reports[-5:]}"
                )
            if report[0] == kind:
                return report

    def finish(self, timeout_s: float = WAIT_S) -> int:
        """Collect every report until the process exits; return its exit code."""
        deadline = time.monotonic() + timeout_s
        while self.next_report(max(deadline - time.monotonic(), 0.0)) is not None:
            pass
        self.process.join(max(deadline - time.monotonic(), 1.0))
        assert self.process.exitcode is not None, f"{self.name} did not exit"
        return self.process.exitcode

    def of_kind(self, kind: str) -> list[tuple]:
        return [report for report in self.reports if report[0] == kind]


@pytest.fixture
def start():
    """Start a worker process: `start(txn_workers.sweep, root)`; any left running is killed at teardown."""
    started: list[Worker] = []

    def run(target, *args) -> Worker:
        worker = Worker(target, *args)
        started.append(worker)
        return worker

    yield run
    for worker in started:
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(5)
        worker.conn.close()


def is_stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


# -- the checker: raw rows --------------------------------------------------------------------------


def read_rows(log: PartitionLog) -> list[dict]:
    """Every row of a partition, data and control, in offset order, on the latest snapshot."""
    log.refresh()
    rows: list[dict] = []
    offset = log.log_start_offset()
    while offset < log.log_end_offset():
        fetched = log.fetch(offset, max_records=100_000, max_bytes=1 << 30)
        rows.extend(fetched.rows.to_pylist())
        offset = fetched.next_offset
    return rows


def partition_rows(root: str) -> dict[int, list[dict]]:
    return {partition: read_rows(open_partition(root, TOPIC, partition)) for partition in PARTITIONS}


@dataclass
class Transaction:
    """One producer id's transactional data rows in a partition, up to the marker that closed them (None: open)."""

    producer_id: int
    rows: list[dict]
    marker: dict | None = None

    @property
    def outcome(self) -> str:
        return "OPEN" if self.marker is None else self.marker["control"]

    @property
    def names(self) -> set[str]:
        return {json.loads(row["value"])["txn"] for row in self.rows}


def fold_transactions(rows: list[dict]) -> list[Transaction]:
    """A partition's rows folded into transactions: a producer id's data rows up to its next marker.
    Markers carry a bumped epoch, so they are matched to data by producer id alone (as the LSO is)."""
    open_by_producer: dict[int, Transaction] = {}
    transactions: list[Transaction] = []
    for row in rows:
        assert row["is_transactional"], f"offset {row['offset']}: only transactional producers write here"
        producer_id = row["producer_id"]
        if row["control"] is None:
            open_by_producer.setdefault(producer_id, Transaction(producer_id, [])).rows.append(row)
        else:
            transaction = open_by_producer.pop(producer_id, None) or Transaction(producer_id, [])
            transaction.marker = row
            transactions.append(transaction)
    return transactions + list(open_by_producer.values())


def check_markers_fence(rows: list[dict]) -> None:
    """S4.6 on raw rows: a marker's epoch is above the epoch of the data it closes; a producer id's markers
    never repeat an epoch; after a marker no data row of its producer id carries an older epoch."""
    fenced_below: dict[int, int] = {}
    for row in rows:
        producer_id, epoch = row["producer_id"], row["producer_epoch"]
        floor = fenced_below.get(producer_id, -1)
        if row["control"] is None:
            assert epoch >= floor, (
                f"offset {row['offset']}: data of producer {producer_id} at epoch {epoch} landed behind "
                f"its marker at epoch {floor}"
            )
        else:
            assert epoch > floor, f"offset {row['offset']}: a second marker of producer {producer_id} at epoch {epoch}"
            fenced_below[producer_id] = epoch
    for transaction in fold_transactions(rows):
        if transaction.marker is not None:
            assert all(row["producer_epoch"] < transaction.marker["producer_epoch"] for row in transaction.rows)


def outcomes(rows_by_partition: dict[int, list[dict]]) -> dict[str, str]:
    """Each transaction's outcome (COMMIT, ABORT or OPEN) from the raw rows of every partition.

    Checks that it is one outcome in every partition the transaction wrote (S4.5,
    S4.8), that each of its messages is there once, and all of them if the
    writer knew how many (`n` of txn_value); and S4.6 in every partition.
    """
    seen: dict[str, set[str]] = defaultdict(set)
    indices: dict[str, list[int]] = defaultdict(list)
    counts: dict[str, int] = {}
    for rows in rows_by_partition.values():
        check_markers_fence(rows)
        for transaction in fold_transactions(rows):
            for row in transaction.rows:
                value = json.loads(row["value"])
                seen[value["txn"]].add(transaction.outcome)
                indices[value["txn"]].append(value["i"])
                counts[value["txn"]] = value["n"]
    for name, found in seen.items():
        assert len(found) == 1, f"transaction {name} is {sorted(found)} across partitions"
        expected = list(range(counts[name])) if counts[name] else sorted(set(indices[name]))
        assert sorted(indices[name]) == expected, f"transaction {name} has messages {sorted(indices[name])}"
    return {name: found.pop() for name, found in seen.items()}


def read_committed_model(rows: list[dict]) -> list[tuple[int, bytes]]:
    """What S5.1/S5.2 let a read_committed reader of this partition see, from its raw rows: data rows
    of committed transactions below the first offset of the earliest open one (the LSO)."""
    transactions = fold_transactions(rows)
    stable = min((t.rows[0]["offset"] for t in transactions if t.outcome == "OPEN"), default=len(rows))
    visible = [row for t in transactions if t.outcome == "COMMIT" for row in t.rows if row["offset"] < stable]
    return sorted((row["offset"], row["value"]) for row in visible)


def consume_read_committed(root: str, topic: str = TOPIC, partitions=PARTITIONS) -> dict[int, list[tuple[int, bytes]]]:
    """Everything a read_committed Consumer reads from the beginning up to each partition's end (EOF)."""
    consumer = Consumer({"lakelog.root": root, "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in partitions])
    read: dict[int, list[tuple[int, bytes]]] = {partition: [] for partition in partitions}
    at_end: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    while at_end != set(partitions):
        assert time.monotonic() < deadline, f"no EOF from partitions {set(partitions) - at_end}"
        for message in consumer.consume(100, timeout=0.1):
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
            else:
                read[message.partition()].append((message.offset(), message.value()))
    consumer.close()
    return read


def names_read(read: dict[int, list[tuple[int, bytes]]]) -> dict[str, int]:
    """Transaction name -> how many of its messages were read."""
    counts: dict[str, int] = defaultdict(int)
    for messages in read.values():
        for _, value in messages:
            counts[json.loads(value)["txn"]] += 1
    return dict(counts)


def state_history(root: str, transactional_id: str) -> list[TransactionMetadata]:
    """Every `__transaction_state` record of the id, in the order they were appended."""
    count = TransactionCoordinator(root).num_partitions
    log = open_internal_partition(root, TRANSACTION_STATE_LOG, partition_for_transactional_id(transactional_id, count), count)
    records = [TransactionMetadata.from_row(json.loads(row["value"])) for row in read_rows(log) if row["control"] is None]
    return [record for record in records if record.transactional_id == transactional_id]


def states(history: list[TransactionMetadata]) -> list[str]:
    """The states of a history, with repeats of Ongoing (a transaction widened) folded into one."""
    folded: list[str] = []
    for record in history:
        if not (folded and folded[-1] == record.state.value == TxnState.ONGOING.value):
            folded.append(record.state.value)
    return folded


def describe(root: str) -> TransactionMetadata:
    metadata = TransactionCoordinator(root).describe(TRANSACTIONAL_ID)
    assert metadata is not None
    return metadata


# -- (1) the crash matrix -----------------------------------------------------------------------------


CRASH_POINTS = [
    (FAULT_AFTER_DECISION, None),
    (FAULT_AFTER_MARKER, 0),
    (FAULT_AFTER_MARKER, 1),
    (FAULT_AFTER_MARKER, 2),
    (FAULT_BEFORE_COMPLETE, None),
    # The end returned with its markers written; the next transaction's add_partitions dies before its one
    # commit of Complete* and the new Ongoing.
    (FAULT_BEFORE_COMPLETE_AND_BEGIN, None),
]


def markers_written_at(point: str, index: int | None) -> tuple[set[int], set[int]]:
    """The partitions that surely hold a marker when a process is killed at this fault point, and those that may.
    Markers are written in parallel: killed after marker `index`, any other may be written or not yet."""
    everything = set(PARTITIONS)
    if point == FAULT_AFTER_DECISION:
        return set(), set()
    if point == FAULT_AFTER_MARKER:
        return {PARTITIONS[index]}, everything
    return everything, everything


def crash_while_ending(lake: str, start, records: int, commit: bool, point: str, index: int | None) -> TransactionMetadata:
    """Commit t1, then end t2 (commit or abort) over three partitions in a process SIGKILLed at the fault
    point; check the half-done state it leaves and return the coordinator's Prepare* record."""
    decided = "COMMIT" if commit else "ABORT"
    crashed = start(txn_workers.crash_in_end, lake, TOPIC, TRANSACTIONAL_ID, PARTITIONS, records, commit, point, index)
    assert crashed.wait_for("killing")[1:] == (point, index)
    assert crashed.finish() == -signal.SIGKILL

    # Half done: the decision is recorded, markers are in the first partitions only.
    prepared = describe(lake)
    assert prepared.state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    assert prepared.partitions == {(TOPIC, partition) for partition in PARTITIONS}
    surely, maybe = markers_written_at(point, index)
    rows = partition_rows(lake)
    written = set()
    for partition in PARTITIONS:
        t1, t2, *rest = fold_transactions(rows[partition])
        assert rest == [], "nothing of the next transaction is written before its add_partitions"
        assert (t1.names, t1.outcome, t2.names) == ({"t1"}, "COMMIT", {"t2"})
        assert {row["producer_epoch"] for row in t2.rows} == {prepared.producer_epoch - 1}
        if t2.outcome != "OPEN":
            assert (t2.outcome, t2.marker["producer_epoch"]) == (decided, prepared.producer_epoch)
            written.add(partition)
    assert surely <= written <= maybe, f"markers in {sorted(written)} after a kill at {point} {index}"
    print(f"killed at {point} {index}: markers in partitions {sorted(written)}")
    # S5: where t2 is still open its rows (and all after) wait below the LSO; where its marker is, a
    # COMMIT shows them and an ABORT hides them. Nothing of t2 is read where it is not decided.
    half_done = consume_read_committed(lake)
    assert half_done == {partition: read_committed_model(rows[partition]) for partition in PARTITIONS}
    t2_read = {
        partition for partition, messages in half_done.items() for _, value in messages if json.loads(value)["txn"] == "t2"
    }
    assert t2_read == (written if commit else set())
    return prepared


def check_finished(lake: str, prepared: TransactionMetadata, records: int, successor: bool, racing_sweeps: bool = False) -> None:
    """t2 is finished as decided, once: one Complete* record, one marker of the decided kind per partition;
    with a `successor` instance, its t3 followed at the next epoch; a read_committed reader reads exactly
    the committed transactions, whole (S4.5, S4.8). The successor's commit leaves its CompleteCommit to
    its next transaction (none here), unless a sweep `racing_sweeps` beside it rolled it forward."""
    commit = prepared.state is TxnState.PREPARE_COMMIT
    decided = "COMMIT" if commit else "ABORT"
    history = state_history(lake, TRANSACTIONAL_ID)
    ending = ["Ongoing", prepared.state.value, "CompleteCommit" if commit else "CompleteAbort"]
    # t1's CompleteCommit was recorded by t2's first add_partitions, in one commit with t2's Ongoing.
    expected = ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", *ending]
    if successor:
        expected += ["Empty", "Ongoing", "PrepareCommit"]
        if racing_sweeps and states(history)[-1] == "CompleteCommit":
            expected.append("CompleteCommit")
    assert states(history) == expected
    # One Complete* per transaction: t1's, t2's (the one the crash left undone), t3's.
    complete = [record for record in history if record.state.is_complete][1]
    assert (complete.producer_id, complete.producer_epoch) == (prepared.producer_id, prepared.producer_epoch)
    if not successor:
        assert describe(lake) == complete

    rows = partition_rows(lake)
    for partition in PARTITIONS:
        transactions = fold_transactions(rows[partition])
        t2 = [transaction for transaction in transactions if transaction.names == {"t2"}]
        assert len(t2) == 1 and t2[0].outcome == decided
        ends_of_t2 = [
            (row["offset"], row["control"])
            for row in rows[partition]
            if row["control"] and (row["producer_id"], row["producer_epoch"]) == (prepared.producer_id, prepared.producer_epoch)
        ]
        assert [control for _, control in ends_of_t2] == [decided], f"partition {partition}: markers {ends_of_t2}"
        assert len(transactions) == (3 if successor else 2)
        if successor:
            t3 = transactions[2]
            assert t3.names == {"t3"}
            assert {row["producer_epoch"] for row in t3.rows} == {prepared.producer_epoch + 1}
            assert [row["sequence"] for row in t3.rows] == list(range(records))
    expected_outcomes = {"t1": "COMMIT", "t2": decided}
    if successor:
        expected_outcomes["t3"] = "COMMIT"
    assert outcomes(rows) == expected_outcomes
    # S4.8: a read_committed reader now reads every committed transaction whole, and nothing aborted.
    committed = {name: records * len(PARTITIONS) for name, outcome in expected_outcomes.items() if outcome == "COMMIT"}
    assert names_read(consume_read_committed(lake)) == committed


def crash_point_id(point: str, index: int | None) -> str:
    return f"{point}-{index}" if index is not None else point


# On S3: each fault point once, with both ends and both finishers among them.
S3_CRASH_CASES = [
    (commit, point, index, finisher)
    for (point, index), commit, finisher in zip(
        CRASH_POINTS,
        [True, False, True, False, True, False],
        ["init", "sweep", "sweep", "init", "init", "sweep"],
        strict=True,
    )
]


@pytest.mark.roots("local")
@pytest.mark.parametrize("finisher", ["init", "sweep"])
@pytest.mark.parametrize("point, index", CRASH_POINTS, ids=[crash_point_id(*point) for point in CRASH_POINTS])
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_S4_2_S4_5_producer_killed_while_ending_a_transaction_is_finished_by_the_next_one(
    lake, rng, start, commit, point, index, finisher
):
    """A producer commits t1, then ends t2 over three partitions and is SIGKILLed at a fault point. The
    coordinator holds the decision (Prepare*) and the partitions the markers written so far; a new instance's
    init_transactions (S4.2) or a sweep in another process (S8.2) finishes it: one marker of the decided kind
    per partition, Complete* recorded, t2's rows committed or aborted everywhere. A read_committed Consumer
    reads t2's rows only where a COMMIT marker is, before and after (S4.8, S5.2)."""
    kill_while_ending_then_finish(lake, rng, start, commit, point, index, finisher)


@pytest.mark.roots("s3")
@pytest.mark.parametrize(
    "commit, point, index, finisher",
    S3_CRASH_CASES,
    ids=[f"{'commit' if c else 'abort'}-{crash_point_id(p, i)}-{f}" for c, p, i, f in S3_CRASH_CASES],
)
def test_S4_2_S4_5_producer_killed_while_ending_a_transaction_is_finished_by_the_next_one_on_s3(
    lake, rng, start, commit, point, index, finisher
):
    """The test above on an S3 root, killed once at each fault point (S12.1)."""
    kill_while_ending_then_finish(lake, rng, start, commit, point, index, finisher)


def kill_while_ending_then_finish(lake, rng, start, commit: bool, point: str, index: int | None, finisher: str) -> None:
    records = rng.randint(1, 3)
    prepared = crash_while_ending(lake, start, records, commit, point, index)
    if finisher == "init":
        successor = start(txn_workers.init_and_commit, lake, TOPIC, TRANSACTIONAL_ID, PARTITIONS, records, "t3")
        assert successor.finish() == 0
        assert successor.of_kind("committed") == [("committed", "t3")]
    else:
        sweeper = start(txn_workers.sweep, lake)
        assert sweeper.wait_for("swept")[1:] == ([], [TRANSACTIONAL_ID], [])
        assert sweeper.finish() == 0
    check_finished(lake, prepared, records, successor=finisher == "init")


@pytest.mark.roots("local")
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_S8_2_S4_5_sweeps_racing_the_next_init_finish_a_killed_end_exactly_once(lake, rng, start, commit):
    """As above, killed after its first marker; then two sweeps and a new instance's init start at once, all
    finishing the same decided end. However they interleave, each partition gets one marker, the id one
    Complete* record, and the new instance commits its own transaction after it (S8.2: the sweep is safe
    beside itself and beside clients)."""
    race_sweeps_and_init_after_a_kill(lake, rng, start, commit)


@pytest.mark.roots("s3")
def test_S8_2_S4_5_sweeps_racing_the_next_init_finish_a_killed_commit_exactly_once_on_s3(lake, rng, start):
    """The test above on an S3 root, for a commit (rolled forward by whoever comes first) (S12.1)."""
    race_sweeps_and_init_after_a_kill(lake, rng, start, commit=True)


def race_sweeps_and_init_after_a_kill(lake, rng, start, commit: bool) -> None:
    records = rng.randint(1, 3)
    prepared = crash_while_ending(lake, start, records, commit, FAULT_AFTER_MARKER, 0)
    jobs = [
        (txn_workers.sweep, lake),
        (txn_workers.sweep, lake),
        (txn_workers.init_and_commit, lake, TOPIC, TRANSACTIONAL_ID, PARTITIONS, records, "t3"),
    ]
    rng.shuffle(jobs)
    finishers = [start(*job) for job in jobs]
    for finisher in finishers:
        assert finisher.finish() == 0
    swept = [report for finisher in finishers for report in finisher.of_kind("swept")]
    print(f"sweeps reported (aborted, rolled forward, expired): {[report[1:] for report in swept]}")
    assert len(swept) == 2 and all(report[1] == [] and report[3] == [] for report in swept)
    check_finished(lake, prepared, records, successor=True, racing_sweeps=True)


# -- (2) zombies --------------------------------------------------------------------------------------


def read_all(root: str) -> dict:
    """The rows of every table the tests write: topic partitions and the id's __transaction_state records."""
    return {"partitions": partition_rows(root), "states": state_history(root, TRANSACTIONAL_ID)}


@pytest.mark.roots("local")
@pytest.mark.parametrize("first_call", ["produce_flush_joined", "produce_flush_new", "commit", "abort"])
def test_S4_1_S4_2_after_a_newer_instance_inits_every_call_of_the_older_one_is_fenced(lake, rng, start, first_call):
    """Two processes with one transactional.id. The older one writes to partitions 0 and 1 and waits; the newer
    one inits (fencing it and aborting its transaction, S4.2) and commits. Then every transactional call of the
    older one, `first_call` first (each of those meets a different check), fails with a fatal ProducerFenced,
    it writes nothing more anywhere (S8.3), and none of its data is in a committed transaction."""
    check_every_call_of_a_zombie_is_fenced(lake, rng, start, first_call)


@pytest.mark.roots("s3")
@pytest.mark.parametrize("first_call", ["produce_flush_joined", "commit"])
def test_S4_1_S4_2_after_a_newer_instance_inits_every_call_of_the_older_one_is_fenced_on_s3(lake, rng, start, first_call):
    """The test above on an S3 root (S12.1), first meeting the partition's fence (a marker's epoch) or the
    coordinator's; every variant makes all the calls."""
    check_every_call_of_a_zombie_is_fenced(lake, rng, start, first_call)


def check_every_call_of_a_zombie_is_fenced(lake, rng, start, first_call: str) -> None:
    records = rng.randint(1, 3)
    older = start(txn_workers.zombie, lake, TOPIC, TRANSACTIONAL_ID, [0, 1], records, first_call)
    older.wait_for("written")
    newer = start(txn_workers.init_and_commit, lake, TOPIC, TRANSACTIONAL_ID, PARTITIONS, records, "new")
    assert newer.finish() == 0
    before = read_all(lake)
    older.send("go")
    assert older.finish() == 0

    fenced = ("ProducerFenced", "PRODUCER_FENCED", True)
    results = {report[1]: report for report in older.reports if report[0] in ("failed", "returned")}
    assert set(results) == set(txn_workers.ZOMBIE_CALLS)
    for call, report in results.items():
        if call == first_call and call.startswith("produce_flush"):
            # confluent-kafka's way: the failed write is reported to its delivery callback; the
            # producer is unusable from then on.
            assert report == ("returned", call, [("PRODUCER_FENCED", True)])
        else:
            assert report[:3] == ("failed", call, fenced), report
    assert read_all(lake) == before, "a fenced call changed a table (S8.3)"

    history = state_history(lake, TRANSACTIONAL_ID)
    # The newer instance's commit leaves its CompleteCommit to its next transaction (S4.5).
    assert states(history) == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort", "Empty", "Ongoing", "PrepareCommit"]
    fence = history[2]
    assert fence.last_producer_epoch == -1, "the abort was the newer init's fencing, not the older one's request"
    rows = partition_rows(lake)
    assert outcomes(rows) == {"old": "ABORT", "new": "COMMIT"}
    assert names_read(consume_read_committed(lake)) == {"new": records * len(PARTITIONS)}
    for partition in (0, 1):
        old, new = fold_transactions(rows[partition])
        assert (old.names, old.marker["producer_epoch"]) == ({"old"}, fence.producer_epoch)
        assert {row["producer_epoch"] for row in old.rows} == {fence.producer_epoch - 1}
        assert {row["producer_epoch"] for row in new.rows} == {fence.producer_epoch + 1}


@pytest.mark.parametrize("pause", ["anywhere", "after_add_partitions"])
def test_S4_7_S4_6_paused_producer_resumed_after_the_sweep_aborted_it_cannot_write_behind_the_abort(lake, rng, start, pause):
    """A producer with transaction.timeout.ms=1000 writes round robin over three partitions, one message per
    flush, and is SIGSTOPped mid-transaction: by the test at a random moment ("anywhere"), or by itself just
    after the coordinator added its next partition to the transaction and before its first write there
    ("after_add_partitions": the write was verified before the abort, only the marker's epoch can fence it,
    KIP-890). Past its timeout a sweep in another process aborts the transaction with an epoch bump (S4.7).
    Resumed (SIGCONT), its next write and its commit fail fenced, nothing it does after the sweep lands, and
    no row of its old epoch is behind an ABORT marker in any partition (S4.6)."""
    timeout_ms = 1000
    # Round robin: the (k+1)-th write is the first to partition k, for k < 3.
    stop_after = rng.randint(1, 2) if pause == "after_add_partitions" else rng.randint(1, 5)
    pause_at = stop_after + 1 if pause == "after_add_partitions" else None
    writer = start(txn_workers.produce_until_fenced, lake, TOPIC, TRANSACTIONAL_ID, PARTITIONS, timeout_ms, 200, pause_at)
    writer.wait_for("begun")
    for _ in range(stop_after):
        writer.wait_for("delivered")
    if pause == "after_add_partitions":
        assert writer.wait_for("pausing")[1] == [(TOPIC, partition) for partition in PARTITIONS[: stop_after + 1]]
    else:
        time.sleep(rng.uniform(0.0, 0.1))
        os.kill(writer.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while not is_stopped(writer.pid):
        assert time.monotonic() < deadline, "the writer did not stop"
        time.sleep(0.01)

    ongoing = describe(lake)
    assert ongoing.state is TxnState.ONGOING
    while wall_clock_ms() <= ongoing.txn_start_ms + timeout_ms + 50:
        time.sleep(0.05)
    sweeper = start(txn_workers.sweep, lake)
    assert sweeper.wait_for("swept")[1:] == ([TRANSACTIONAL_ID], [], [])
    assert sweeper.finish() == 0
    aborted = describe(lake)
    assert (aborted.state, aborted.producer_id) == (TxnState.COMPLETE_ABORT, ongoing.producer_id)
    assert aborted.producer_epoch == ongoing.producer_epoch + 1
    at_sweep = partition_rows(lake)

    os.kill(writer.pid, signal.SIGCONT)
    assert writer.finish() == 0
    print(f"stopped after {stop_after}+ deliveries; the writer reported {writer.reports[-2:]}")
    fenced = ("ProducerFenced", "PRODUCER_FENCED", True)
    [failure] = [report for report in writer.reports if report[0] in ("delivery failed", "produce failed", "never fenced")]
    if failure[0] == "delivery failed" or pause == "after_add_partitions":
        assert [(name, fatal) for name, fatal, _ in failure[1]] == [("PRODUCER_FENCED", True)], failure
    else:
        assert failure == ("produce failed", fenced)
    assert writer.reports[-1] == ("commit failed", fenced)

    rows = partition_rows(lake)
    assert rows == at_sweep, "the resumed producer wrote after the sweep aborted its transaction"
    assert outcomes(rows) == {"stopped": "ABORT"}
    assert names_read(consume_read_committed(lake)) == {}
    producer_id, old_epoch = ongoing.producer_id, ongoing.producer_epoch
    delivered = {(report[2], report[3]): report[4] for report in writer.of_kind("delivered")}
    assert len(delivered) >= stop_after
    for partition in PARTITIONS:
        for offset in [offset for (p, offset) in delivered if p == partition]:
            assert rows[partition][offset]["value"] == delivered[(partition, offset)]
        markers = [row for row in rows[partition] if row["control"] is not None]
        data = [row for row in rows[partition] if row["control"] is None]
        if (TOPIC, partition) not in ongoing.partitions:
            assert rows[partition] == []
            continue
        assert [(row["control"], row["producer_id"], row["producer_epoch"]) for row in markers] == [
            ("ABORT", producer_id, old_epoch + 1)
        ]
        assert all(
            row["offset"] < markers[0]["offset"]
            for row in data
            if (row["producer_id"], row["producer_epoch"]) == (producer_id, old_epoch)
        )
        assert len(data) == len([key for key in delivered if key[0] == partition])


def test_S4_1_S4_5_a_commit_racing_a_newer_instances_init_is_all_or_nothing_and_its_answer_says_which(lake, rng, start):
    """Rounds of: a process has written a transaction to three partitions and commits it while a new instance
    of its transactional.id inits, each after a random delay. Either the commit was decided first (the init
    then rolls it forward, S4.2) or the init fenced it first (S4.1); the transaction is committed everywhere
    exactly when commit_transaction returned, and aborted everywhere when it raised ProducerFenced."""
    rounds, answers = 4, []
    for round_ in range(rounds):
        transactional_id, name = f"racer-{round_}", f"r{round_}"
        committer = start(txn_workers.commit_on_go, lake, TOPIC, transactional_id, PARTITIONS, rng.randint(1, 3), name)
        newcomer = start(txn_workers.init_on_go, lake, transactional_id)
        committer.wait_for("written")
        newcomer.wait_for("ready")
        # An init has more to do before it decides (it opens the coordinator's log): give it a head start.
        committer.send(("go", rng.uniform(0.0, 0.25)))
        newcomer.send(("go", rng.uniform(0.0, 0.1)))
        assert committer.finish() == 0 and newcomer.finish() == 0
        assert newcomer.of_kind("initialised")
        [answer] = [report for report in committer.reports if report[0] in ("committed", "commit failed")]
        answers.append(answer)
        outcome = outcomes(partition_rows(lake))[name]
        if answer == ("committed",):
            assert outcome == "COMMIT"
        else:
            assert answer == ("commit failed", ("ProducerFenced", "PRODUCER_FENCED", True))
            assert outcome == "ABORT"
        assert TransactionCoordinator(lake).describe(transactional_id).state is TxnState.EMPTY
    print(f"answers: {answers}")
    committed = {f"r{round_}" for round_, answer in enumerate(answers) if answer == ("committed",)}
    assert set(names_read(consume_read_committed(lake))) == committed


# -- (3) a read_committed reader beside writers -------------------------------------------------------


def test_S4_8_S5_read_committed_reader_beside_committing_and_aborting_writers_sees_only_whole_committed_transactions(
    lake, rng, start, root_kind
):
    """Two writer processes run transactions over 4 partitions, committing or aborting each at random, while a
    reader process polls them with a read_committed Consumer (3 records per fetch, so it reads in small steps).
    Its offsets only grow in every partition; whenever it reaches a partition's end (EOF at offset X) it has
    read exactly the committed data rows below X, as the final log decides them (S5.1, S5.2): never a row of
    an open or aborted transaction, never part of one's rows in a partition; in the end it has read every
    committed transaction whole and no aborted one (S4.8). Message values name their transaction, its size
    and its writer's intent (txn_value), so the checker needs nothing else."""
    topic, partitions = "events", [0, 1, 2, 3]
    create_topic(lake, topic, len(partitions))
    transactions = 10 if root_kind == "local" else 5  # per writer; a transaction is ~10 commits
    # About a third aborted, and at least one of each outcome, so there is something to tell apart.
    plan = ["abort" if rng.random() < 0.35 else "commit" for _ in range(2 * transactions)]
    if len(set(plan)) == 1:
        plan[rng.randrange(len(plan))] = "commit" if plan[0] == "abort" else "abort"
    reader = start(txn_workers.read_committed, lake, topic, partitions)
    writers = [
        start(
            txn_workers.write_transactions,
            lake,
            topic,
            f"writer-{w}",
            partitions,
            plan[w * transactions : (w + 1) * transactions],
            rng.randrange(2**32),
        )
        for w in range(2)
    ]
    for writer in writers:
        assert writer.finish(3 * WAIT_S) == 0
    reader.send("stop")
    assert reader.finish() == 0

    ended = [report for writer in writers for report in writer.of_kind("ended")]
    assert len(ended) == 2 * transactions
    committed = {name: count for _, name, outcome, count in ended if outcome == "commit"}
    aborted = {name for _, name, outcome, _ in ended if outcome == "abort"}
    print(f"{len(committed)} committed, {len(aborted)} aborted; the reader reported {len(reader.reports)} events")
    assert committed and aborted, "the seed chose only one outcome: nothing to tell apart"

    rows = {partition: read_rows(open_partition(lake, topic, partition)) for partition in partitions}
    assert outcomes(rows) == {**dict.fromkeys(committed, "COMMIT"), **dict.fromkeys(aborted, "ABORT")}
    history = reader.reports
    read: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    eofs_before_the_end = 0
    for event in history:
        if event[0] == "read":
            _, partition, offset, value = event
            assert not read[partition] or offset > read[partition][-1][0], f"partition {partition} went back to {offset}"
            read[partition].append((offset, value))
        elif event[0] == "eof":
            _, partition, offset = event
            expected = [(o, v) for o, v in read_committed_model(rows[partition]) if o < offset]
            assert read[partition] == expected, f"at EOF {offset} of partition {partition} the reader had read otherwise"
            eofs_before_the_end += offset < len(rows[partition])
    print(f"the reader hit {eofs_before_the_end} partition ends while the writers were still writing")
    assert eofs_before_the_end > 0, "the reader never caught up with the writers: it read nothing beside them"
    assert history[-1] == ("caught up", [len(rows[partition]) for partition in partitions])
    assert dict(read) == {partition: read_committed_model(rows[partition]) for partition in partitions if rows[partition]}
    assert names_read(read) == committed


def test_S4_4_S8_3_a_producer_killed_in_its_add_while_its_appends_wrote_their_files_leaves_nothing_visible(lake, start):
    """The appends of a transaction's first batches write their files beside the add of their partitions and put
    their commits only once the add is in (S4.4). Killed in the add, after every append wrote its file: no
    partition holds a row of the transaction (nor an open one holding the LSO back), the coordinator never heard
    of it, and the next instance's transaction commits alone. The files are debris no commit names (S8.3).
    Fails when an append puts its commit without waiting for the add (the rows of t2 are then in the log)."""
    records = 2
    crashed = start(txn_workers.crash_in_add, lake, TOPIC, TRANSACTIONAL_ID, PARTITIONS, records)
    staged = crashed.wait_for("staged")[1]
    assert crashed.finish() == -signal.SIGKILL, crashed.reports[-3:]
    assert len(staged) == len(PARTITIONS), f"an append did not write its file before the add: {staged}"
    for partition, rows in partition_rows(lake).items():
        names = {json.loads(row["value"])["txn"] for row in rows if row["control"] is None}
        assert names == {"t1"}, f"partition {partition} holds {names}"
        log = open_partition(lake, TOPIC, partition)
        assert log.last_stable_offset() == log.high_watermark()
        assert not {uri.rsplit("/", 1)[1] for uri in staged} & {uri.rsplit("/", 1)[1] for uri in log.table.data_paths()}
    # t1 decided and its markers written (its Complete* was to ride on t2's add); nothing of t2.
    assert states(state_history(lake, TRANSACTIONAL_ID))[-1] == "PrepareCommit"
    successor = start(txn_workers.init_and_commit, lake, TOPIC, TRANSACTIONAL_ID, PARTITIONS, records, "t3")
    assert successor.finish() == 0, successor.reports[-3:]
    assert names_read(consume_read_committed(lake)) == {"t1": records * len(PARTITIONS), "t3": records * len(PARTITIONS)}
    assert states(state_history(lake, TRANSACTIONAL_ID))[-1] == "PrepareCommit"  # t3's markers are in
