"""The shape of the package holds: the layers of DESIGN.md and the live runtime's own
layers (import-linter's contracts in pyproject.toml), no import cycle at any depth (lazy
imports inside functions count), and no source file past 500 lines."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).parents[1]
PYPROJECT = ROOT / "pyproject.toml"
SRC = ROOT / "src" / "gpumosaic"
MAX_LINES = 500


def test_packages_import_only_from_the_layers_below() -> None:
    assert lint_imports(config_filename=str(PYPROJECT), no_cache=True) == 0


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycles_finds_a_cycle_and_nothing_else() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # Imports under ``if TYPE_CHECKING:`` are annotations, not imports that run.
    return grimp.build_graph("gpumosaic", exclude_type_checking_imports=True, cache_dir=None)


@pytest.mark.parametrize("depth", [2, 3, 4, 99], ids=lambda d: f"depth-{d}")
def test_no_import_cycle_at_any_depth(graph: grimp.ImportGraph, depth: int) -> None:
    """Modules grouped by their first ``depth`` name parts (2: top-level packages,
    3: subpackages, 99: modules): the groups' imports form no cycle."""

    def group(module: str) -> str:
        return ".".join(module.split(".")[:depth])

    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = group(module), group(imported)
            # A package and its own submodules are one thing at this depth.
            if a != b and not a.startswith(b + ".") and not b.startswith(a + "."):
                edges[a].add(b)
    assert cycles(edges) == []


def test_no_source_file_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in SRC.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
