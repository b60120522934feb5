"""A lakelog module that logs does so through its own module logger, named `logger`; library code never prints.

A static check over the package's source: a module that calls `logger.<level>(...)` or `logging.<level>(...)` has
`logger = logging.getLogger(__name__)` and no other module logger name (`log` also names a `PartitionLog`); and no
`print(` outside the command line, whose output is its result. Every shipped module (lakelog, pyspark_lakelog,
pipelines) holds one concept in at most 500 lines.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "lakelog"
MODULES = sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py")
PRINTS_ALLOWED = set((PACKAGE / "cli").glob("*.py"))  # the command line prints


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _module_loggers(tree: ast.Module) -> list[str]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if (
                isinstance(call.func, ast.Attribute)
                and call.func.attr == "getLogger"
                and len(call.args) == 1
                and isinstance(call.args[0], ast.Name)
                and call.args[0].id == "__name__"
            ):
                found.extend(target.id for target in node.targets if isinstance(target, ast.Name))
    return found


_LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def _logging_calls(tree: ast.Module, names: set[str]) -> list[int]:
    """Lines that call a level method on one of `names` (a module logger, or the `logging` module itself)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _LEVELS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in names
    ]


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_a_module_that_logs_has_its_own_logger_named_logger(path):
    tree = ast.parse(path.read_text())
    loggers = _module_loggers(tree)
    assert set(loggers) <= {"logger"}, f"{_name(path)} names its module logger {loggers}: call it `logger`"
    root_calls = _logging_calls(tree, {"logging"})
    assert root_calls == [], f"{_name(path)} logs through the root logger at line(s) {root_calls}: use `logger`"
    if _logging_calls(tree, {"logger"}):
        assert loggers == ["logger"], f"{_name(path)} logs but has no `logger = logging.getLogger(__name__)`"


@pytest.mark.parametrize("path", [path for path in MODULES if path not in PRINTS_ALLOWED], ids=_name)
def test_library_code_never_prints(path):
    calls = [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]
    assert calls == [], f"{_name(path)} prints at line(s) {calls}: log instead"


_ISSUE_NUMBER = re.compile(r"\bissues? #?[0-9]+", re.IGNORECASE)
SHIPPED = sorted(
    path for folder in ("lakelog", "pyspark_lakelog", "pipelines") for path in (PACKAGE.parent / folder).rglob("*.py")
)


@pytest.mark.parametrize("path", SHIPPED, ids=_name)
def test_shipped_code_names_rules_not_issue_numbers(path):
    """Code names the rules it keeps (S3.2) and upstream issues by their repository; the project's own issue numbers
    belong to commit messages and notes."""
    lines = [number for number, line in enumerate(path.read_text().splitlines(), start=1) if _ISSUE_NUMBER.search(line)]
    assert lines == [], f"{_name(path)} names an issue number at line(s) {lines}"


MAX_LINES = 500


def _through_a_link(path: Path) -> bool:
    """Whether `path` is reached through a link: lakelog/pipelines (and lakelog/conf, lakelog/jvm) link to top-level
    folders, whose modules are counted where they are."""
    return any((PACKAGE.parent / parent).is_symlink() for parent in path.relative_to(PACKAGE.parent).parents)


SHIPPED_MODULES = sorted(
    path
    for folder in ("lakelog", "pyspark_lakelog", "pipelines")
    for path in (PACKAGE.parent / folder).rglob("*.py")
    if not _through_a_link(path)
)


def _line_count(path: Path) -> int:
    """Lines as `wc -l` counts them: newline characters."""
    return path.read_bytes().count(b"\n")


def test_each_shipped_module_is_counted_once():
    names = [_name(path) for path in SHIPPED_MODULES]
    assert "lakelog/client/producer/producer.py" in names and "pipelines/demo.py" in names
    assert "pyspark_lakelog/source.py" in names
    assert len({path.resolve() for path in SHIPPED_MODULES}) == len(SHIPPED_MODULES), "a module reached twice"
    assert not [name for name in names if name.startswith("lakelog/pipelines/")], "lakelog/pipelines links to pipelines/"


@pytest.mark.parametrize("path", SHIPPED_MODULES, ids=_name)
def test_a_module_holds_one_concept_in_at_most_500_lines(path):
    lines = _line_count(path)
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines (over {MAX_LINES}): split it by concept"
