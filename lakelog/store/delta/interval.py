"""Delta's interval table properties ("interval 6 hours"), read by the strict commit and by log cleanup and vacuum."""

from __future__ import annotations

import re


def interval_seconds(text: str | None, default: float) -> float:
    """A Delta interval ("interval 6 hours") in seconds; `default` if unset or unreadable."""
    match = re.fullmatch(r"\s*interval\s+(\d+)\s+(\w+?)s?\s*", text or "")
    if not match:
        return default
    unit = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}.get(match.group(2))
    return default if unit is None else int(match.group(1)) * unit
