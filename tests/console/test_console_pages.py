"""The console's pages over HTTP (Starlette's test client, the real app on a real root): what each page says
matches the Admin API, refusals change nothing (S8.3), and the lag of a read_committed group counts no marker."""

from __future__ import annotations

import dataclasses
import re

import pytest
from helpers import table_fingerprint
from starlette.testclient import TestClient

from lakelog.admin import AdminClient
from lakelog.client.admin import browse
from lakelog.client.admin import transactions as transactions_admin
from lakelog.client.roots import open_root
from lakelog.console.app import ConsoleSettings, create_app
from tests.console.conftest import STRAY_PRODUCER


def client(root: str, allow_actions: bool = False) -> tuple[TestClient, ConsoleSettings]:
    settings = ConsoleSettings.of(open_root(root, {}), allow_actions, refresh_ms=0)
    return TestClient(create_app(settings), follow_redirects=True), settings


def cell(page: str, row_attribute: str, value: str, cell_class: str) -> str:
    row = re.search(rf'<tr[^>]*{row_attribute}="{re.escape(value)}"[^>]*>(.*?)</tr>', page, re.S)
    assert row, (row_attribute, value)
    found = re.search(rf'<td class="{cell_class}">(.*?)</td>', row.group(1), re.S)
    assert found, (cell_class, row.group(1))
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def test_S5_1_overview_and_topic_pages_show_the_admin_apis_offsets(scene):
    web, _ = client(scene.root)
    described = AdminClient({"lakelog.root": scene.root}).describe_topics(["orders"])["orders"].result()
    page = web.get("/").text
    assert re.search(r'id="n-topics">2<', page) and re.search(r'id="n-partitions">3<', page)
    assert "hanging transaction" in page and "group with no members" in page
    topic = web.get("/topics/orders").text
    for partition in described.partitions:
        assert cell(topic, "data-partition", str(partition.id), "lso") == str(partition.last_stable_offset)
        assert cell(topic, "data-partition", str(partition.id), "hw") == str(partition.high_watermark)
    assert cell(topic, "data-partition", "1", "gap") == "1"  # the live transaction's record
    assert 'id="chart-gap"' in topic and "retention.ms" in topic
    producers = web.get("/topics/orders/producers").text
    states = transactions_admin.describe_producers(scene.root, "orders", 1)
    (live,) = states
    assert cell(producers, "data-producer", str(live.producer_id), "open-from") == "0"
    assert cell(producers, "data-producer", str(live.producer_id), "epoch") == str(live.producer_epoch)
    # A fragment is the content only (what the page's script swaps in).
    fragment = web.get("/topics/orders", headers={"X-Console-Fragment": "1"}).text
    assert fragment.startswith('<main id="content">') and "<header>" not in fragment


def test_S5_3_messages_mark_committed_aborted_open_and_control_rows(scene):
    web, _ = client(scene.root)
    page = web.get("/topics/orders/0/messages?isolation=read_uncommitted&format=json").text
    statuses = re.findall(r'data-offset="(\d+)" data-status="(\w+)"', page)
    kinds = [status for _, status in statuses]
    assert kinds == ["committed"] * 3 + ["control"] + ["aborted"] * 2 + ["control"] + ["committed"] * 2 + ["control"]
    assert "&#34;n&#34;: 1" in page or '"n": 1' in page  # the JSON value, indented
    committed = web.get("/topics/orders/0/messages?isolation=read_committed").text
    assert set(re.findall(r'data-status="(\w+)"', committed)) == {"committed"}
    open_rows = web.get("/topics/orders/1/messages").text
    assert re.findall(r'data-status="(\w+)"', open_rows) == ["open"]
    hexed = web.get("/topics/orders/0/messages?format=hex").text
    assert "7b 22 6e 22" in hexed  # {"n"


def test_S5_1_S7_1_group_lag_counts_records_a_read_committed_consumer_gets_not_markers(scene):
    web, _ = client(scene.root)
    page = web.get("/groups/readers").text
    assert cell(page, "data-partition", "orders-0", "lag") == "2"
    # LSO - committed (10 - 3) counts the three markers and the two aborted records past the committed offset.
    assert cell(page, "data-partition", "orders-0", "committed") == "3"
    assert cell(page, "data-partition", "orders-0", "offset-lag") == "7"
    # read_uncommitted: the aborted records and the last two, no marker.
    assert cell(page, "data-partition", "orders-0", "lag-uncommitted") == "4"
    assert cell(page, "data-partition", "orders-1", "lag") == "0"  # the open record is not readable yet
    assert cell(page, "data-partition", "orders-1", "lag-uncommitted") == "1"
    assert browse.records_lag(scene.root, "orders", 0, 0).records == 5  # 3 + 2 committed, 1 aborted txn of 2 skipped


def test_S8_1_transactions_page_flags_the_hanging_one_and_puts_the_open_ones_first(scene):
    web, _ = client(scene.root)
    page = web.get("/transactions").text
    assert f'data-producer="{STRAY_PRODUCER}"' in page
    ids = re.findall(r'<tr data-id="([^"]+)" data-state="(\w+)"', page)
    assert ids[0] == ("live", "Ongoing") and ("loader", "PrepareCommit") in ids or ("loader", "CompleteCommit") in ids
    assert cell(page, "data-id", "live", "held") == "1"


@pytest.mark.parametrize("allowed", [False, True], ids=["actions-off", "wrong-token"])
def test_S8_3_a_refused_action_says_why_in_one_line_and_changes_nothing(scene, allowed):
    web, _ = client(scene.root, allow_actions=allowed)
    before = table_fingerprint(scene.root)
    form = {"topic": "pay", "partition": "0", "producer_id": str(STRAY_PRODUCER), "token": "guess", "back": "/transactions"}
    answer = web.post("/actions/abort-transaction", data=form)
    assert answer.status_code == 403
    said = re.search(r'id="refusal">([^<]+)<', answer.text).group(1)
    assert ("--allow-actions" in said) != allowed and "\n" not in said
    assert table_fingerprint(scene.root) == before


