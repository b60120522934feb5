"""The writer the S9.5 test pauses: it decides an append, stops itself with SIGSTOP before the put, and reports.

Kept free of pytest so the child imports little. Reports are plain tuples on a queue, ending with
("done",) or ("crashed", traceback).
"""

from __future__ import annotations

import os
import signal
import traceback

from lakelog.log import open_partition, payload_table


def append_paused_before_the_put(root, topic, value, paused, queue) -> None:
    """Append one record; its first commit attempt stops the process after the decision, before the put.

    The pause point wraps `Table._commit` (test only): the rows are stamped with their offsets and the
    version to take is fixed when it is reached. `paused` is set just before SIGSTOP, so the test knows
    the decision is made; after SIGCONT the put runs and the append's outcome is reported.
    """
    try:
        log = open_partition(root, topic, 0)
        table = log.table
        commit = table._commit
        attempts = []

        def pausing_commit(actions, schema, mode, decided_on, *args):
            attempts.append(decided_on)
            if len(attempts) == 1:
                paused.set()
                os.kill(os.getpid(), signal.SIGSTOP)
            return commit(actions, schema, mode, decided_on, *args)

        table._commit = pausing_commit
        try:
            result = log.append(payload_table([value]))
        except Exception as error:  # noqa: BLE001 - reported: the test judges the outcome
            queue.put(("refused", type(error).__name__, str(error), attempts))
        else:
            queue.put(("appended", result.base_offset, result.version, attempts))
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
