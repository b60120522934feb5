"""The console's web application: a Starlette app of one root, its pages rendered by Jinja2 on the server.

Pages are rendered in Starlette's thread pool (the reads block on the store), so one slow page never holds
another. Every page is a stable URL whose query holds its filter and choices; a page asked for with the header
`X-Console-Fragment: 1` answers only its content, which the page's script fetches to refresh itself without a
full reload (static/console.js). Actions (POST) are refused unless the console was started with actions allowed,
and then only with the token it printed at start-up; each goes through the same Admin API as the CLI, is logged,
and a refusal says why in one line and changes nothing (S8.3).
"""

from __future__ import annotations

import hmac
import html
import logging
import secrets
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from lakelog.client import TopicPartition
from lakelog.client.admin import browse
from lakelog.client.admin import groups as group_admin
from lakelog.client.roots import Location
from lakelog.console import charts, render, state
from lakelog.errors import KafkaException

logger = logging.getLogger(__name__)

REFRESH_MS = 5_000
FRAGMENT_HEADER = "x-console-fragment"
PAGE_RECORDS = 50


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class ConsoleSettings:
    """What a console serves: one root; actions only when allowed, and then with `token`; `clock` (ms) decides
    which transactions are past their timeout (hanging), as the sweep's clock does."""

    root: Location
    allow_actions: bool = False
    token: str = ""
    refresh_ms: int = REFRESH_MS
    clock: Callable[[], int] = wall_clock_ms
    # The root as the user gave it (a relative folder stays relative on the pages).
    shown_root: str = ""

    @classmethod
    def of(cls, root: Location, allow_actions: bool, refresh_ms: int = REFRESH_MS, shown_root: str = "") -> ConsoleSettings:
        token = secrets.token_urlsafe(18) if allow_actions else ""
        return cls(root, allow_actions, token, refresh_ms, shown_root=shown_root or root.uri)


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console of `settings.root`."""
    files = resources.files("lakelog.console")
    templates = Jinja2Templates(directory=str(files / "templates"))
    templates.env.globals.update(charts=charts, render=render)
    root = settings.root
    root_text = settings.shown_root or root.uri

    def page(request: Request, name: str, **context: Any) -> Response:
        fragment = request.headers.get(FRAGMENT_HEADER) == "1"
        context.update(
            root=root_text,
            fragment=fragment,
            refresh_ms=settings.refresh_ms,
            actions=settings.allow_actions,
            message=request.query_params.get("message"),
            refused=request.query_params.get("refused") == "1",
            query=request.query_params.get("q", ""),
        )
        return templates.TemplateResponse(request, name, context)

    def overview(request: Request) -> Response:
        view = state.overview(root, settings.clock())
        labels = [f"-{len(view.commits_per_minute) - index} min" for index in range(len(view.commits_per_minute))]
        return page(request, "overview.html", view=view, minute_labels=labels)

    def topic(request: Request) -> Response:
        name = request.path_params["name"]
        description, config, history = state.topic(root, name, settings.clock())
        parts = description.partitions
        return page(
            request,
            "topic.html",
            topic=description,
            config=config,
            history=history,
            labels=[str(p.id) for p in parts],
            sizes=[p.high_watermark - p.log_start_offset for p in parts],
            gaps=[p.high_watermark - p.last_stable_offset for p in parts],
        )

    def producers(request: Request) -> Response:
        name = request.path_params["name"]
        return page(request, "producers.html", topic=name, partitions=state.producers(root, name))

    def messages(request: Request) -> Response:
        name, partition = request.path_params["name"], int(request.path_params["partition"])
        offset = _int(request.query_params.get("offset"))
        shown = request.query_params.get("isolation", "read_uncommitted")
        value_format = request.query_params.get("format", "text")
        found = browse.browse(root, name, partition, offset, PAGE_RECORDS)
        records = [r for r in found.records if shown == "read_uncommitted" or r.status == browse.COMMITTED]
        return page(
            request,
            "messages.html",
            topic=name,
            partition=partition,
            page_=found,
            records=records,
            isolation=shown,
            value_format=value_format,
            offset=offset,
        )

    def transactions(request: Request) -> Response:
        now_ms = settings.clock()
        rows, hanging = state.transactions(root, now_ms)
        return page(request, "transactions.html", rows=rows, hanging=hanging, now_ms=now_ms)

    def groups(request: Request) -> Response:
        return page(request, "groups.html", groups=list(state.groups(root)))

    def group(request: Request) -> Response:
        found = state.group(root, request.path_params["group_id"], settings.clock())
        lags = [0 if p.lag_committed is None else p.lag_committed.records for p in found.partitions]
        return page(request, "group.html", group=found, labels=[f"{p.topic}-{p.partition}" for p in found.partitions], lags=lags)

    def quality(request: Request) -> Response:
        suites, results = state.quality(root)
        return page(request, "quality.html", suites=suites, results=results)

    async def action(request: Request) -> Response:
        form = await request.form()
        back = str(form.get("back") or "/")
        if not back.startswith("/"):
            back = "/"
        name = request.path_params["action"]
        if not settings.allow_actions:
            return _refused("actions are off: start the console with --allow-actions", back)
        if not hmac.compare_digest(str(form.get("token", "")), settings.token):
            return _refused("the action's token is not the one the console printed at start-up", back)
        if name not in ACTIONS:
            return PlainTextResponse(f"no action {name!r}", status_code=404)
        try:
            said = await run_in_threadpool(ACTIONS[name], root, form)
        except KeyError as error:
            return _said(back, f"{name} refused: the form has no field {error}", refused=True)
        except (KafkaException, ValueError) as error:
            logger.warning("console: %s refused: %s", name, error)
            return _said(back, f"{name} refused: {_one_line(error)}", refused=True)
        logger.warning("console: %s: %s", name, said)
        return _said(back, said)

    def health(_: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        Route("/", overview),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/{partition:int}/messages", messages),
        Route("/topics/{name}/producers", producers),
        Route("/transactions", transactions),
        Route("/groups", groups),
        Route("/groups/{group_id}", group),
        Route("/quality", quality),
        Route("/actions/{action}", action, methods=["POST"]),
        Route("/health", health),
        Mount("/static", StaticFiles(directory=str(files / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={KafkaException: _kafka_error})
    return app


def _abort(root: Location, form: Any) -> str:
    topic, partition, producer_id = str(form["topic"]), int(form["partition"]), int(form["producer_id"])
    admin = state.admin(root)
    offset = admin.abort_transaction(TopicPartition(topic, partition), producer_id).result()
    return f"aborted the hanging transaction of producer id {producer_id} in {topic}-{partition}: marker at offset {offset}"


def _reset_offsets(root: Location, form: Any) -> str:
    group_id, strategy = str(form["group"]), str(form["strategy"])
    value = _int(form.get("value"))
    rows = group_admin.group_offsets(root, group_id)
    plan = group_admin.plan_reset(
        root, group_id, [(r.topic, r.partition) for r in rows if r.high_watermark >= 0], strategy, value
    )
    group_admin.alter_offsets(root, group_id, {tp: (offset, "") for tp, offset in plan.items()})
    moved = ", ".join(f"{topic}-{partition}={offset}" for (topic, partition), offset in sorted(plan.items()))
    return f"group {group_id}: offsets reset ({strategy}) to {moved}"


def _delete_records(root: Location, form: Any) -> str:
    topic, partition, offset = str(form["topic"]), int(form["partition"]), int(form["offset"])
    deleted = state.admin(root).delete_records([TopicPartition(topic, partition, offset)])
    low = next(iter(deleted.values())).result().low_watermark
    return f"{topic}-{partition}: records before offset {offset} deleted; the log starts at {low}"


ACTIONS = {"abort-transaction": _abort, "reset-offsets": _reset_offsets, "delete-records": _delete_records}


def _said(back: str, message: str, refused: bool = False) -> Response:
    """Back to the page the action came from, which shows `message` (a refusal marked as one)."""
    parts = urllib.parse.urlsplit(back)
    query = dict(urllib.parse.parse_qsl(parts.query))
    query.update(message=message, refused="1" if refused else "0")
    return RedirectResponse(urllib.parse.urlunsplit(("", "", parts.path, urllib.parse.urlencode(query), "")), status_code=303)


def _refused(message: str, back: str) -> Response:
    """A request no action may answer (actions off, a wrong token): 403 and the reason in one line."""
    logger.warning("console: an action was refused: %s", message)
    return HTMLResponse(
        f'<p class="refused" id="refusal">{html.escape(message)}</p><p><a href="{html.escape(back)}">back</a></p>',
        status_code=403,
    )


def _kafka_error(request: Request, error: Exception) -> Response:
    return PlainTextResponse(f"{_one_line(error)}", status_code=404)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _int(text: Any) -> int | None:
    if text is None or str(text).strip() == "":
        return None
    return int(str(text))
