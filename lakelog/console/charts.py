"""Charts drawn on the server as inline SVG: no script library, nothing fetched at run time.

A bar chart of one value per label (records per partition, the HW - LSO gap per partition, a group's lag per
partition, commits per span of time); each bar carries its label and value in a <title>, so a person hovering it
reads the number. A step line of a value over time (offsets written, a group's lag), its first and last times
under it and each point's time and value in a <title>.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

WIDTH = 640
HEIGHT = 160
MAX_BARS = 200
# Up to this many bars, each is labelled under it.
LABELLED_BARS = 32
# A line over time keeps at most this many points (the last of each run of points closer than a pixel apart).
MAX_POINTS = WIDTH


def bars(title: str, labels: Sequence[str], values: Sequence[int], chart_id: str) -> str:
    """An SVG bar chart; past MAX_BARS bars, the largest MAX_BARS are drawn and the title says so."""
    pairs = list(zip(labels, values, strict=True))
    shown_title = title
    if len(pairs) > MAX_BARS:
        pairs = sorted(pairs, key=lambda pair: -pair[1])[:MAX_BARS]
        shown_title = f"{title} (the {MAX_BARS} largest of {len(labels)})"
    top = max((value for _, value in pairs), default=0)
    width = WIDTH / max(len(pairs), 1)
    parts = [
        f'<svg class="chart" id="{html.escape(chart_id)}" role="img" aria-label="{html.escape(shown_title)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT + 34}" width="{WIDTH}" height="{HEIGHT + 34}">',
        f'<text x="0" y="12" class="chart-title">{html.escape(shown_title)}; max {top}</text>',
    ]
    for index, (label, value) in enumerate(pairs):
        height = 0 if top == 0 else max(1.0, HEIGHT * value / top) if value else 0
        x = index * width
        parts.append(
            f'<rect class="bar" data-label="{html.escape(label)}" data-value="{value}" x="{x + 1:.1f}" '
            f'y="{HEIGHT + 20 - height:.1f}" width="{max(width - 2, 1):.1f}" height="{height:.1f}">'
            f"<title>{html.escape(label)}: {value}</title></rect>"
        )
        if len(pairs) <= LABELLED_BARS:
            parts.append(
                f'<text class="chart-label" x="{x + width / 2:.1f}" y="{HEIGHT + 32}" text-anchor="middle">{html.escape(label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _clock(time_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time_ms / 1000))


def line(title: str, points: Sequence[tuple[int, int]], chart_id: str) -> str:
    """An SVG step line of (time in ms, value) points in time order; `data-last` holds the last value."""
    pairs = list(points)
    if len(pairs) > MAX_POINTS:
        first, last = pairs[0][0], pairs[-1][0]
        span = max(last - first, 1)
        by_pixel: dict[int, tuple[int, int]] = {}
        for pair in pairs:
            by_pixel[(pair[0] - first) * MAX_POINTS // span] = pair
        pairs = list(by_pixel.values())
    last_value = pairs[-1][1] if pairs else 0
    top = max((value for _, value in pairs), default=0)
    parts = [
        f'<svg class="chart line-chart" id="{html.escape(chart_id)}" role="img" aria-label="{html.escape(title)}" '
        f'data-points="{len(pairs)}" data-last="{last_value}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT + 34}" width="{WIDTH}" height="{HEIGHT + 34}">',
        f'<text x="0" y="12" class="chart-title">{html.escape(title)}; max {top}, now {last_value}</text>',
    ]
    if not pairs:
        parts.append(f'<text x="0" y="{HEIGHT / 2 + 20:.0f}" class="chart-label">nothing yet</text></svg>')
        return "".join(parts)
    first, last = pairs[0][0], pairs[-1][0]
    span = max(last - first, 1)

    def x(time_ms: int) -> float:
        return (time_ms - first) * (WIDTH - 2) / span + 1

    def y(value: int) -> float:
        return HEIGHT + 20 - (0 if top == 0 else HEIGHT * value / top)

    path = [f"M{x(pairs[0][0]):.1f},{y(pairs[0][1]):.1f}"]
    for (_, before), (time_ms, value) in zip(pairs, pairs[1:], strict=False):
        path.append(f"H{x(time_ms):.1f}V{y(value):.1f}" if value != before else f"H{x(time_ms):.1f}")
    parts.append(f'<path class="line" d="{"".join(path)}" fill="none"/>')
    for time_ms, value in pairs[-LABELLED_BARS:]:
        parts.append(
            f'<circle class="point" cx="{x(time_ms):.1f}" cy="{y(value):.1f}" r="2">'
            f"<title>{_clock(time_ms)} UTC: {value}</title></circle>"
        )
    parts.append(f'<text class="chart-label" x="0" y="{HEIGHT + 32}">{_clock(first)}</text>')
    parts.append(f'<text class="chart-label" x="{WIDTH}" y="{HEIGHT + 32}" text-anchor="end">{_clock(last)} UTC</text>')
    parts.append("</svg>")
    return "".join(parts)
