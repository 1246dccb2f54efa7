"""Measures of the test suite's own shape, read from the source (``ast``, ``tokenize``), for
the layout tests: which package modules have a mirrored test file, which helper names more
than one test module defines, and which ``sleep(`` calls do not say why they need real time.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "idempotency"
TESTS = ROOT / "tests"

#: The comment a real-time sleep carries, on its line or the line above it.
REAL_TIME = re.compile(r"#\s*real time:\s*\S")
_SLEEP = re.compile(r"\bsleep\(")


def package_modules() -> list[Path]:
    """The package's modules: every ``.py`` file but ``__init__.py`` and migrations."""
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts and path.name != "__init__.py"
    )


def mirrored_test(module: Path) -> Path:
    """Where a module's own tests live: ``idempotency/a/b.py`` → ``tests/a/test_b.py``."""
    relative = module.relative_to(PACKAGE)
    return TESTS / relative.parent / f"test_{relative.stem}.py"


def unmirrored_modules() -> list[Path]:
    return [module for module in package_modules() if not mirrored_test(module).exists()]


def mirror_share() -> float:
    """The share of the package's modules that have a mirrored test file."""
    found = package_modules()
    return 1 - len(unmirrored_modules()) / len(found)


def test_modules() -> list[Path]:
    return sorted(path for path in TESTS.rglob("test_*.py") if path.is_file())


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def duplicated_helpers(paths: list[Path] | None = None) -> dict[str, list[str]]:
    """Top-level function names (tests aside) that more than one test module defines."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in test_modules() if paths is None else paths:
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not (
                node.name.startswith("test")
            ):
                found[node.name].append(_shown(path))
    return {name: where for name, where in sorted(found.items()) if len(where) > 1}


def sleeps(source: str) -> list[tuple[int, bool]]:
    """Each ``sleep(`` call's line in ``source``, and whether a ``# real time:`` comment on
    that line or the line above says why it needs the wall clock (strings and comments
    that merely mention a sleep are not calls)."""
    code: dict[int, str] = defaultdict(str)
    comments: dict[int, str] = defaultdict(str)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] += token.string
        elif token.type not in (tokenize.STRING, tokenize.NL, tokenize.NEWLINE):
            code[token.start[0]] += token.string
    calls = sorted(line for line, text in code.items() if _SLEEP.search(text))
    return [(line, any(REAL_TIME.search(comments[n]) for n in (line - 1, line))) for line in calls]


def unexplained_sleeps() -> list[str]:
    """``path:line`` of each ``sleep(`` under tests/ with no ``# real time:`` comment."""
    return [
        f"{_shown(path)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, explained in sleeps(path.read_text())
        if not explained
    ]
