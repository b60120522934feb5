"""The history checker on hand-built histories: each anomaly class from its smallest case, none from
a clean one, and none from any history a correct model of a partition log produces (hypothesis); and
the storage faults' tally, each fault judged by what the clients met after it."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.checker import ANOMALIES, FAULT_OUTCOMES, check, fault_outcomes, fault_table, fault_tally, found, table
from chaos.history import INFO, INVOKE, OK, Op

RC, RU = "read_committed", "read_uncommitted"


class Builder:
    """Ops with increasing times, in the order they are added."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._clock = itertools.count(1)

    def op(self, process, type_, f, value=None, **fields) -> None:
        self.ops.append(Op(process, type_, f, value, next(self._clock), len(self.ops), **fields))

    def send(self, process, *writes, txn=None) -> None:
        self.op(process, OK, "send", [list(w) for w in writes], txn=txn)

    def poll(self, process, reads: dict, isolation=RC, txn=None) -> None:
        self.op(process, OK, "poll", {k: [list(p) for p in v] for k, v in reads.items()}, isolation=isolation, txn=txn)

    def transaction(self, process, txn, *writes, end="commit") -> None:
        self.op(process, INVOKE, "txn", txn=txn)
        self.send(process, *writes, txn=txn)
        self.op(process, INVOKE, end, txn=txn)
        self.op(process, OK, end, txn=txn)


def clean() -> Builder:
    """p0 commits a, b to k; aborts x; commits c. A reader reads a, b, c (offsets 0, 1, [2 x, 3 marker], 5)."""
    h = Builder()
    h.transaction("p0", 0, ("k", 0, "a"), ("k", 1, "b"))
    h.transaction("p0", 1, ("k", 3, "x"), end="abort")
    h.transaction("p0", 2, ("k", 5, "c"))
    h.poll("r", {"k": [(0, "a"), (1, "b")]})
    h.poll("r", {"k": [(5, "c")]})
    return h


def test_a_clean_history_has_no_anomaly():
    assert found(check(clean().ops)) == {}


def test_a_table_row_per_class():
    lines = table({"duplicate": 2}).splitlines()
    assert len(lines) == 1 + len(ANOMALIES)
    assert lines[1 + ANOMALIES.index("duplicate")].split() == ["duplicate", "2"]


def planted(name: str) -> Builder:
    h = clean()
    if name == "lost-write":
        h.transaction("p0", 3, ("k", 7, "d"), ("k", 8, "e"))
        h.poll("r2", {"k": [(8, "e")]})  # d: committed, before e, read by nobody
    elif name == "duplicate":
        h.send("p1", ("k", 7, "a"))  # p1 sent a again, under another producer
    elif name == "aborted-read":
        h.poll("r2", {"k": [(0, "a"), (1, "b"), (3, "x"), (5, "c")]})
    elif name == "precommitted-read":
        h.op("p0", INVOKE, "txn", txn=3)
        h.send("p0", ("k", 7, "d"), txn=3)
        h.poll("r", {"k": [(7, "d")]})  # before p0 asked to commit
        h.op("p0", INVOKE, "commit", txn=3)
        h.op("p0", OK, "commit", txn=3)
    elif name == "nonmonotonic-poll":
        h.poll("r", {"k": [(1, "b")]})
    elif name == "nonmonotonic-send":
        h.send("p0", ("k", 7, "d"))
        h.send("p0", ("k", 6, "e"))
    elif name == "poll-skip":
        h.transaction("p0", 3, ("k", 7, "d"), ("k", 8, "e"))
        h.poll("r", {"k": [(8, "e")]})
        h.poll("r2", {"k": [(0, "a"), (1, "b"), (5, "c"), (7, "d"), (8, "e")]})  # nothing lost
    elif name == "inconsistent-offsets":
        h.poll("r2", {"k": [(1, "c")]}, isolation=RU)  # b is at offset 1
    return h


@pytest.mark.parametrize("name", ANOMALIES)
def test_each_class_is_found_in_its_planted_history(name):
    assert found(check(planted(name).ops)) == {name: 1}


def test_a_reassigned_key_may_be_read_again():
    h = clean()
    h.op("r", OK, "assign", ["k"])
    h.poll("r", {"k": [(0, "a")]})
    assert found(check(h.ops)) == {}


