"""The Producer is thread-safe, as confluent-kafka's is (issue 14): real threads, a real root.

A confluent program commonly runs `while running: p.poll(1.0)` on a background thread while other
threads call produce(), or while the main thread runs transactions. Every public call takes the
producer's re-entrant lock; poll() sleeps outside it; delivery callbacks run on the thread that
calls poll()/flush(), under the lock, and may produce() again.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from lakelog import Producer
from lakelog.log import READ_COMMITTED, open_partition
from lakelog.log.partition import wall_clock_ms
from tests.client.clients import NEVER_LINGER_MS, read_all

# Every join is bounded: a deadlock fails the test instead of hanging the suite.
JOIN_S = 120.0


def producer(root: str, clock: Callable[[], int] = wall_clock_ms, **conf) -> Producer:
    return Producer({"lakelog.root": root, "allow.auto.create.topics": False, **conf}, clock=clock)


class Threads:
    """Threads whose exceptions are kept, to be raised in the test's own thread by `join()`."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, target: Callable[[], object], name: str) -> threading.Thread:
        def run() -> None:
            try:
                target()
            except BaseException as error:  # noqa: BLE001 - kept and raised by join()
                self.errors.append(error)

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def join(self, *threads: threading.Thread) -> None:
        for thread in threads or self.threads:
            thread.join(JOIN_S)
            assert not thread.is_alive(), f"{thread.name} still running after {JOIN_S} s: deadlocked?"
        if self.errors:
            raise self.errors[0]


class Poller:
    """A background thread running `while running: p.poll(step)`, as confluent programs do."""

    def __init__(self, threads: Threads, p: Producer, step: float) -> None:
        self.running = threading.Event()
        self.running.set()

        def loop() -> None:
            while self.running.is_set():
                p.poll(step)

        self.thread = threads.start(loop, "poller")

    def stop(self) -> None:
        self.running.clear()


def committed_rows(root: str, topic: str, partition: int = 0) -> list[dict]:
    """Every row a read_committed reader sees, in offset order."""
    log = open_partition(root, topic, partition)
    rows: list[dict] = []
    offset = log.log_start_offset()
    while offset < log.log_end_offset():
        fetched = log.fetch(offset, max_records=100_000, isolation_level=READ_COMMITTED)
        rows.extend(fetched.rows.select(["offset", "value"]).to_pylist())
        offset = fetched.next_offset
    return rows


def test_a_poll_thread_and_four_producing_threads_deliver_every_message_exactly_once(root, topic):
    """4 threads x 3,000 messages in small batches (sent by produce() when full, by poll() after linger.ms)
    while a background thread polls: every message is reported once, without error, on a polling or
    flushing thread, at offsets 0..N-1 of the partition, and is read back once."""
    name = topic()
    writers, per_writer = 4, 3_000
    total = writers * per_writer
    p = producer(root, **{"batch.num.messages": 100, "linger.ms": 5})
    reports: list[tuple[object, bytes, int | None]] = []
    serving: set[str] = set()

    def on_delivery(error, message) -> None:
        serving.add(threading.current_thread().name)
        reports.append((error, message.value(), message.offset()))

    def write(writer: int) -> None:
        for i in range(per_writer):
            p.produce(name, f"w{writer}-{i}", on_delivery=on_delivery)

    threads = Threads()
    poller = Poller(threads, p, 0.05)
    try:
        producing = [threads.start(lambda w=w: write(w), f"writer-{w}") for w in range(writers)]
        threads.join(*producing)
    finally:
        poller.stop()
    threads.join(poller.thread)
    assert p.flush() == 0
    p.close()

    expected = {f"w{w}-{i}".encode() for w in range(writers) for i in range(per_writer)}
    assert len(reports) == total
    assert [error for error, _, _ in reports if error is not None] == []
    assert collections.Counter(value for _, value, _ in reports) == collections.Counter(expected)
    assert sorted(offset for _, _, offset in reports) == list(range(total))  # no gap, no duplicate
    assert serving <= {"poller", threading.current_thread().name}  # callbacks run where poll()/flush() runs
    assert "poller" in serving  # the poll thread did serve reports while the writers ran
    # Each writer's messages keep their order in the log (one partition, each produce() atomic).
    offset_of = {value: offset for _, value, offset in reports}
    for w in range(writers):
        offsets = [offset_of[f"w{w}-{i}".encode()] for i in range(per_writer)]
        assert offsets == sorted(offsets)

    read = read_all(root, name, timeout=120.0)
    assert [m.offset() for m in read] == list(range(total))
    assert collections.Counter(m.value() for m in read) == collections.Counter(expected)


