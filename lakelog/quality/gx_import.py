"""Importing Great Expectations without what lakelog's validations never use.

`import great_expectations` loads every expectation class and GX's optional integrations with it. Two kinds of
those cost a gated command more than a third of its start-up and are never reached by a validation of rows in
memory:
- the packages GX's own datasources use (the Azure and Google Cloud clients, PySpark, SQLAlchemy), all installed
  here for other reasons: GX imports them when they are present, and puts a placeholder in their place when not;
- Altair and scipy.stats, which one expectation (the KL divergence) uses to draw its chart and compute its value.

While GX is imported, an import finder tells GX's modules that those integrations are absent, and
gives Altair and scipy.stats to GX as lazy modules, loaded in full on their first use (so the KL divergence
expectation still runs). Only imports made from GX's own modules, in the importing thread, are touched: lakelog's
stores and a user's code import the same packages as usual, before or after, and a module already loaded is never
touched. A program that uses GX's own datasources imports `great_expectations` itself, first; then this does
nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)

# GX's modules import these integrations when they are installed (they are here: the cloud clients for lakelog's
# roots, PySpark for its jobs, SQLAlchemy for Airflow), each in a `try`, and put a placeholder in place when not.
_GX = "great_expectations."
_INTEGRATIONS = ("azure", "google", "pyspark", "sqlalchemy")
# Imported at the top of a GX module, used only inside its functions.
_LAZY = ("altair", "scipy.stats")
_MACHINERY = ("importlib", "_frozen_importlib", "_frozen_importlib_external")


def _importer(skip_package: str | None = None) -> str:
    """The module whose code runs the import now being resolved: the first frame outside the import machinery
    (and outside `skip_package`, a package whose own `__getattr__` is importing a submodule)."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(_MACHINERY) and not (
            skip_package and (name == skip_package or name.startswith(skip_package + "."))
        ):
            return str(name)
        frame = frame.f_back
    return ""


class _GxImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self, thread: int) -> None:
        self.thread = thread

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if threading.get_ident() != self.thread:
            return None
        if fullname.split(".")[0] in _INTEGRATIONS and _importer().startswith(_GX):
            logger.debug("%s is left out of Great Expectations' import (a datasource integration lakelog never uses)", fullname)
            raise ModuleNotFoundError(f"{fullname} is left out of Great Expectations' import by lakelog", name=fullname)
        if fullname in _LAZY and _importer(skip_package=fullname.rpartition(".")[0] or None).startswith(_GX):
            logger.debug("Great Expectations gets %s as a lazy module, loaded on its first use", fullname)
            return self._lazy_spec(fullname, path)
        return None

    @staticmethod
    def _lazy_spec(fullname: str, path: Sequence[str] | None) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def import_great_expectations() -> ModuleType:
    """`great_expectations`, imported (once per process) without the cloud clients and with Altair and scipy.stats
    lazy; ModuleNotFoundError as `import great_expectations` raises it when GX is not installed."""
    if "great_expectations" in sys.modules:
        return importlib.import_module("great_expectations")  # waits for another thread's import to finish
    finder = _GxImportFinder(threading.get_ident())
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module("great_expectations")
    finally:
        sys.meta_path.remove(finder)


__all__ = ["import_great_expectations"]