def test_read_uncommitted_may_read_aborted_and_open_transactions():
    h = clean()
    h.poll("r2", {"k": [(0, "a"), (1, "b"), (3, "x"), (5, "c")]}, isolation=RU)
    h.op("p0", INVOKE, "txn", txn=3)
    h.send("p0", ("k", 7, "d"), txn=3)
    h.poll("r2", {"k": [(7, "d")]}, isolation=RU)
    assert found(check(h.ops)) == {}


def test_a_transaction_reading_its_own_write_is_a_precommitted_read():
    h = clean()
    h.op("p0", INVOKE, "txn", txn=3)
    h.send("p0", ("k", 7, "d"), txn=3)
    h.op("p0", INVOKE, "commit", txn=3)
    h.poll("p0", {"k": [(7, "d")]}, txn=3)
    h.op("p0", OK, "commit", txn=3)
    result = check(h.ops)
    assert found(result) == {"precommitted-read": 1} and result["precommitted-read"][0]["own"]


def test_an_unknown_outcome_is_neither_lost_nor_aborted():
    h = clean()
    h.op("p1", INVOKE, "txn", txn=0)
    h.send("p1", ("k", 7, "d"), txn=0)  # p1 died: d may be aborted by the sweep, or rolled forward
    h.transaction("p0", 3, ("k", 9, "e"))
    h.poll("r", {"k": [(9, "e")]})
    assert found(check(h.ops)) == {}


# -- a correct model: every history it produces is clean --------------------------------------------


@st.composite
def model_histories(draw):
    """Producers run transactions (commit or abort) or plain sends on two keys; a model log gives
    offsets (one marker after each transaction's rows); readers poll read_committed from where they
    were, up to the model's LSO, and report the end there, sometimes reassigning back to the start."""
    h = Builder()
    logs: dict[str, list[tuple[str, str | None]]] = {"k0": [], "k1": []}  # offset -> (value, status)
    positions: dict[tuple[str, str], int] = {}
    counter = itertools.count()
    txns = itertools.count()
    for step in draw(st.lists(st.sampled_from(["txn", "send", "poll", "assign"]), min_size=1, max_size=25)):
        if step in ("txn", "send"):
            producer = draw(st.sampled_from(["p0", "p1"]))
            keys = draw(st.lists(st.sampled_from(sorted(logs)), min_size=1, max_size=4))
            writes = []
            for key in keys:
                value = f"v{next(counter)}"
                writes.append((key, len(logs[key]), value))
                logs[key].append((value, None if step == "txn" else "committed"))
            if step == "send":
                h.send(producer, *writes)
                continue
            txn = next(txns)
            h.op(producer, INVOKE, "txn", txn=txn)
            h.send(producer, *writes, txn=txn)
            end = draw(st.sampled_from(["commit", "abort"]))
            h.op(producer, INVOKE, end, txn=txn)
            for key in set(keys):
                logs[key] = [
                    (v, "committed" if end == "commit" else "aborted") if v in {w[2] for w in writes} else (v, s)
                    for v, s in logs[key]
                ]
                logs[key].append(("marker", "marker"))
            h.op(producer, OK, end, txn=txn)
        else:
            reader = draw(st.sampled_from(["r0", "r1"]))
            if step == "assign":
                h.op(reader, OK, "assign", sorted(logs))
                for key in logs:
                    positions[(reader, key)] = 0
                continue
            reads, ends = {}, {}
            for key, log in logs.items():
                lso = next((i for i, (_, status) in enumerate(log) if status is None), len(log))
                start = positions.get((reader, key), 0)
                reads[key] = [(o, v) for o, (v, s) in enumerate(log[start:lso], start) if s == "committed"]
                positions[(reader, key)] = ends[key] = lso
            h.poll(reader, reads)
            h.op(reader, OK, "eof", ends, isolation=RC)  # at the LSO
    return h.ops


@given(model_histories())
@settings(max_examples=100, deadline=None)
def test_a_correct_model_produces_no_anomaly(history):
    assert found(check(history)) == {}


def test_a_retried_transaction_may_send_its_values_again():
    """The job re-sends an aborted transaction's output in the next one: the committed copy is read."""
    h = clean()
    h.transaction("p0", 3, ("k", 7, "d"), end="abort")
    h.transaction("p0", 4, ("k", 9, "d"))
    h.poll("r", {"k": [(9, "d")]})
    assert found(check(h.ops)) == {}


