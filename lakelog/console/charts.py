"""Charts drawn on the server as inline SVG: no script library, nothing fetched at run time.

A bar chart of one value per label (records per partition, the HW - LSO gap per partition, a group's lag per
partition); each bar carries its label and value in a <title>, so a person hovering it reads the number.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

WIDTH = 640
HEIGHT = 160
MAX_BARS = 200
# Up to this many bars, each is labelled under it.
LABELLED_BARS = 32


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
