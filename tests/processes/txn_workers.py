"""What each process of the transaction crash tests runs. Kept free of pytest so a child imports little.

Each worker gets the child end of a Pipe first and reports plain tuples on it
(never exceptions, whose details would be lost or unpicklable). `Connection.send`
writes synchronously, so a report sent just before the process kills itself
is not lost, as it could be in a Queue's feeder thread. A worker that fails
unexpectedly reports ("crashed", traceback).

Message values say which transaction they belong to, how many messages it has
and whether its writer meant to commit or abort it (`txn_value`), so a checker
can tell a whole transaction from part of one, and an aborted one, from values alone.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import time
import traceback

from lakelog import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator


def txn_value(transaction: str, index: int, count: int, outcome: str) -> bytes:
    """Message `index` of the `count` of transaction `transaction`, which its writer means to `outcome` (commit/abort)."""
    return json.dumps({"txn": transaction, "i": index, "n": count, "outcome": outcome}, sort_keys=True).encode()


def reporting(worker):
    """Run `worker(conn, ...)`, reporting ("crashed", traceback) if it raises; close the pipe at the end."""

    @functools.wraps(worker)
    def run(conn, *args):
        try:
            worker(conn, *args)
        except BaseException:
            conn.send(("crashed", traceback.format_exc()))
        finally:
            conn.close()

    return run


def in_environment(environment: dict[str, str], worker, conn, *args) -> None:
    """Run `worker(conn, ...)` with the test process's `environment` (its AWS_* settings, which reach the S3
    emulator): a forkserver's children inherit the server's environment, from before the emulator started."""
    os.environ.update(environment)
    worker(conn, *args)


def transactional_producer(root: str, transactional_id: str, **conf) -> Producer:
    """A transactional Producer that writes only when flushed (or committing), so each worker says when."""
    return Producer({"lakelog.root": root, "transactional.id": transactional_id, "linger.ms": 600_000, **conf})


def own_coordinator(producer: Producer):
    """The coordinator the producer made for itself in init_transactions (lending it its partition
    handles), so a nemesis hooked into it changes nothing else about how the producer works."""
    coordinator = producer._coordinator
    assert coordinator is not None and hasattr(coordinator, "_fault"), "call init_transactions first"
    return coordinator


def error_report(error: BaseException) -> tuple:
    """(class name, error name, fatal) of a raised error, comparable in the test process."""
    if isinstance(error, KafkaException):
        return type(error).__name__, error.error.name(), error.error.fatal()
    return type(error).__name__, repr(error), None


def produce_transaction(conn, producer: Producer, topic: str, name: str, partitions, records: int, outcome: str) -> None:
    """Produce `records` messages of transaction `name` to each partition and flush; report each delivery."""
    failures = []

    def delivered(error, message):
        if error is None:
            conn.send(("delivered", name, message.partition(), message.offset(), message.value()))
        else:
            failures.append((error.name(), error.fatal(), message.partition()))

    count = records * len(partitions)
    index = 0
    for partition in partitions:
        for _ in range(records):
            producer.produce(topic, txn_value(name, index, count, outcome), partition=partition, on_delivery=delivered)
            index += 1
    producer.flush()
    if failures:
        raise AssertionError(f"transaction {name}: deliveries failed: {failures}")


# -- crashes (the crash matrix) ----------------------------------------------------------------------


def after_a_commit(conn, root, topic, transactional_id, partitions, records, fault) -> Producer:
    """A transactional producer whose coordinator calls `fault` at its fault points, once it committed "t1"."""
    producer = transactional_producer(root, transactional_id)
    producer.init_transactions()
    own_coordinator(producer)._fault = fault
    producer.begin_transaction()
    produce_transaction(conn, producer, topic, "t1", partitions, records, "commit")
    producer.commit_transaction()
    return producer


@reporting
def crash_in_end(conn, root, topic, transactional_id, partitions, records, commit, point, index) -> None:
    """Commit transaction "t1", then produce "t2" and commit or abort it, SIGKILLing this process
    at fault point `point` (marker `index` for the marker points) of t2's end; for
    before_complete_and_begin, at the next transaction's first add_partitions after t2's end."""
    armed = False

    def kill_at(name, details):
        if armed and name == point and (index is None or details.get("index") == index):
            conn.send(("killing", name, details.get("index")))
            os.kill(os.getpid(), signal.SIGKILL)

    producer = after_a_commit(conn, root, topic, transactional_id, partitions, records, kill_at)
    producer.begin_transaction()
    outcome = "commit" if commit else "abort"
    produce_transaction(conn, producer, topic, "t2", partitions, records, outcome)
    armed = True
    conn.send(("ending", outcome))
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    conn.send(("ended", outcome))
    # The end left Complete* to the next transaction's first add_partitions (S4.5): it records it as it begins t3.
    producer.begin_transaction()
    producer.produce(topic, txn_value("t3", 0, 1, "abort"), partition=partitions[0])
    producer.flush()
    conn.send(("not killed", point, index))


def data_files(root: str, topic: str, partition: int) -> set[str]:
    """The Parquet files in a partition's folder, named in a commit or not."""
    from lakelog.store import Location

    folder = Location.of(root).child("topics", topic, str(partition))
    return {entry.uri for entry in folder.list() if entry.uri.endswith(".parquet")}


