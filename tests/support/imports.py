"""The repository's import graph, read from the source (``ast``), for the layout tests.

Every import counts, those inside functions too (a lazy import is still a dependency),
except the ones under ``if TYPE_CHECKING:`` (never run). ``from pkg import name``
counts as ``pkg`` and, when it is a module, ``pkg.name``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(packages: Iterable[str], scripts: Iterable[str] = ()) -> dict[str, Path]:
    """The modules of ``packages`` (migrations aside) and of the top-level ``scripts``."""
    paths = [
        path
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    ] + [ROOT / script for script in scripts]
    return {module_name(path): path for path in paths}


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, skipping the bodies of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for other in node.orelse:
                yield other
                yield from _runtime_nodes(other)
            continue
        yield node
        yield from _runtime_nodes(node)


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (the file ``path``) imports, counting the
    package of a ``from package import module`` too (importing it runs its ``__init__``)."""
    return _imports_in(name, path, ast.parse(path.read_text(), str(path)), known, packages=True)


def import_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for start in sorted(graph):
        if start in index:
            continue
        enter(start)
        work = [(start, iter(sorted(graph.get(start, ()))))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    enter(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
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


def function_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports inside a function (a lazy
    import), ``if TYPE_CHECKING:`` aside."""
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = ast.Module(body=node.body, type_ignores=[])
            found |= _imports_in(name, path, body, known, packages=False)
    return found


def _imports_in(
    name: str, path: Path, tree: ast.AST, known: set[str], *, packages: bool
) -> set[str]:
    """The modules of ``known`` imported in ``tree``; with ``packages``, the package a
    ``from ... import`` names counts beside the modules it gives."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
            if packages:
                targets = [base, *names]
            else:
                targets = [full if full in known else base for full in names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def subpackage(name: str, found: dict[str, Path]) -> str | None:
    """The subpackage of ``idempotency`` that module ``name`` is in (``"stores"`` for
    ``idempotency.stores.base``), None for a module of the top level."""
    parts = name.split(".")
    if len(parts) < 2 or found.get(".".join(parts[:2]), Path()).name != "__init__.py":
        return None
    return parts[1]


def subpackage_pairs(
    graph: dict[str, set[str]], found: dict[str, Path]
) -> dict[tuple[str, str], list[str]]:
    """Each pair of subpackages that import each other, with the imports that tie them."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for name, targets in graph.items():
        for target in targets:
            a, b = subpackage(name, found), subpackage(target, found)
            if a and b and a != b:
                arrows.setdefault((a, b), []).append(f"{name} -> {target}")
    return {
        (a, b): sorted(arrows[(a, b)] + arrows[(b, a)])
        for (a, b) in arrows
        if a < b and (b, a) in arrows
    }
