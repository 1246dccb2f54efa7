"""The package's shape: importing is lazy, and no two modules import each other."""

from __future__ import annotations

import ast
import itertools
import os
import subprocess
import sys
from pathlib import Path

import idempotency

PACKAGE = Path(idempotency.__file__).parent


def test_importing_the_package_imports_none_of_its_modules() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import sys, idempotency; "
        "loaded = sorted(m for m in sys.modules if m.startswith('idempotency.')); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules ``path`` imports, at any depth but type-checking blocks."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & known


def test_no_two_modules_import_each_other() -> None:
    paths = [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]
    known = {_module_name(p) for p in paths}
    graph = {_module_name(p): _imports(p, known) for p in paths}
    pairs = [
        (a, b)
        for a, b in itertools.combinations(sorted(graph), 2)
        if b in graph[a] and a in graph[b]
    ]
    assert pairs == []