def test_an_idle_poll_on_one_thread_does_not_hold_up_produce_and_flush_on_another(root, topic):
    """poll(1.0) sleeps outside the lock: a produce()+flush() made while it waits completes before it returns."""
    name = topic()
    poll_looked = threading.Event()  # the polling thread has made its first look, inside poll()

    def clock() -> int:
        if threading.current_thread().name == "poller":
            poll_looked.set()
        return wall_clock_ms()

    p = producer(root, **{"linger.ms": NEVER_LINGER_MS}, clock=clock)
    p.produce(name, "warm-up")  # opens the partition and takes a producer id, outside the window below
    assert p.flush() == 0
    reports = []
    poll_result: list[int] = []
    returned = threading.Event()

    def poll_once() -> None:
        poll_result.append(p.poll(1.0))
        returned.set()

    threads = Threads()
    poller = threads.start(poll_once, "poller")
    assert poll_looked.wait(JOIN_S)  # the poller is inside poll(1.0), nothing to serve: it waits
    p.produce(name, "while polling", on_delivery=lambda error, message: reports.append((error, message.offset())))
    assert p.flush() == 0
    flushed_while_polling = not returned.is_set()
    threads.join(poller)
    p.close()

    assert flushed_while_polling, "produce()+flush() waited for the idle poll(1.0) on another thread"
    assert reports == [(None, 1)]  # served by flush(), on this thread
    assert poll_result == [0]  # the poll had nothing of its own to serve and waited out its timeout


def test_transactions_on_the_main_thread_while_a_poll_thread_runs(root, topic):
    """20 transactions (begin, produce, commit) on this thread while another polls, linger.ms small so the
    poll thread sends some of the transactions' batches: read_committed sees every row exactly once."""
    name = topic()
    transactions, per_transaction = 20, 40
    p = producer(root, **{"transactional.id": "threads", "batch.num.messages": 15, "linger.ms": 1})
    p.init_transactions()
    reports = []
    threads = Threads()
    poller = Poller(threads, p, 0.05)
    try:
        for t in range(transactions):
            p.begin_transaction()
            for i in range(per_transaction):
                p.produce(name, f"t{t}-{i}", on_delivery=lambda error, message: reports.append(error))
            p.commit_transaction()
    finally:
        poller.stop()
    threads.join(poller.thread)
    p.close()

    total = transactions * per_transaction
    assert len(reports) == total and set(reports) == {None}
    rows = committed_rows(root, name)
    values = [row["value"] for row in rows]
    assert collections.Counter(values) == collections.Counter(
        f"t{t}-{i}".encode() for t in range(transactions) for i in range(per_transaction)
    )
    # In each transaction its messages are in produce order.
    for t in range(transactions):
        prefix = f"t{t}-".encode()
        assert [int(v[len(prefix) :]) for v in values if v.startswith(prefix)] == list(range(per_transaction))


def test_a_delivery_callback_may_produce_again_while_other_threads_produce(root, topic):
    """The lock is re-entrant: a callback served by the poll thread produces a reply to each message
    (as a confluent program may), while the main thread keeps producing; nothing deadlocks or is lost."""
    name, replies = topic(), topic()
    count = 300
    p = producer(root, **{"batch.num.messages": 20, "linger.ms": 1})
    reply_reports = []

    def on_delivery(error, message) -> None:
        assert error is None
        p.produce(
            replies, b"re:" + message.value(), on_delivery=lambda error, message: reply_reports.append((error, message.value()))
        )

    threads = Threads()
    poller = Poller(threads, p, 0.05)
    try:
        for i in range(count):
            p.produce(name, f"m{i}", on_delivery=on_delivery)
    finally:
        poller.stop()
    threads.join(poller.thread)
    assert p.flush() == 0  # the last originals, then the replies their callbacks queued, as confluent's flush
    p.close()

    assert sorted(reply_reports) == sorted((None, f"re:m{i}".encode()) for i in range(count))
    assert sorted(m.value() for m in read_all(root, replies, timeout=60.0)) == sorted(f"re:m{i}".encode() for i in range(count))


def test_flush_goes_on_while_callbacks_produce_until_its_timeout(root, topic):
    """confluent's flush() waits until the queue is empty, also of what delivery callbacks produce during it;
    with a timeout it stops going on once the timeout has passed (a callback that always produces more)."""
    name = topic()
    p = producer(root, **{"linger.ms": NEVER_LINGER_MS})
    chain = []

    def reply(error, message) -> None:
        chain.append(message.value())
        if len(chain) < 5:
            p.produce(name, b"next", on_delivery=reply)

    p.produce(name, b"first", on_delivery=reply)
    assert p.flush() == 0 and chain == [b"first", b"next", b"next", b"next", b"next"]

    stopped = threading.Event()

    def forever(error, message) -> None:
        if not stopped.is_set():
            p.produce(name, b"more", on_delivery=forever)

    p.produce(name, b"start", on_delivery=forever)
    assert p.flush(0.3) == 1  # the one its last callback queued, still there when the timeout had passed
    stopped.set()
    assert p.flush() == 0
    p.close()
