"""Importing lakelog configures no logging: the root logger keeps its level and handlers (STYLE: library code
logs through its module loggers; handlers and levels are the application's).

Each case runs in a fresh interpreter, so nothing this session imported already counts. Airflow is the one
dependency whose import configures logging itself (airflow/__init__.py runs settings.initialize(), which calls
configure_logging(): the root logger at INFO with a stdout handler), so `lakelog.airflow` imports no Airflow
until a hook, operator, sensor or trigger is used, and only the modules that subclass Airflow's classes import
it, at their top; those are left out here (importing them is importing Airflow).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import root_logger_state

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("lakelog", "pyspark_lakelog")

IMPORT_AND_COMPARE = """
import importlib, logging, sys
root = logging.getLogger()
before = (root.level, list(root.handlers))
for name in sys.argv[1:]:
    importlib.import_module(name)
    after = (root.level, list(root.handlers))
    if after != before:
        sys.exit(f"importing {name} changed the root logger: level {logging.getLevelName(before[0])} -> "
                 f"{logging.getLevelName(after[0])}, handlers {before[1]} -> {after[1]}")
print("airflow imported" if "airflow" in sys.modules else "airflow not imported")
"""


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_airflow(path: Path) -> bool:
    """Whether the module imports Airflow at its top level (not inside a function)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "airflow":
            return True
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "airflow" for alias in node.names):
            return True
    return False


# A __main__ module runs its program when imported (`python -m lakelog.cli`): that is what it is for.
SOURCES = sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py") if path.name != "__main__.py")
WITH_AIRFLOW = [module_name(path) for path in SOURCES if imports_airflow(path)]
WITHOUT_AIRFLOW = [module_name(path) for path in SOURCES if not imports_airflow(path)]


def import_in_a_fresh_interpreter(*names: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_AND_COMPARE, *names], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


@pytest.mark.parametrize("name", ["lakelog", "lakelog.airflow", "pyspark_lakelog"])
def test_importing_a_package_leaves_the_root_logger_alone(name):
    assert import_in_a_fresh_interpreter(name) == "airflow not imported"


def test_importing_every_module_but_airflows_subclasses_leaves_the_root_logger_alone():
    assert "lakelog.store.io.root" in WITHOUT_AIRFLOW and "pyspark_lakelog.session" in WITHOUT_AIRFLOW
    assert import_in_a_fresh_interpreter(*WITHOUT_AIRFLOW) == "airflow not imported"


def test_only_the_airflow_provider_imports_airflow():
    assert WITH_AIRFLOW and all(name.startswith("lakelog.airflow.") for name in WITH_AIRFLOW), WITH_AIRFLOW


def test_no_earlier_test_left_the_root_logger_changed(request, root_logger_at_start):
    """In a session, this runs after tests/airflow and tests/unit/test_airflow_provider.py, which import Airflow:
    none of them may have changed the root logger at collection, nor left it changed (tests/conftest.py)."""
    level, handlers = root_logger_state()
    assert handlers == root_logger_at_start[1]
    if request.config.getoption("log_level") is None:  # --log-level sets the root logger's level around each test
        assert level == root_logger_at_start[0]
