"""What each spawned process of the race tests runs. Kept free of pytest so a child imports little.

Each worker reports plain tuples on a queue (never exceptions, whose details would be
lost or unpicklable), ending with ("done", worker) or ("crashed", worker, traceback).
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections import Counter

from lakelog import OFFSET_BEGINNING, AdminClient, Consumer, NewTopic, Producer, TopicPartition
from lakelog.errors import OffsetMismatch
from lakelog.log import BatchHeader, open_partition, payload_table

BARRIER_TIMEOUT_S = 120

# Kill points of a bulk load (S2.4), named as the transaction coordinator's fault points are: a load process
# SIGKILLs itself at the nth time one of them is reached in its run, so where it dies does not depend on timing.
LOAD_FILE_WRITTEN = "file-written"  # a batch's Parquet file is written, its commit not put
LOAD_COMMITTED = "committed"  # a batch's commit is in the log (checkpoint included), the loader not told
LOAD_CHECKPOINT_DUE = "checkpoint-due"  # a commit on the checkpoint interval is in the log, its checkpoint not written
LOAD_KILL_POINTS = (LOAD_FILE_WRITTEN, LOAD_COMMITTED, LOAD_CHECKPOINT_DUE)


def payload_value(worker: int, batch: int, record: int) -> bytes:
    return f"w{worker}-b{batch:03d}-r{record}".encode()


def append_batches(root, topic, worker, batches, records, barrier, queue) -> None:
    """Append `batches` batches of `records` rows through the partition log; report each AppendResult."""
    try:
        log = open_partition(root, topic, 0)
        barrier.wait(BARRIER_TIMEOUT_S)
        for batch in range(batches):
            values = [payload_value(worker, batch, record) for record in range(records)]
            result = log.append(payload_table(values))
            queue.put(("appended", worker, batch, result.base_offset, result.last_offset))
        queue.put(("done", worker))
    except BaseException:
        queue.put(("crashed", worker, traceback.format_exc()))


def produce_batches(root, topic, worker, batches, records, barrier, queue) -> None:
    """Produce the same rows through an idempotent Producer, one batch per `records` messages."""
    try:
        producer = Producer(
            {"lakelog.root": root, "linger.ms": 600_000, "batch.num.messages": records, "client.id": f"w{worker}"}
        )
        failures = []

        def report(error, message):
            if error is None:
                queue.put(("delivered", worker, message.value(), message.offset()))
            else:
                failures.append(str(error))

        barrier.wait(BARRIER_TIMEOUT_S)
        for batch in range(batches):
            for record in range(records):
                producer.produce(topic, payload_value(worker, batch, record), partition=0, on_delivery=report)
            producer.poll(0)
        producer.flush()
        if failures:
            queue.put(("crashed", worker, f"delivery failures: {failures[:3]}"))
        else:
            queue.put(("done", worker))
    except BaseException:
        queue.put(("crashed", worker, traceback.format_exc()))


def race_at_expected_offset(root, topic, worker, rounds, records, barrier, queue) -> None:
    """Each round, append one batch at expected offset round*records, after all workers reach the barrier."""
    try:
        log = open_partition(root, topic, 0)
        for round_ in range(rounds):
            barrier.wait(BARRIER_TIMEOUT_S)
            values = [payload_value(worker, round_, record) for record in range(records)]
            header = BatchHeader(expected_offset=round_ * records)
            try:
                result = log.append(payload_table(values), header)
            except OffsetMismatch as mismatch:
                # S2.2: re-sending the refused batch at the same expected offset never lands it.
                try:
                    log.append(payload_table(values), header)
                    resent = "landed"
                except OffsetMismatch as again:
                    resent = again.log_end_offset
                queue.put(("mismatch", worker, round_, mismatch.expected_offset, mismatch.log_end_offset, resent))
            else:
                queue.put(("won", worker, round_, result.base_offset, result.last_offset))
        queue.put(("done", worker))
    except BaseException:
        queue.put(("crashed", worker, traceback.format_exc()))


def check_snapshots_while_writing(root, topic, worker, expected_total, records, barrier, queue) -> None:
    """Read the whole partition over and over while others append: every snapshot must be a dense
    prefix made of whole batches, each value once (S1.1, S1.2 seen by a concurrent reader)."""
    try:
        log = open_partition(root, topic, 0)
        barrier.wait(BARRIER_TIMEOUT_S)
        snapshots = set()
        seen_total = 0
        while seen_total < expected_total:
            log.refresh()
            end = log.log_end_offset()
            offsets, values = [], []
            offset = 0
            while offset < end:
                fetched = log.fetch(offset, max_records=100_000, max_bytes=1 << 30)
                offsets.extend(fetched.rows.column("offset").to_pylist())
                values.extend(fetched.rows.column("value").to_pylist())
                offset = fetched.next_offset
            if offsets != list(range(end)) or end % records or len(set(values)) != end:
                queue.put(("crashed", worker, f"snapshot at version {log.version} is not {end} dense whole-batch rows"))
                return
            snapshots.add(end)
            seen_total = end
        queue.put(("snapshots", worker, len(snapshots)))
        queue.put(("done", worker))
    except BaseException:
        queue.put(("crashed", worker, traceback.format_exc()))


def consume_while_producing(root, topic, worker, expected_total, records, barrier, queue) -> None:
    """A Consumer reading from the beginning while producers write: every message once, in offset order."""
    try:
        consumer = Consumer({"lakelog.root": root})
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        barrier.wait(BARRIER_TIMEOUT_S)
        read = []
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        while len(read) < expected_total and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                read.append((message.offset(), message.value()))
        consumer.close()
        queue.put(("consumed", worker, read))
        queue.put(("done", worker))
    except BaseException:
        queue.put(("crashed", worker, traceback.format_exc()))


def create_same_topic(root, worker, rounds, partitions, barrier, queue) -> None:
    """Each round, race the other workers to create topic `contested-<round>` with this worker's own
    segment.files, so the config that won shows whose creation it was."""
    try:
        admin = AdminClient({"lakelog.root": root})
        for round_ in range(rounds):
            topic = f"contested-{round_}"
            barrier.wait(BARRIER_TIMEOUT_S)
            future = admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, config={"segment.files": str(10 + worker)})]
            )[topic]
            error = future.exception()
            queue.put(("created", worker, round_, None if error is None else error.args[0].name()))
        queue.put(("done", worker))
    except BaseException:
        queue.put(("crashed", worker, traceback.format_exc()))


def load_killed_at(root, topic, source, batch_records, point, occurrence, conn) -> None:
    """Bulk-load `source` into `topic`-0 as `lakelog load` does, SIGKILLing this process the `occurrence`th time
    it reaches kill point `point` (one of LOAD_KILL_POINTS). Sends ("killing", point, occurrence) on the pipe
    just before, or ("finished", appended rows) if the load ended first."""
    import threading

    from tqdm import tqdm

    from lakelog.jobs.load import load
    from lakelog.store.delta.commit import Commit
    from lakelog.store.delta.table import Table, checkpoint_interval, is_checkpoint_version

    # The progress bar's default lock is a multiprocessing semaphore, which a SIGKILLed process would leak.
    tqdm.set_lock(threading.RLock())
    reached: Counter[str] = Counter()
    appending = [False]

    def reach(name: str) -> None:
        reached[name] += 1
        if name == point and reached[name] == occurrence:
            conn.send(("killing", name, occurrence))  # a pipe's send is written before it returns
            os.kill(os.getpid(), signal.SIGKILL)

    append, commit, checkpoint_if_due = Table.append, Table._commit, Commit._checkpoint_if_due

    def append_with_points(self, *args, **kwargs):
        appending[0] = True
        try:
            return append(self, *args, **kwargs)
        finally:
            appending[0] = False

    def commit_with_points(self, *args, **kwargs):
        if appending[0]:
            reach(LOAD_FILE_WRITTEN)
        version = commit(self, *args, **kwargs)
        if appending[0]:
            reach(LOAD_COMMITTED)
        return version

    def checkpoint_with_points(self):
        if is_checkpoint_version(self.version, checkpoint_interval(self.table.configuration)):
            reach(LOAD_CHECKPOINT_DUE)
        return checkpoint_if_due(self)

    Table.append, Table._commit = append_with_points, commit_with_points
    Commit._checkpoint_if_due = checkpoint_with_points
    result = load(root, topic, source, batch_records=batch_records, progress=False)
    conn.send(("finished", result.appended_by_this_run))


def keyed_load_killed_at(root, topic, source, batch_records, occurrence, conn) -> None:
    """`lakelog load --key-column key` of `source` into every partition of `topic` (load_keyed), SIGKILLing this
    process just after its `occurrence`th append is committed (the loader not told). Sends ("killing", occurrence)
    on the pipe just before, or ("finished", appended rows) if the load ended first."""
    import threading

    from tqdm import tqdm

    from lakelog.jobs.load import load_keyed
    from lakelog.store.delta.table import Table

    tqdm.set_lock(threading.RLock())
    commits = [0]
    commit = Table._commit

    def commit_then_die(self, *args, **kwargs):
        version = commit(self, *args, **kwargs)
        commits[0] += 1
        if commits[0] == occurrence:
            conn.send(("killing", occurrence))
            os.kill(os.getpid(), signal.SIGKILL)
        return version

    Table._commit = commit_then_die
    shares = load_keyed(root, topic, source, key_column="key", batch_records=batch_records, progress=False)
    conn.send(("finished", sum(share.appended_by_this_run for share in shares.values())))
