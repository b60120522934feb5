"""`lakelog transactions ...` and `lakelog coordinator sweep`, run for real (S8.1, S8.2, S8.3)."""

from __future__ import annotations

import json

from helpers import fingerprint_but_sweeps, table_fingerprint

from lakelog import Producer
from lakelog.log import BatchHeader, create_topic, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED
from lakelog.store import Location


def ok(result) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return result.stdout


def table(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def test_S8_1_transactions_list_describe_and_producers(lakelog, lake):
    create_topic(lake, "pay", 2)
    p = Producer({"lakelog.root": lake, "transactional.id": "billing"})
    p.init_transactions()
    p.begin_transaction()
    p.produce("pay", value="x", partition=1)
    p.flush()
    assert table(ok(lakelog("transactions", "list", "--root", lake)))[1] == ["billing", str(p._producer_id), "Ongoing"]
    described = table(ok(lakelog("transactions", "describe", "--transactional-id", "billing", "--root", lake)))
    assert described[1][3] == "Ongoing" and described[1][-1] == "pay-1"
    producers = table(ok(lakelog("transactions", "describe-producers", "--topic", "pay", "--partition", "1", "--root", lake)))
    assert producers[1][0] == str(p._producer_id) and producers[1][-1] == "0"
    p.commit_transaction()
    # Its markers are written; Complete* rides on the producer's next transaction (S4.5): shown with its outcome.
    committed = "PrepareCommit (committed; completion pending)"
    assert table(ok(lakelog("transactions", "list", "--root", lake)))[1][2] == committed
    p.close()
    assert table(ok(lakelog("transactions", "list", "--root", lake)))[1][2] == committed
    described = table(ok(lakelog("transactions", "describe", "--transactional-id", "billing", "--root", lake)))
    assert described[1][3] == committed
    assert "(committed; completion pending)" in ok(lakelog("transactions", "list", "--help"))
    ok(lakelog("coordinator", "sweep", "--root", lake))
    assert table(ok(lakelog("transactions", "list", "--root", lake)))[1][2] == "CompleteCommit"


def test_S8_1_find_hanging_and_abort(lakelog, lake):
    """KIP-664: abort names the transaction as find-hanging printed it, and aborts it only if it is still that one."""
    create_topic(lake, "pay", 1)
    log = open_partition(lake, "pay", 0)
    log.append(payload_table([b"stray"]), BatchHeader(77, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    found = table(ok(lakelog("transactions", "find-hanging", "--root", lake)))
    assert found[1][:7] == ["pay", "0", "77", "0", "0", "0", "true"]
    before = table_fingerprint(lake)
    abort = ("transactions", "abort", "--topic", "pay", "--partition", "0", "--root", lake)
    for wrong in (("--producer-id", "77", "--producer-epoch", "1"), ("--start-offset", "5")):
        refused = lakelog(*abort, *wrong)
        assert refused.returncode == 2 and "INVALID_TXN_STATE" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert table_fingerprint(lake) == before  # S8.3
    done = ok(lakelog(*abort, "--producer-id", "77", "--producer-epoch", "0", "--start-offset", "0"))
    assert "producer id 77 (epoch 0, start offset 0)" in done and "marker at offset 1, epoch 1" in done
    assert len(table(ok(lakelog("transactions", "find-hanging", "--root", lake)))) == 1  # the header only


def test_S8_2_coordinator_sweep_reports_json_and_is_idempotent(lakelog, lake):
    create_topic(lake, "pay", 1)
    p = Producer({"lakelog.root": lake, "transactional.id": "a"})
    p.init_transactions()
    first = json.loads(ok(lakelog("coordinator", "sweep", "--root", lake)))
    assert first["ids_seen"] == 1 and first["aborted_timed_out"] == [] and first["expired"] == []
    before, sweeps = fingerprint_but_sweeps(lake), Location.of(lake).child("__sweeps")
    rows = len(table_fingerprint(sweeps.uri))
    ok(lakelog("coordinator", "sweep", "--root", lake))
    assert fingerprint_but_sweeps(lake) == before
    assert len(table_fingerprint(sweeps.uri)) > rows  # only the sweep's own row was added


def test_transactions_bad_input_exits_2_with_one_line(lakelog, lake):
    create_topic(lake, "pay", 1)
    for args in (
        ("transactions", "describe", "--transactional-id", "nobody"),
        ("transactions", "describe-producers", "--topic", "missing", "--partition", "0"),
        ("transactions", "describe-producers", "--topic", "pay", "--partition", "x"),
        ("transactions", "abort", "--topic", "pay", "--partition", "0"),
    ):
        result = lakelog(*args, "--root", lake)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
