"""The README's list of differences that remain is the differential harness's list: nothing more, nothing less."""

from __future__ import annotations

import re
from pathlib import Path

from .differences import DIFFERENCES

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_differences() -> list[tuple[str, str]]:
    text = README.read_text()
    start = text.index("Differences that remain")
    block = text[start : text.index("\n## ", start)]
    section, lines = None, []
    for line in block.splitlines()[1:]:
        if line.startswith("- "):
            section = line[2:].strip()
        elif match := re.match(r"  - (.*)", line):
            lines.append((section, match.group(1)))
    return lines


def test_readme_lists_exactly_the_harness_differences() -> None:
    readme = readme_differences()
    assert readme, "the README's 'Differences that remain' list was not found"
    assert len(readme) == len(set(readme)), "a difference is listed twice in the README"
    assert sorted(readme) == sorted(DIFFERENCES.values())