# -- an end of partition before an acknowledged write, and storage faults ------------------------


def test_an_end_of_partition_before_a_committed_write_is_a_lost_write():
    """Finding 2's shape: the log ends (a hole read as its end) before a record that was acknowledged."""
    h = clean()
    h.op("r2", OK, "eof", {"k": 5}, isolation=RC)  # c was committed at 5: the log ends before it
    result = check(h.ops)
    assert found(result) == {"lost-write": 1}
    assert result["lost-write"] == [{"key": "k", "offset": 5, "value": "c", "end": 5, "reader": "r2", "writer": "p0"}]


def test_an_end_held_back_by_an_open_transaction_loses_nothing():
    h = clean()
    h.op("p1", INVOKE, "txn", txn=0)
    h.send("p1", ("k", 7, "d"), txn=0)
    h.transaction("p0", 3, ("k", 9, "e"))
    h.op("r2", OK, "eof", {"k": 7}, isolation=RC)  # the LSO waits at 7 for p1's transaction
    h.op("r2", OK, "eof", {"k": 10}, isolation=RU)
    assert found(check(h.ops)) == {}


def test_a_read_at_no_offset_or_of_no_value_is_an_inconsistent_offset():
    """Damage read as data: a flipped byte can make a row's offset or value null."""
    h = clean()
    h.poll("r2", {"k": [(0, "a"), (None, "b")]})
    h.poll("r3", {"k": [(0, "a"), (1, None)]})
    result = check(h.ops)
    assert found(result) == {"inconsistent-offsets": 2}
    assert [example["offset"] for example in result["inconsistent-offsets"]] == [1, None]


def faulted() -> Builder:
    """Five faults, one per key; clients' errors after (and one before) them; a lost write on the harmed key."""
    h = clean()
    h.op("p0", OK, "send", [["d", 0, "x"]])
    h.op("c", "fail", "error", {"key": "b", "name": "CORRUPT_MESSAGE"})  # before any fault: no verdict
    for key, kind in zip("abcde", ["hole", "flip-byte", "empty-commit", "torn-data", "hole"], strict=True):
        h.op("nemesis", INFO, "fault", {"kind": kind, "key": key, "file": "f", "detail": ""})
    h.op("c", "fail", "error", {"key": "a", "name": "CORRUPT_MESSAGE"})
    h.op("c", "fail", "error", {"key": "a", "name": "KAFKA_STORAGE_ERROR"})  # refused once is refused
    h.op("c", "fail", "error", {"key": "c", "name": "KAFKA_STORAGE_ERROR"})
    h.op("c", "fail", "error", {"key": "d", "name": "CORRUPT_MESSAGE"})  # refused, yet the write below is lost
    h.op("r", OK, "eof", {"d": 0}, isolation=RC)
    return h


def test_each_fault_is_survived_refused_harmed_or_met_with_another_error():
    h = faulted()
    result = check(h.ops)
    assert found(result) == {"lost-write": 1}
    outcomes = {fault["key"]: fault["outcome"] for fault in fault_outcomes(h.ops, result)}
    assert outcomes == {"a": "refused", "b": "survived", "c": "wrong-error", "d": "harmed", "e": "survived"}
    assert fault_tally(fault_outcomes(h.ops, result)) == {
        "empty-commit": {"survived": 0, "refused": 0, "harmed": 0, "wrong-error": 1},
        "flip-byte": {"survived": 1, "refused": 0, "harmed": 0, "wrong-error": 0},
        "hole": {"survived": 1, "refused": 1, "harmed": 0, "wrong-error": 0},
        "torn-data": {"survived": 0, "refused": 0, "harmed": 1, "wrong-error": 0},
    }


def test_a_fault_table_row_per_kind_and_a_total():
    rows = [line.split() for line in fault_table(fault_tally(fault_outcomes(faulted().ops, check(faulted().ops)))).splitlines()]
    assert rows[0] == ["fault", "injected", *FAULT_OUTCOMES]
    assert rows[1:] == [
        ["empty-commit", "1", "0", "0", "0", "1"],
        ["flip-byte", "1", "1", "0", "0", "0"],
        ["hole", "2", "1", "1", "0", "0"],
        ["torn-data", "1", "0", "0", "1", "0"],
        ["total", "5", "2", "1", "1", "1"],
    ]
