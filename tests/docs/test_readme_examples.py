"""Every python and bash example in README.md and docs/*.md runs as written (the documents cannot drift from the code).

The code blocks are read from README.md itself, then from each document in docs/ (the reference the README links to). Each one is preceded by a marker comment:

    <!-- readme-test: NAME [after NAME,NAME] [spark] -->   run it (after the named blocks, in the same folder)
    <!-- readme-test: skip (reason) -->                     not meant to run standalone, and why

A named block runs in a fresh temporary folder, after the blocks it names have run there (so a block that reads
the root "lake" runs after the block that created it; a block in docs/ may run after a README block): python blocks with this interpreter, bash blocks with
`bash -e -o pipefail` and `lakelog` on PATH. An example that exits non-zero fails its test, with its output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
# The README first: a document in docs/ names README blocks to run after (its examples start from the README's root).
DOCUMENTS = [README, *sorted((README.parent / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*readme-test:\s*(?P<spec>.*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
RUN_LANGUAGES = ("python", "bash")
# A python example that starts Spark takes about 20 s; the rest take a few seconds each.
TIMEOUT_S = 300


@dataclass(frozen=True)
class Example:
    name: str
    language: str
    code: str
    line: int
    after: tuple[str, ...] = ()
    spark: bool = False
    source: str = "README.md"


@dataclass(frozen=True)
class Skipped:
    line: int
    reason: str


def read_examples(
    text: str, source: str = "README.md", known: dict[str, Example] | None = None
) -> tuple[dict[str, Example], list[Skipped], list[str]]:
    """The named examples (those of documents read before, `known`, then this one's), this document's skipped blocks,
    and a problem per block that has no valid marker."""
    lines = text.splitlines()
    examples: dict[str, Example] = dict(known or {})
    skipped: list[Skipped] = []
    problems: list[str] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        start = index
        end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == "```"), len(lines))
        index = end + 1
        language = fence.group("lang")
        inner = next((i for i in range(start + 1, end) if FENCE.match(lines[i]) and lines[i].strip() != "```"), None)
        if inner is not None:
            problems.append(f"{source} line {start + 1}: the block is not closed before the block at line {inner + 1}")
        if not language:
            # Every block names its language, so a block whose closing fence went missing shows up here.
            problems.append(f"{source} line {start + 1}: a block opens without a language (or a block above is not closed)")
        if language not in RUN_LANGUAGES:
            continue
        code = "\n".join(lines[start + 1 : end]) + "\n"
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        marker = MARKER.search(previous)
        where = f"{source} line {start + 1}"
        if marker is None:
            problems.append(f"{where}: a {language} block without a readme-test marker")
            continue
        words = marker.group("spec").split()
        if words[0] == "skip":
            reason = marker.group("spec")[len("skip") :].strip()
            if not (reason.startswith("(") and reason.endswith(")") and len(reason) > 2):
                problems.append(f"{where}: a skipped block must say why: skip (reason)")
            skipped.append(Skipped(start + 1, reason))
            continue
        name, rest = words[0], words[1:]
        after: tuple[str, ...] = ()
        spark = False
        while rest:
            word = rest.pop(0)
            if word == "after" and rest:
                after = tuple(rest.pop(0).split(","))
            elif word == "spark":
                spark = True
            else:
                problems.append(f"{where}: unknown word {word!r} in its readme-test marker")
        if name in examples:
            problems.append(f"{where}: a second example named {name}")
        for needed in after:
            if needed not in examples:
                problems.append(f"{where}: {name} runs after {needed}, which no earlier block is named")
        examples[name] = Example(name, language, code, start + 1, after, spark, source)
    return examples, skipped, problems


def read_documents() -> tuple[dict[str, Example], list[Skipped], list[str]]:
    examples: dict[str, Example] = {}
    skipped: list[Skipped] = []
    problems: list[str] = []
    for document in DOCUMENTS:
        source = str(document.relative_to(README.parent))
        examples, more_skipped, more_problems = read_examples(document.read_text(), source, examples)
        skipped.extend(more_skipped)
        problems.extend(more_problems)
    return examples, skipped, problems


EXAMPLES, SKIPPED, PROBLEMS = read_documents()


def chain(name: str) -> list[Example]:
    """The blocks `name` runs after (theirs first), then `name` itself; each once."""
    order: list[Example] = []
    for needed in EXAMPLES[name].after:
        order.extend(example for example in chain(needed) if example not in order)
    order.append(EXAMPLES[name])
    return order


def run_example(example: Example, folder: Path) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("LAKELOG_")}
    # `lakelog` and `python` are this environment's, as after `pip install lakelog` (or inside `./dev sh`).
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    environment.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    script = folder / f"readme-{example.name}.{'py' if example.language == 'python' else 'sh'}"
    script.write_text(example.code)
    command = [sys.executable, script.name] if example.language == "python" else ["bash", "-e", "-o", "pipefail", script.name]
    return subprocess.run(
        command, cwd=folder, env=environment, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL
    )


def check_runs(name: str, folder: Path) -> None:
    for example in chain(name):
        done = run_example(example, folder)
        if done.returncode != 0:
            pytest.fail(
                f"example {example.name} ({example.source} line {example.line}) exited {done.returncode}"
                + (f" while preparing {name}" if example.name != name else "")
                + f"\n--- code\n{example.code}--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}",
                pytrace=False,
            )


def test_every_block_is_named_or_skipped_with_a_reason():
    assert not PROBLEMS, "\n".join(PROBLEMS)
    # The examples a new user meets first are all run, not skipped: in the README, and the first of the reference.
    for needed in ("api-quickstart", "api-transactions", "api-consume-transform-produce", "cli-quickstart", "cli-admin"):
        assert needed in EXAMPLES and EXAMPLES[needed].source == "README.md", needed
    for needed, document in (
        ("porting", "docs/porting.md"),
        ("spark-read-write", "docs/spark-and-sql.md"),
        ("quality-gate-cli", "docs/quality-gates.md"),
    ):
        assert needed in EXAMPLES and EXAMPLES[needed].source == document, needed


@pytest.mark.parametrize("name", [name for name, example in EXAMPLES.items() if example.language == "python"])
def test_python_examples_import_every_name_they_use(name):
    """A name used only on a path the run does not take (an `except KafkaException`) must be imported too."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821", "--stdin-filename", f"{name}.py", "-"],
        input=EXAMPLES[name].code,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"example {name} ({EXAMPLES[name].source} line {EXAMPLES[name].line}):\n{done.stdout}"


