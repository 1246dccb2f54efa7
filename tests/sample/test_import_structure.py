"""The sample's dependency direction: accounts <- orders <- payments, and no import circle.

Every import in the sample's modules is read from the source (``ast``), those inside
functions too (a lazy import is still a dependency), except the ones under ``if
TYPE_CHECKING:`` (never run). Orders learn of payments through a signal
(``orders.signals.order_paid_cancelled``) and the outbox publishes to its consumer by
task name, so neither needs an import back.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("accounts", "orders", "payments", "config")
#: Which sample app may import which (one direction; config, the project, sits on top).
MAY_IMPORT = {
    "accounts": {"accounts"},
    "orders": {"accounts", "orders"},
    "payments": {"accounts", "orders", "payments"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sample_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[module_name(path)] = path
    return modules


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
    """The sample modules ``name`` imports (``from pkg import module`` counts as the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = sample_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_finder_sees_a_circle_and_lazy_imports(tmp_path: Path) -> None:
    """The check itself can fail: a planted circle through a lazy import is found."""
    graph = {"a.x": {"a.y"}, "a.y": {"b.z"}, "b.z": {"a.x"}, "c": {"a.x"}}
    assert circles(graph) == [["a.x", "a.y", "b.z"]]
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from orders.models import Order\n"
        "def f():\n    from payments.services import payment_pay\n"
        "from accounts import money\n"
    )
    known = {"orders.models", "payments.services", "accounts", "accounts.money"}
    assert imports_of("x.mod", source, known) == {"payments.services", "accounts", "accounts.money"}


def test_the_sample_has_no_import_circle() -> None:
    graph = import_graph()
    assert "orders.services" in graph and "payments.services" in graph["payments.apis"]
    assert circles(graph) == []


def test_each_app_imports_only_the_apps_below_it() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if module.split(".")[0] in MAY_IMPORT
        and target.split(".")[0] in MAY_IMPORT
        and target.split(".")[0] not in MAY_IMPORT[module.split(".")[0]]
    ]
    assert wrong == []
