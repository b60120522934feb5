"""The console over a wide root: first paint of the overview and of a topic page, and the storage requests of one refresh.

A root holds one topic of 10 partitions and one of 1,000 (quick: 100), 5 records each, and a group that committed
on every partition of the wide one. The console's app is served in this process (uvicorn on loopback) and opened
in headless Chromium (Debian's, driven by Playwright): first paint is the browser's first-contentful-paint of a
page opened cold (a fresh page; the process's partition handles warm, as a running console's are after its first
page), and its page load. One refresh is the page's own fragment request (what its script fetches every
--refresh-ms). On the S3 root (moto on loopback behind a counting proxy) the requests of one refresh are counted
by kind: bounded by the partitions, never by the records. Ratios are each figure over the same at 10 partitions,
measured in this run; the target of a refresh's requests is 3 per partition (two GETs of each partition's
log, plus the page's own listing and coordinator reads).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator

from bench import _common
from lakelog import Consumer, TopicPartition
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.store import Location, initialise_root

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from round_trips import DelayedStore  # noqa: E402 - test tooling, shared with the benchmark
from s3emulator import S3Emulator  # noqa: E402

SMALL = 10
WIDE = 1_000
WIDE_QUICK = 100
RECORDS = 5
BUCKET = "lakelog-bench-console"
CHROMIUM = os.environ.get("LAKELOG_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
PAINT_TARGET = 10.0
REQUESTS_PER_PARTITION = 3.0


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("console_scale")
    wide = WIDE_QUICK if quick else WIDE
    print(f"== console_scale: first paint and one refresh's requests at {SMALL} and {wide} partitions")
    with _common.temp_root(root_parent, keep) as root:
        _report(result, "local", _measure_root(root, wide, None))
    with S3Emulator() as emulator:
        emulator.create_bucket(BUCKET)
        with DelayedStore(emulator, 0.0) as store, store.exported():
            root = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
            initialise_root(root)
            _report(result, "s3", _measure_root(root, wide, store))
    return result


def _measure_root(root: str, wide: int, store: DelayedStore | None) -> dict[str, dict[int, float]]:
    from playwright.sync_api import sync_playwright

    from lakelog.console.app import ConsoleSettings, create_app

    started = time.monotonic()
    for name, partitions in (("small", SMALL), ("wide", wide)):
        _fill(root, name, partitions)
    print(f"-- {root}: filled in {time.monotonic() - started:.1f} s")
    figures: dict[str, dict[int, float]] = {}
    app = create_app(ConsoleSettings.of(Location.of(root), False, refresh_ms=0))
    with _served(app) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            for partitions, topic in ((SMALL, "small"), (wide, "wide")):
                for page_name, path in (("overview", "/"), ("topic page", f"/topics/{topic}")):
                    if page_name == "overview" and partitions == SMALL:
                        continue  # one overview shows both topics: measured once, at the wide root
                    paint, load = _first_paint(browser, url + path)
                    figures.setdefault(f"{page_name} first paint s", {})[partitions] = paint
                    figures.setdefault(f"{page_name} load s", {})[partitions] = load
                    if store is not None:
                        with store.traced() as traces:
                            _fragment(url + path)
                        (trace,) = traces
                        figures.setdefault(f"{page_name} refresh requests", {})[partitions] = len(trace.requests)
                        print(f"   {page_name} of {topic}: one refresh made {dict(trace.mix)}")
        finally:
            browser.close()
    return figures


def _first_paint(browser, url: str) -> tuple[float, float]:
    page = browser.new_context().new_page()
    try:
        started = time.monotonic()
        page.goto(url, wait_until="load", timeout=600_000)
        load = time.monotonic() - started
        paint = page.evaluate(
            "() => { const e = performance.getEntriesByName('first-contentful-paint')[0]; return e ? e.startTime : -1; }"
        )
        return (paint / 1000 if paint >= 0 else load), load
    finally:
        page.close()


def _fragment(url: str) -> None:
    request = urllib.request.Request(url, headers={"X-Console-Fragment": "1"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        answer.read()


@contextlib.contextmanager
def _served(app) -> Iterator[str]:
    import uvicorn

    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


def _fill(root: str, topic: str, partitions: int) -> None:
    create_topic(root, topic, partitions)
    for partition in range(partitions):
        open_partition(root, topic, partition).append(payload_table([f"{partition}-{i}".encode() for i in range(RECORDS)]))
    if topic == "small":
        return
    consumer = Consumer({"lakelog.root": root, "group.id": "bench-readers", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, p, RECORDS - 2) for p in range(partitions)], asynchronous=False)
    consumer.close()


def _report(result: _common.Result, kind: str, figures: dict[str, dict[int, float]]) -> None:
    print(f"-- {kind} root:")
    wide = max(partitions for values in figures.values() for partitions in values)
    rows = []
    for name, values in figures.items():
        at_small = values.get(SMALL)
        rows.append([name, at_small if at_small is not None else "", values[wide]])
        if name.endswith("refresh requests"):
            result.add(f"console_scale {kind} {name} per partition at {wide}", values[wide] / wide, REQUESTS_PER_PARTITION)
        elif "first paint" in name and at_small:
            result.add(f"console_scale {kind} {name} at {wide}/at {SMALL}", values[wide] / at_small, PAINT_TARGET)
    _common.print_table(["figure", f"at {SMALL}", f"at {wide}"], rows)


if __name__ == "__main__":
    _common.cli(run, __doc__)
