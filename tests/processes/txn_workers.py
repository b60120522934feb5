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
import signal
import traceback

from lakelog import Producer
from lakelog.coordinator.transaction_coordinator import TransactionCoordinator


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


def transactional_producer(root: str, transactional_id: str, **conf) -> Producer:
    """A transactional Producer that writes only when flushed (or committing), so each worker says when."""
    return Producer({"lakelog.root": root, "transactional.id": transactional_id, "linger.ms": 600_000, **conf})


def own_coordinator(producer: Producer):
    """The coordinator the producer made for itself in init_transactions (lending it its partition
    handles), so a nemesis hooked into it changes nothing else about how the producer works."""
    coordinator = producer._coordinator
    assert coordinator is not None and hasattr(coordinator, "_fault"), "call init_transactions first"
    return coordinator


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


@reporting
def crash_in_end(conn, root, topic, transactional_id, partitions, records, commit, point, index) -> None:
    """Commit transaction "t1", then produce "t2" and commit or abort it, SIGKILLing this process
    at fault point `point` (marker `index` for after_marker) of t2's end."""
    armed = False

    def kill_at(name, details):
        if armed and name == point and (index is None or details.get("index") == index):
            conn.send(("killing", name, details.get("index")))
            os.kill(os.getpid(), signal.SIGKILL)

    producer = transactional_producer(root, transactional_id)
    producer.init_transactions()
    own_coordinator(producer)._fault = kill_at
    producer.begin_transaction()
    produce_transaction(conn, producer, topic, "t1", partitions, records, "commit")
    producer.commit_transaction()
    producer.begin_transaction()
    outcome = "commit" if commit else "abort"
    produce_transaction(conn, producer, topic, "t2", partitions, records, outcome)
    armed = True
    conn.send(("ending", outcome))
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    conn.send(("not killed", point, index))


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
