"""The import graph of ``soak`` and ``exporters`` has no cycles and no borrowed private names.

Every import counts, at module level, inside a function or under ``TYPE_CHECKING``: a lazy or
type-only import still ties two modules together, and is how a cycle hides. ``from soak.a
import b`` is an edge to ``soak.a.b`` when that is a module, else to ``soak.a``; relative
imports are resolved against the importing module's package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("soak", "exporters")

# Cycles allowed, each as the set of modules in it: none. A cycle that must be let in for a
# while is named here, and leaves the list when it is gone (test_allowed_cycles_still_exist).
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset()
# (importer, imported from, name) of private names allowed across modules: none.
ALLOWED_PRIVATE: frozenset[tuple[str, str, str]] = frozenset()


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package) for every ``.py`` under ``packages``."""
    found: dict[str, tuple[Path, bool]] = {}
    for top in packages:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            found[".".join(parts)] = (path, is_pkg)
    return found


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """The edges between the modules of ``packages``, and every private name one of them
    imports from another: (importer, module, name)."""
    mods = modules(root, packages)
    edges: dict[str, set[str]] = {name: set() for name in mods}
    private: list[tuple[str, str, str]] = []
    for name, (path, is_pkg) in mods.items():
        package = name if is_pkg else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                edges[name].update(a.name for a in node.names if a.name in mods)
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in packages:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in mods:
                    edges[name].add(sub)
                    continue
                edges[name].add(target)
                if alias.name.startswith("_") and not alias.name.startswith("__") and target != name:
                    private.append((name, target, alias.name))
        edges[name].discard(name)
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules, as a path a -> ... -> a."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_path(group, edges) for group in groups]


def _path(group: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A cycle inside ``group`` that starts and ends at its first module (breadth first)."""
    start = min(group)
    came: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(edges[v] & group):
            if w == start:
                back = [v]
                while back[-1] != start:
                    back.append(came[back[-1]])
                return [*reversed(back), start]
            if w not in came:
                came[w] = v
                todo.append(w)
    raise AssertionError(f"no cycle in {sorted(group)}")


@pytest.fixture(scope="module")
def soak_graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    return graph(ROOT)


def test_no_import_cycles(soak_graph):
    edges, _ = soak_graph
    found = [c for c in cycles(edges) if frozenset(c) not in ALLOWED_CYCLES]
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_private_names_imported_from_another_module(soak_graph):
    _, private = soak_graph
    found = [p for p in private if p not in ALLOWED_PRIVATE]
    assert not found, "private names imported across modules: " + "; ".join(
        f"{who} imports {name} from {where}" for who, where, name in found)


def test_allowed_cycles_still_exist(soak_graph):
    # An allowed cycle that is gone must leave the list, or it would quietly allow its return.
    edges, _ = soak_graph
    present = {frozenset(c) for c in cycles(edges)}
    assert ALLOWED_CYCLES <= present, f"no longer cycles, remove from ALLOWED_CYCLES: {ALLOWED_CYCLES - present}"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("b_imports", [
    "from soak.a import X\n",
    "from . import a\n",
    "from .a import X\n",
    "import soak.a\n",
    "def f():\n    from soak import a\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from soak.a import X\n",
])
def test_cycle_through_every_kind_of_import_is_named(tmp_path, b_imports):
    _write(tmp_path, {"soak/__init__.py": "", "soak/a.py": "from soak.b import Y\nX = 1\n",
                      "soak/b.py": b_imports + "Y = 2\n"})
    edges, _ = graph(tmp_path, ("soak",))
    assert cycles(edges) == [["soak.a", "soak.b", "soak.a"]]


def test_a_longer_cycle_is_named_in_order(tmp_path):
    _write(tmp_path, {"soak/__init__.py": "", "soak/x/__init__.py": "",
                      "soak/x/a.py": "from ..y import b\n", "soak/y/__init__.py": "",
                      "soak/y/b.py": "from soak.z import C\n", "soak/z.py": "from soak.x.a import *\nC = 1\n",
                      "soak/ok.py": "from soak.z import C\n"})
    edges, _ = graph(tmp_path, ("soak",))
    assert cycles(edges) == [["soak.x.a", "soak.y.b", "soak.z", "soak.x.a"]]


def test_private_name_from_another_module_is_named(tmp_path):
    _write(tmp_path, {"soak/__init__.py": "", "soak/a.py": "_helper = 1\n", "soak/_mod.py": "",
                      "soak/b.py": "from soak.a import _helper\nfrom soak import _mod\nfrom .a import __doc__\n"})
    _, private = graph(tmp_path, ("soak",))
    assert private == [("soak.b", "soak.a", "_helper")]
