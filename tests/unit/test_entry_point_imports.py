"""The Airflow DAGs reach lakelog through its public modules (the provider, the client layer, the jobs), never through
the store, the log or the coordinators: the same rule the import-linter contract in pyproject.toml holds the command
line, the provider and the pipelines to, checked here because airflow/dags is no package import-linter can name.

Imports inside functions count too (a task body that imports is still the DAG importing).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = sorted((REPO / "airflow" / "dags").glob("*.py"))
FORBIDDEN = ("lakelog.store", "lakelog.log", "lakelog.coordinator")


def _imported(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def _forbidden(name: str) -> bool:
    return any(name == module or name.startswith(module + ".") for module in FORBIDDEN)


def test_there_are_dags_to_check():
    assert len(DAGS) >= 4, DAGS


@pytest.mark.parametrize("path", DAGS, ids=lambda path: path.name)
def test_a_dag_imports_no_store_log_or_coordinator_module(path):
    bad = [(line, name) for line, name in _imported(ast.parse(path.read_text())) if _forbidden(name)]
    assert not bad, f"{path.name} imports {bad}: use lakelog's public modules (lakelog.airflow, lakelog.client, lakelog.jobs)"