@reporting
def crash_in_add(conn, root, topic, transactional_id, partitions, records) -> None:
    """Commit transaction "t1", then produce "t2" and flush, SIGKILLing this process in t2's add of its partitions
    once every append of t2 has written its data file (the files go out beside the add, S4.4): killed between the
    two steps. Reports the files the appends left ("staged")."""
    armed = False
    before: dict[int, set[str]] = {}

    def kill_at(name, details):
        if not (armed and name == "before_add"):
            return
        deadline = time.monotonic() + 60
        while True:
            new = {p: data_files(root, topic, p) - before[p] for p in partitions}
            if all(new.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        conn.send(("staged", sorted(uri for uris in new.values() for uri in uris)))
        os.kill(os.getpid(), signal.SIGKILL)

    producer = after_a_commit(conn, root, topic, transactional_id, partitions, records, kill_at)
    before.update({p: data_files(root, topic, p) for p in partitions})
    producer.begin_transaction()
    for partition in partitions:
        for index in range(records):
            producer.produce(topic, txn_value("t2", index, records * len(partitions), "commit"), partition=partition)
    armed = True
    producer.flush()
    conn.send(("not killed",))


@reporting
def init_and_commit(conn, root, topic, transactional_id, partitions, records, name) -> None:
    """A new instance of the id: init (finishing or fencing what the last one left), then commit transaction `name`."""
    producer = transactional_producer(root, transactional_id)
    producer.init_transactions(30)
    conn.send(("initialised",))
    producer.begin_transaction()
    produce_transaction(conn, producer, topic, name, partitions, records, "commit")
    producer.commit_transaction(30)
    conn.send(("committed", name))


@reporting
def sweep(conn, root) -> None:
    """One coordinator sweep, as `lakelog coordinator sweep` runs it."""
    report = TransactionCoordinator(root).sweep()
    conn.send(("swept", report.aborted_timed_out, report.rolled_forward, report.expired))


# -- zombies ----------------------------------------------------------------------------------------


ZOMBIE_CALLS = ("produce_flush_joined", "produce_flush_new", "commit", "abort", "begin", "produce")


@reporting
def zombie(conn, root, topic, transactional_id, partitions, records, first_call) -> None:
    """Open transaction "old" on `partitions`, report, wait for "go" (another instance inits meanwhile),
    then make every transactional call, `first_call` first, and report how each failed."""
    producer = transactional_producer(root, transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    produce_transaction(conn, producer, topic, "old", partitions, records, "abort")
    conn.send(("written",))
    assert conn.recv() == "go"
    after = iter(range(1_000))
    deliveries = []

    def delivered(error, message):
        deliveries.append(None if error is None else (error.name(), error.fatal()))

    def produce_flush(partition):
        value = txn_value("after-fence", next(after), 0, "abort")
        producer.produce(topic, value, partition=partition, on_delivery=delivered)
        producer.flush()

    calls = {
        # A partition already in the transaction: its marker's epoch fences the write (S4.6).
        "produce_flush_joined": lambda: produce_flush(partitions[0]),
        # A partition not in it yet: the coordinator refuses to add it (S4.1, S4.4).
        "produce_flush_new": lambda: produce_flush(max(partitions) + 1),
        "commit": lambda: producer.commit_transaction(10),
        "abort": lambda: producer.abort_transaction(10),
        "begin": producer.begin_transaction,
        # Once fenced, even queueing a message is refused.
        "produce": lambda: producer.produce(topic, txn_value("after-fence", next(after), 0, "abort"), partition=0),
    }
    order = [first_call] + [call for call in ZOMBIE_CALLS if call != first_call]
    for call in order:
        deliveries.clear()
        try:
            calls[call]()
        except BaseException as error:
            conn.send(("failed", call, error_report(error), list(deliveries)))
        else:
            conn.send(("returned", call, list(deliveries)))


@reporting
def commit_on_go(conn, root, topic, transactional_id, partitions, records, name) -> None:
    """Write transaction `name`, report ("written",), wait for ("go", delay), then commit it and report
    ("committed",) or ("commit failed", error_report)."""
    producer = transactional_producer(root, transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    produce_transaction(conn, producer, topic, name, partitions, records, "commit")
    conn.send(("written",))
    command, delay = conn.recv()
    assert command == "go"
    time.sleep(delay)
    try:
        producer.commit_transaction(30)
    except KafkaException as error:
        conn.send(("commit failed", error_report(error)))
    else:
        conn.send(("committed",))


@reporting
def init_on_go(conn, root, transactional_id) -> None:
    """A new instance of the id, made up front; on ("go", delay) it inits and reports ("initialised",)."""
    producer = transactional_producer(root, transactional_id)
    conn.send(("ready",))
    command, delay = conn.recv()
    assert command == "go"
    time.sleep(delay)
    producer.init_transactions(30)
    conn.send(("initialised",))


def pause_after_add_partitions(producer: Producer, conn, pause_at: int) -> None:
    """Nemesis: the process stops itself (SIGSTOP) just after the producer's `pause_at`-th
    add_partitions succeeded (the real call runs; its answer is returned unchanged). Resumed,
    it writes to a partition the coordinator let it join before whatever happened meanwhile."""
    coordinator = own_coordinator(producer)
    add_partitions = coordinator.add_partitions
    calls = 0

    def add_then_pause(*args, **kwargs):
        nonlocal calls
        result = add_partitions(*args, **kwargs)
        calls += 1
        if calls == pause_at:
            conn.send(("pausing", sorted(result.partitions)))
            os.kill(os.getpid(), signal.SIGSTOP)
        return result

    coordinator.add_partitions = add_then_pause


@reporting
def produce_until_fenced(conn, root, topic, transactional_id, partitions, timeout_ms, max_messages, pause_at) -> None:
    """Produce and flush one message at a time, round robin over `partitions`, in one transaction,
    until a write fails; then try to commit. Reports each delivery and each failure. With
    `pause_at`, the process stops itself after its `pause_at`-th add_partitions (pause_after_add_partitions)."""
    producer = transactional_producer(root, transactional_id, **{"transaction.timeout.ms": timeout_ms})
    producer.init_transactions()
    if pause_at is not None:
        pause_after_add_partitions(producer, conn, pause_at)
    producer.begin_transaction()
    conn.send(("begun",))
    failed = []

    def delivered(error, message):
        if error is None:
            conn.send(("delivered", "stopped", message.partition(), message.offset(), message.value()))
        else:
            failed.append((error.name(), error.fatal(), message.partition()))

    for index in range(max_messages):
        partition = partitions[index % len(partitions)]
        try:
            producer.produce(topic, txn_value("stopped", index, 0, "abort"), partition=partition, on_delivery=delivered)
            producer.flush()
        except KafkaException as error:
            conn.send(("produce failed", error_report(error)))
            break
        if failed:
            conn.send(("delivery failed", failed))
            break
    else:
        conn.send(("never fenced", max_messages))
    try:
        producer.commit_transaction(10)
    except KafkaException as error:
        conn.send(("commit failed", error_report(error)))
    else:
        conn.send(("committed",))


# -- a read_committed reader beside writers --------------------------------------------------------


@reporting
def write_transactions(conn, root, topic, transactional_id, partitions, outcomes, seed) -> None:
    """Run one transaction of 1-6 messages to random partitions (seeded) per entry of `outcomes`, committing
    or aborting it as that entry says; report ("ended", name, outcome, messages) after each."""
    rng = random.Random(seed)
    producer = transactional_producer(root, transactional_id)
    producer.init_transactions()
    for number, outcome in enumerate(outcomes):
        name = f"{transactional_id}-t{number}"
        count = rng.randint(1, 6)
        producer.begin_transaction()
        for index in range(count):
            producer.produce(topic, txn_value(name, index, count, outcome), partition=rng.choice(partitions))
            if rng.random() < 0.5:
                producer.flush()
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.flush()
            producer.abort_transaction(30)
        conn.send(("ended", name, outcome, count))


@reporting
def read_committed(conn, root, topic, partitions) -> None:
    """A read_committed Consumer polling `partitions` from the beginning, reporting every message
    ("read", partition, offset, value) and partition-EOF event ("eof", partition, offset), until
    told "stop" and then caught up with every partition's end (its LSO)."""
    consumer = Consumer(
        {"lakelog.root": root, "isolation.level": "read_committed", "enable.partition.eof": True, "max.poll.records": 3}
    )
    assigned = [TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in partitions]
    consumer.assign(assigned)
    stopping = False
    while True:
        messages = consumer.consume(10, timeout=0.05)
        for message in messages:
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                conn.send(("eof", message.partition(), message.offset()))
            else:
                conn.send(("read", message.partition(), message.offset(), message.value()))
        if not stopping and conn.poll(0):
            assert conn.recv() == "stop"
            stopping = True
        if stopping and not messages:
            positions = consumer.position([TopicPartition(topic, partition) for partition in partitions])
            ends = [consumer.get_watermark_offsets(TopicPartition(topic, partition))[1] for partition in partitions]
            if all(position.offset >= end for position, end in zip(positions, ends, strict=True)):
                conn.send(("caught up", [position.offset for position in positions]))
                break
    consumer.close()
