"""Test-only hook, on PYTHONPATH of a streaming job's processes only (tests/spark/test_spark_stream_processes.py).

With LAKELOG_TEST_PAUSE_BATCH=N, the batch writer's transaction for batch N stops after its data rows are appended
and before its batch record and commit, in whichever process runs it (Spark's Python worker for the sink's
commit): it creates `<LAKELOG_TEST_PAUSE_DIR>/paused`, then waits for `<LAKELOG_TEST_PAUSE_DIR>/go`. The test then
SIGKILLs the job with its output transaction open, or starts a second run of the query and lets the first go on.
"""

import os

if os.environ.get("LAKELOG_TEST_PAUSE_BATCH"):
    import time

    from lakelog.jobs import batch_writer

    _record_batch = batch_writer.TransactionalBatchWriter._record_batch
    _pause_batch = int(os.environ["LAKELOG_TEST_PAUSE_BATCH"])
    _pause_dir = os.environ["LAKELOG_TEST_PAUSE_DIR"]

    def _paused_record_batch(self, batch_id, *args, **kwargs):
        if batch_id == _pause_batch:
            with open(os.path.join(_pause_dir, "paused"), "w") as marker:
                marker.write(str(os.getpid()))
            while not os.path.exists(os.path.join(_pause_dir, "go")):
                time.sleep(0.05)
        return _record_batch(self, batch_id, *args, **kwargs)

    batch_writer.TransactionalBatchWriter._record_batch = _paused_record_batch