@pytest.mark.parametrize("name", [name for name, example in EXAMPLES.items() if not example.spark])
def test_readme_example_runs(name, tmp_path):
    check_runs(name, tmp_path)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, example in EXAMPLES.items() if example.spark])
def test_readme_spark_example_runs(name, tmp_path):
    check_runs(name, tmp_path)


def test_a_broken_example_fails(tmp_path):
    """The runner itself: an example that exits non-zero is a failure naming its line and its output."""
    broken = Example("broken", "bash", "lakelog topics describe --topic no-such-topic --root lake\n", 1)
    done = run_example(broken, tmp_path)
    assert done.returncode != 0 and "lakelog" in done.stderr
    with pytest.raises(pytest.fail.Exception, match="exited"):
        EXAMPLES["broken"] = broken
        try:
            check_runs("broken", tmp_path)
        finally:
            del EXAMPLES["broken"]


def test_markers_are_read():
    text = "\n".join(
        [
            "<!-- readme-test: first -->",
            "```bash",
            "true",
            "```",
            "<!-- readme-test: second after first spark -->",
            "```python",
            "pass",
            "```",
            "<!-- readme-test: skip (needs a cluster) -->",
            "```bash",
            "spark-submit x",
            "```",
            "```bash",
            "unmarked",
            "```",
            "```text",
            "output is not run",
            "```",
            "<!-- readme-test: unclosed -->",
            "```python",
            "print('its closing fence is missing')",
            "```bash",
            "echo the closing fence of this block closes the python block",
            "```",
            "```",
            "a fence without a language",
            "```",
        ]
    )
    examples, skipped, problems = read_examples(text)
    assert list(examples) == ["first", "second", "unclosed"]
    assert examples["second"].after == ("first",) and examples["second"].spark
    assert [s.reason for s in skipped] == ["(needs a cluster)"]
    assert problems == [
        "README.md line 13: a bash block without a readme-test marker",
        "README.md line 20: the block is not closed before the block at line 22",
        "README.md line 25: a block opens without a language (or a block above is not closed)",
    ]
