"""The writer the S9.5 test pauses: it decides an append, stops itself with SIGSTOP before the put, and reports.

Kept free of pytest so the child imports little. Reports are plain tuples on a queue, ending with
("done",) or ("crashed", traceback).
"""

from __future__ import annotations

import traceback

from lakelog.log import open_partition, payload_table


def append_paused_before_the_put(root, topic, value, queue) -> None:
    """Append one record; its first commit stops the process after the decision, just before the commit's put.

    The stop is the store's own (lakelog.store.delta.commit.STOP_BEFORE_COMMIT_PUT, set by the test in
    this process's environment): the Parquet file is written, the actions are built for version v+1, and
    the process SIGSTOPs itself before the put-if-absent of v+1.json. The decisions (versions decided on)
    and the WARNINGs the store logs are reported with the append's outcome.
    """
    try:
        import logging

        log = open_partition(root, topic, 0)
        table = log.table
        commit = table._commit
        attempts = []
        warnings: list[str] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.levelno >= logging.WARNING:
                    warnings.append(record.getMessage())

        logging.getLogger("lakelog.store").addHandler(Collect())

        def recording_commit(actions, schema, mode, decided_on, *args):
            attempts.append(decided_on)
            return commit(actions, schema, mode, decided_on, *args)

        table._commit = recording_commit
        try:
            result = log.append(payload_table([value]))
        except Exception as error:  # noqa: BLE001 - reported: the test judges the outcome
            queue.put(("refused", type(error).__name__, str(error), attempts, warnings))
        else:
            queue.put(("appended", result.base_offset, result.version, attempts, warnings))
        queue.put(("done",))
    except BaseException:
        queue.put(("crashed", traceback.format_exc()))


def allocate_ids(root, count, queue) -> None:
    """Allocate `count` producer ids; report them."""
    try:
        from lakelog.log import allocate_producer_id

        queue.put(("allocated", [allocate_producer_id(root, "w") for _ in range(count)]))
    except BaseException:
        queue.put(("crashed", traceback.format_exc()))
