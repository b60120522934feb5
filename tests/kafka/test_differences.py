"""The documented list of differences that remain (docs/differences-from-kafka.md, linked from the README) is the
differential harness's list: nothing more, nothing less."""

from __future__ import annotations

import re
from pathlib import Path

from .differences import DIFFERENCES

DIFFERENCES_DOC = Path(__file__).resolve().parents[2] / "docs" / "differences-from-kafka.md"


def readme_differences() -> list[tuple[str, str]]:
    text = DIFFERENCES_DOC.read_text()
    start = text.index("Differences that remain")
    end = text.find("\n## ", start)
    block = text[start : end if end >= 0 else len(text)]
    section, lines = None, []
    for line in block.splitlines()[1:]:
        if line.startswith("- "):
            section = line[2:].strip()
        elif match := re.match(r"  - (.*)", line):
            lines.append((section, match.group(1)))
    return lines


def test_readme_lists_exactly_the_harness_differences() -> None:
    readme = readme_differences()
    assert readme, "the 'Differences that remain' list of docs/differences-from-kafka.md was not found"
    assert len(readme) == len(set(readme)), "a difference is listed twice in docs/differences-from-kafka.md"
    assert sorted(readme) == sorted(DIFFERENCES.values())
