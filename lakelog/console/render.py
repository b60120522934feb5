"""How the console writes values: a record's bytes as text, JSON or hex; times; what a status means."""

from __future__ import annotations

import datetime
import json

FORMATS = ("text", "json", "hex")
MAX_SHOWN_BYTES = 2_000


def value(data: bytes | None, form: str) -> str:
    """`data` as `form` (text: UTF-8 with replacement; json: indented, or the text when it is not JSON; hex)."""
    if data is None:
        return "null"
    shown = data[:MAX_SHOWN_BYTES]
    more = f" … ({len(data)} bytes)" if len(data) > MAX_SHOWN_BYTES else ""
    if form == "hex":
        return shown.hex(" ") + more
    text = shown.decode("utf-8", errors="replace")
    if form == "json":
        try:
            return json.dumps(json.loads(data), indent=2, sort_keys=True)
        except ValueError:
            return text + more
    return text + more


def time_ms(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def age_ms(now_ms: int, then_ms: int) -> str:
    seconds = max(0, now_ms - then_ms) // 1000
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"
