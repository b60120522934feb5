"""Opening a table while a writer's log cleanup deletes old commits (lakelog.store.table.load_handle).

delta-rs lists `_delta_log` and then reads the checkpoint and commits it chose; cleanup may delete one of
them in between (seen once in the main job: "Kernel error: File not found: .../_delta_log/...18.json").
It deletes only behind a newer checkpoint, so listing again loads. The race itself needs a reader stalled
between two system calls, so here delta-rs's constructor fails as it did, a given number of times, and
then opens the real table.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from lakelog.log import create_topic, open_partition, payload_table
from lakelog.store import table as table_module
from lakelog.store.table import OPEN_ATTEMPTS, Table, load_handle


def failing_first(times: int, error: Exception):
    calls = []

    def open_table(uri: str, **options) -> DeltaTable:
        calls.append(uri)
        if len(calls) <= times:
            raise error
        return DeltaTable(uri, **options)

    return open_table, calls


@pytest.fixture
def uri(root):
    create_topic(root, "t", 1)
    log = open_partition(root, "t", 0)
    log.append(payload_table([b"a"]))
    return log.table.uri


def vanished(uri: str) -> DeltaError:
    return DeltaError(f"Kernel error: File not found: {uri}/_delta_log/00000000000000000018.json")


def test_a_log_file_that_vanished_under_the_listing_is_listed_again(uri, monkeypatch):
    open_table, calls = failing_first(OPEN_ATTEMPTS - 1, vanished(uri))
    monkeypatch.setattr(table_module, "DeltaTable", open_table)
    assert load_handle(uri).version() == 1
    assert Table.open(uri).version == 1
    assert len(calls) == OPEN_ATTEMPTS + 1


def test_it_gives_up_after_a_few_attempts_and_other_errors_are_not_retried(uri, monkeypatch):
    open_table, calls = failing_first(OPEN_ATTEMPTS, vanished(uri))
    monkeypatch.setattr(table_module, "DeltaTable", open_table)
    with pytest.raises(DeltaError, match="File not found"):
        load_handle(uri)
    assert len(calls) == OPEN_ATTEMPTS
    for error in (DeltaError("Kernel error: invalid checkpoint schema"), TableNotFoundError(f"{uri} does not exist")):
        open_table, calls = failing_first(1, error)
        monkeypatch.setattr(table_module, "DeltaTable", open_table)
        with pytest.raises(type(error)):
            load_handle(uri)
        assert len(calls) == 1
