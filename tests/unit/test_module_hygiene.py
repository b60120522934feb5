"""Every lakelog module logs through its own module logger, and library code never prints (issue 12, item 7; STYLE.md).

A static check over the package's source: `logging.getLogger(__name__)` in each module (package `__init__`
files only re-export), and no `print(` outside the command line (`lakelog/cli.py`, whose output is its result).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "lakelog"
MODULES = sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py")
PRINTS_ALLOWED = {
    PACKAGE / "cli.py",
    PACKAGE / "cli_common.py",
    PACKAGE / "cli_groups.py",
    PACKAGE / "cli_load.py",
    PACKAGE / "cli_transactions.py",
}  # the command line prints


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


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_every_module_has_its_own_logger(path):
    assert _module_loggers(ast.parse(path.read_text())), f"{_name(path)} has no `logger = logging.getLogger(__name__)`"


@pytest.mark.parametrize("path", [path for path in MODULES if path not in PRINTS_ALLOWED], ids=_name)
def test_library_code_never_prints(path):
    calls = [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]
    assert calls == [], f"{_name(path)} prints at line(s) {calls}: log instead"
