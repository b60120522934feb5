"""The library's modules import one another without a cycle, imports inside functions and under TYPE_CHECKING included.

A cycle is a ring of modules each importing the next (grimp's graph: every import statement of a module,
wherever it stands). The layers and independence contracts in pyproject.toml (import-linter, `./dev lint`)
say which package may import which; this says no module reaches itself back, not even through a function.
"""

from __future__ import annotations

import grimp

PACKAGE = "lakelog"


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every ring of the graph: its strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    rings: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            for other in imported:
                if other not in index:
                    index[other] = low[other] = len(index)
                    stack.append(other)
                    on_stack.add(other)
                    work.append((other, iter(sorted(graph.find_modules_directly_imported_by(other)))))
                    break
                if other in on_stack:
                    low[module] = min(low[module], index[other])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    ring = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        ring.append(member)
                        if member == module:
                            break
                    if len(ring) > 1:
                        rings.append(sorted(ring))
    return rings


def test_the_library_has_no_import_cycle():
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    assert import_cycles(graph) == []


def test_a_cycle_through_an_import_inside_a_function_is_found():
    """The check itself: a ring closed only by an import inside a function is a cycle."""
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b", line_number=1, line_contents="from pkg import b")
    graph.add_import(importer="pkg.b", imported="pkg.c", line_number=1, line_contents="from pkg import c")
    assert import_cycles(graph) == []
    graph.add_import(importer="pkg.c", imported="pkg.a", line_number=9, line_contents="    from pkg import a")
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