def test_S8_1_an_allowed_action_with_the_token_aborts_the_hanging_transaction_and_the_lso_moves(scene):
    web, settings = client(scene.root, allow_actions=True)
    assert len(settings.token) >= 20
    form = {
        "topic": "pay",
        "partition": "0",
        "producer_id": str(STRAY_PRODUCER),
        "token": settings.token,
        "back": "/transactions",
    }
    answer = web.post("/actions/abort-transaction", data=form)
    assert answer.status_code == 200 and "marker at offset 2" in answer.text
    assert f'data-producer="{STRAY_PRODUCER}"' not in answer.text
    pay = AdminClient({"lakelog.root": scene.root}).describe_topics(["pay"])["pay"].result().partitions[0]
    assert pay.last_stable_offset == pay.high_watermark == 3
    # Resetting a group's offsets: refused with one line for an unknown strategy, done for a known one.
    bad = web.post(
        "/actions/reset-offsets",
        data={"group": "readers", "strategy": "sideways", "token": settings.token, "back": "/groups/readers"},
    )
    assert 'class="refused"' in bad.text and "unknown reset strategy" in bad.text
    done = web.post(
        "/actions/reset-offsets",
        data={"group": "readers", "strategy": "to-latest", "token": settings.token, "back": "/groups/readers"},
    )
    assert "offsets reset (to-latest)" in done.text and cell(done.text, "data-partition", "orders-0", "lag") == "0"


def test_S11_2_quality_page_shows_each_suite_and_the_refused_batch_with_its_failing_expectation(gated_scene):
    web, _ = client(gated_scene.root)
    page = web.get("/quality").text
    assert re.search(
        r'<tr data-topic="payments"><td><a href="/topics/payments">payments</a></td>\s*<td>amounts</td><td>enforce</td>', page
    )
    assert re.search(r'<tr data-topic="orders">.*?not gated', page, re.S)
    verdicts = re.findall(r'<td class="verdict">(\w+)</td>', page)
    assert verdicts == ["FAILED", "passed"]  # latest first
    assert "expect_column_values_to_be_between value.amount: 1 unexpected" in page


def chart(page: str, chart_id: str) -> str:
    found = re.search(rf'<svg [^>]*id="{chart_id}".*?</svg>', page, re.S)
    assert found, chart_id
    return found.group(0)


def test_S5_1_S6_1_charts_over_time_come_from_the_commit_history(scene):
    """The topic's offsets and commits over time, the overview's commits per minute and the group's lag over time:
    drawn from the partitions' files (one per commit) and the group's offset commits, matching the Admin API."""
    web, _ = client(scene.root)
    described = AdminClient({"lakelog.root": scene.root}).describe_topics(["orders"])["orders"].result()
    topic = web.get("/topics/orders").text
    offsets = chart(topic, "chart-offsets-over-time")
    assert f'data-last="{sum(p.high_watermark for p in described.partitions)}"' in offsets  # 10 + 1
    commits = [int(value) for value in re.findall(r'data-value="(\d+)"', chart(topic, "chart-commits-over-time"))]
    # orders-0: three transactions' data and their three markers; orders-1: the live transaction's record.
    assert sum(commits) == sum(p.files for p in described.partitions) == 7
    overview = chart(web.get("/").text, "chart-commits-per-minute")
    assert sum(int(value) for value in re.findall(r'data-value="(\d+)"', overview)) == 7 + 2  # and pay's two
    lag = chart(web.get("/groups/readers").text, "chart-lag-over-time")
    # At the group's commit (orders-0 at 3, its end then 7: the first two transactions and markers) the lag is 4;
    # the third transaction (2 records and a marker) and the live record take it to (10 - 3) + (1 - 0).
    values = [int(value) for value in re.findall(r"UTC: (\d+)</title>", lag)]
    assert values[0] == 4 and values[-1] == 8 and 'data-last="8"' in lag, values


def test_S9_5_the_overview_shows_the_last_sweep_from_its_row_and_flags_none_or_an_old_one(scene):
    """Every sweep leaves a row in __sweeps (what it ran, when); the overview shows the newest, warns when no sweep
    ever ran and when the last is older than SWEEP_STALE_MS. The row is shown, never decided on."""
    from lakelog.console import state
    from lakelog.jobs.maintenance import sweep
    from lakelog.log.sweep_log import last_sweep

    web, settings = client(scene.root)
    before = web.get("/").text
    assert 'data-kind="no sweep"' in before and re.search(r'id="last-sweep"><span class="n">never<', before)
    report = sweep(scene.root)
    row = last_sweep(scene.root)
    assert row is not None and row.started_ms <= row.finished_ms
    assert row.steps == ["transactions", "groups", "log-cleaner", "internal-compaction", "sink-records", "spark-staging"]
    assert row.counts["aborted_timed_out"] == len(report["aborted_timed_out"])
    after = web.get("/").text
    assert 'data-kind="no sweep"' not in after and 'data-kind="sweep overdue"' not in after
    assert "last sweep (" in after
    later = dataclasses.replace(settings, clock=lambda: row.finished_ms + state.SWEEP_STALE_MS + 60_000)
    assert 'data-kind="sweep overdue"' in TestClient(create_app(later)).get("/").text
    sweep(scene.root, skip=["log-cleaner"])  # a second sweep's row is the newest
    newest = last_sweep(scene.root)
    assert newest is not None and newest.finished_ms >= row.finished_ms and "log-cleaner" not in newest.steps
