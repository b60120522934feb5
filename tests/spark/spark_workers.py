"""What the Spark tests' child processes run (kept free of pytest); each ends by SIGKILLing itself."""

from __future__ import annotations

import os
import signal
import sys


def write_then_die(root: str, topic: str, transactional_id: str, batch_id: int, values: list[bytes]) -> None:
    """Start batch `batch_id` over every partition of `topic` and SIGKILL this process mid-transaction.

    The first partition's rows are appended (transactional, in the open transaction); the process dies
    while the second partition's rows are being produced, before any end of the transaction.
    """
    from lakelog.jobs.batch_writer import TransactionalBatchWriter
    from lakelog.log import payload_table

    def second_partition():
        os.kill(os.getpid(), signal.SIGKILL)
        yield payload_table(values)

    writer = TransactionalBatchWriter(root, transactional_id)
    writer.write({(topic, 0): [payload_table(values)], (topic, 1): second_partition()}, batch_id)


def materialize_and_die(root: str, topic: str, point: str | None) -> None:
    """Run the view job in a Spark session of this process; SIGKILL it at fault point `point` (None: a timer kills it)."""
    from pipelines.materialize_committed_view import materialize_committed_view
    from pyspark_lakelog import local_session

    spark = local_session("lakelog-test-view-worker", "local[1]", driver_memory="1g")
    print("started", flush=True)

    def kill_at(reached: str) -> None:
        print(f"at {reached}", flush=True)
        if reached == point:
            os.kill(os.getpid(), signal.SIGKILL)

    report = materialize_committed_view(spark, root, topic, fault=kill_at)
    print(f"finished {report.version}", flush=True)


if __name__ == "__main__":
    # python spark_workers.py materialize ROOT TOPIC [POINT]
    command, *arguments = sys.argv[1:]
    if command == "materialize":
        materialize_and_die(arguments[0], arguments[1], arguments[2] if len(arguments) > 2 else None)
    else:
        raise SystemExit(f"unknown command {command}")
