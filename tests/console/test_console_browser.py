"""The console in a real browser: Debian's Chromium, headless, driven by Playwright, against `lakelog console`
started as a user starts it. What a person sees: the numbers of the Admin API, the hanging transaction flagged,
a read_committed lag with no marker in it, an action refused without the token, and, with it, the transaction
aborted and the LSO moving on the page's own refresh (no reload).

Screenshots of each view go to $LAKELOG_CONSOLE_SCREENSHOTS when set (docs/console/ holds the ones the docs show).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakelog.admin import AdminClient
from tests.console.conftest import STRAY_PRODUCER

CHROMIUM = os.environ.get("LAKELOG_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOT_SIZE = {"width": 1280, "height": 860}

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (./dev installs Debian's)")


class Console:
    """`lakelog console` run from the root's parent folder, given the root by its relative name as a user would."""

    def __init__(self, root: str, *flags: str) -> None:
        folder = Path(root)
        command = [sys.executable, "-m", "lakelog.cli", "console", "--root", folder.name, "--port", "0", "--refresh-ms", "400"]
        self.process = subprocess.Popen(
            [*command, *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder.parent
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        found = re.search(r"at (http://\S+/) \((read-only|actions allowed)\)", first)
        assert found, (first, self.process.stderr.read() if self.process.poll() is not None else "")
        self.url, self.mode = found.group(1), found.group(2)
        self.token = ""
        if self.mode == "actions allowed":
            self.token = self.process.stdout.readline().split(": ", 1)[1].strip()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def browser_page(tmp_path) -> Iterator:
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_context(viewport=SHOT_SIZE).new_page()
        page.on("dialog", lambda dialog: dialog.accept())  # the actions' confirmation: a person says yes
        try:
            yield page
        finally:
            browser.close()


def shot(page, name: str) -> None:
    folder = os.environ.get("LAKELOG_CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def text(page, selector: str) -> str:
    return page.locator(selector).first.inner_text().strip()


def test_S5_1_S8_1_every_view_in_a_browser_and_an_abort_that_moves_the_lso_without_a_reload(gated_scene, browser_page):
    scene, page = gated_scene, browser_page
    started = time.monotonic()
    read_only = Console(scene.root)
    try:
        assert read_only.mode == "read-only"
        page.goto(read_only.url + "transactions")
        assert page.locator("form.action input[name=token]").first.is_disabled()
        # A form posted anyway (as a script would): refused in one line, nothing aborted.
        answer = page.request.post(
            read_only.url + "actions/abort-transaction",
            form={"topic": "pay", "partition": "0", "producer_id": str(STRAY_PRODUCER), "token": "x", "back": "/"},
        )
        assert answer.status == 403 and "--allow-actions" in answer.text()
    finally:
        read_only.stop()

    console = Console(scene.root, "--allow-actions")
    try:
        admin = AdminClient({"lakelog.root": scene.root})
        orders = admin.describe_topics(["orders"])["orders"].result()
        page.goto(console.url)
        assert text(page, "#n-topics") == "3" and text(page, "#n-partitions") == "4"
        assert "hanging transaction" in text(page, "#warnings") and "group with no members" in text(page, "#warnings")
        shot(page, "overview")

        page.click("a[href='/topics/orders']")
        for partition in orders.partitions:
            row = page.locator(f"#partitions tr[data-partition='{partition.id}']")
            assert row.locator("td.lso").inner_text() == str(partition.last_stable_offset)
            assert row.locator("td.hw").inner_text() == str(partition.high_watermark)
        assert page.locator("#chart-gap rect.bar[data-label='1']").get_attribute("data-value") == "1"
        shot(page, "topic")
        page.click("#producers-link")
        assert page.locator("#producers tr[data-partition='1'] td.open-from").inner_text() == "0"
        shot(page, "producers")

        page.goto(console.url + "topics/orders/0/messages?format=json")
        statuses = page.locator("#messages tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
        assert statuses.count("aborted") == 2 and statuses.count("control") == 3 and statuses.count("committed") == 5
        shot(page, "messages")

        page.goto(console.url + "groups/readers")
        assert page.locator("#offsets tr[data-partition='orders-0'] td.lag").inner_text() == "2"
        assert page.locator("#offsets tr[data-partition='orders-0'] td.offset-lag").inner_text() == "7"
        shot(page, "group")
        page.goto(console.url + "groups")
        shot(page, "groups")
        page.click("a[href='/quality']")
        assert page.locator("#results td.verdict").evaluate_all("cells => cells.map(c => c.innerText)") == ["FAILED", "passed"]
        assert "value.amount" in text(page, "#results .failure")
        shot(page, "quality")

        page.goto(console.url + "topics/pay?q=")
        assert page.locator("#partitions tr[data-partition='0'] td.lso").inner_text() == "1"
        pay_page = page.url
        page.goto(console.url + "transactions")
        hanging = page.locator(f"#hanging tr[data-producer='{STRAY_PRODUCER}']")
        assert hanging.count() == 1 and hanging.locator("td.held").inner_text() == "1"
        assert page.locator("#transactions tbody tr").first.get_attribute("data-id") == "live"
        shot(page, "transactions")
        # The filter keeps its text in the URL and hides the other rows.
        page.fill("#filter", "loader")
        assert (
            "q=loader" in page.evaluate("window.location.href") and page.locator("#transactions tr[data-id='live']").is_hidden()
        )
        page.fill("#filter", "")

        # A wrong token: refused, in one line, nothing changes.
        hanging.locator("input[name=token]").fill("not-the-token")
        hanging.locator("button").click()
        assert "token" in text(page, "#refusal")
        page.go_back()
        # The right one: aborted; the topic page's own refresh shows the LSO past the marker.
        page.goto(pay_page)
        refreshed = page.evaluate("document.body.dataset.refreshed || ''")
        other = page.context.new_page()
        other.on("dialog", lambda dialog: dialog.accept())
        other.goto(console.url + "transactions")
        other.locator(f"#hanging tr[data-producer='{STRAY_PRODUCER}'] input[name=token]").fill(console.token)
        other.locator(f"#hanging tr[data-producer='{STRAY_PRODUCER}'] button").click()
        assert "marker at offset 2" in text(other, "#message")
        page.wait_for_function(
            "was => document.body.dataset.refreshed !== was && "
            "document.querySelector(\"#partitions tr[data-partition='0'] td.lso\").innerText === '3'",
            arg=refreshed,
            timeout=10_000,
        )
        assert admin.describe_topics(["pay"])["pay"].result().partitions[0].last_stable_offset == 3
        print(f"browser test: every view and the abort in {time.monotonic() - started:.1f} s")
    finally:
        console.stop()
