"""Every public name has a docstring whose first line says what it is: the classes and functions a user imports from
lakelog's public modules (confluent-kafka's module names and the Spark data source), and the public methods and
properties of those classes (an override of a documented base method counts as documented).

Names are reported by their public path (`lakelog.admin.IsolationLevel`, `lakelog.Message.key`), the first public
module that exports them, so a module moving inside the package changes nothing here.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

PUBLIC_MODULES = ("lakelog", "lakelog.admin", "lakelog.error", "lakelog.serialization", "pyspark_lakelog")
OURS = ("lakelog", "pyspark_lakelog")


def _documented(doc: str | None) -> bool:
    return bool(doc and doc.strip() and doc.strip().splitlines()[0].strip())


def _public_names(module: Any) -> list[str]:
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [name for name in dir(module) if not name.startswith("_")]


def _members(cls: type) -> dict[str, str | None]:
    """The public methods and properties `cls` itself defines, with the docstring each one shows a user."""
    found: dict[str, str | None] = {}
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            found[name] = member.__doc__
        elif inspect.isfunction(getattr(member, "__func__", member)):
            found[name] = inspect.getdoc(getattr(cls, name))  # inherits a documented base method's docstring
    return found


def undocumented() -> set[str]:
    missing: set[str] = set()
    seen: set[int] = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in _public_names(module):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            if not (getattr(obj, "__module__", "") or "").startswith(OURS):
                continue  # a name re-exported from elsewhere (typing, pyspark) is documented there
            where = f"{module_name}.{name}"
            own_doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
            if not _documented(own_doc):
                missing.add(where)
            if inspect.isclass(obj):
                missing.update(f"{where}.{member}" for member, doc in _members(obj).items() if not _documented(doc))
    return missing


def test_every_public_name_has_a_docstring():
    missing = sorted(undocumented())
    assert not missing, "public names without a docstring (one line saying what each is):\n" + "\n".join(missing)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_modules_say_what_they_are(module_name):
    assert _documented(importlib.import_module(module_name).__doc__), module_name
