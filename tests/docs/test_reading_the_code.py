"""docs/explanation/reading-the-code.md names its stops ``file:function`` (relative to
``idempotency/``): every one must be code that exists, so the route cannot rot while the
code moves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "explanation" / "reading-the-code.md"

#: ``http/handler.py:run``, ``stores/database.py:DatabaseStore.claim``
STOP = re.compile(r"`([\w/]+\.py):([\w.]+)`")
#: a file or folder named alone: ``stores/sql.py``, ``tests/storms/``
PATH = re.compile(r"`((?:[\w]+/)+(?:[\w]+\.py)?|[\w]+\.py)`")


def defines(source: str, qualname: str) -> bool:
    """Whether ``source`` defines ``qualname`` (a top-level function or class, or a
    class's method or attribute, ``Class.name``)."""
    scope: list[ast.stmt] = ast.parse(source).body
    for part in qualname.split("."):
        found = None
        for node in scope:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name == part:
                    found = node
            elif isinstance(node, ast.AnnAssign | ast.Assign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == part for t in targets):
                    found = node
        if found is None:
            return False
        scope = found.body if isinstance(found, ast.ClassDef) else []
    return True


def missing_stops(text: str, package: Path) -> list[str]:
    missing = []
    for path, qualname in STOP.findall(text):
        module = package / path
        if not module.is_file() or not defines(module.read_text(), qualname):
            missing.append(f"{path}:{qualname}")
    return missing


def test_the_finder_finds_a_stop_that_is_gone(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "engine.py").write_text(
        "def run():\n    pass\n\nclass Step:\n    def enter(self):\n        pass\n"
    )
    text = (
        "`core/engine.py:run` `core/engine.py:Step.enter` `core/engine.py:Step.leave` "
        "`core/engine.py:arun` `core/gone.py:run`"
    )
    assert missing_stops(text, tmp_path) == [
        "core/engine.py:Step.leave",
        "core/engine.py:arun",
        "core/gone.py:run",
    ]


def test_every_stop_of_the_route_is_code_that_exists() -> None:
    text = PAGE.read_text()
    stops = STOP.findall(text)
    assert len(stops) >= 40  # the page is the route, not a summary of it
    assert missing_stops(text, ROOT / "idempotency") == []


def test_every_file_the_page_names_exists() -> None:
    text = STOP.sub("", PAGE.read_text())
    named = PATH.findall(text)
    assert named
    gone = [
        name
        for name in named
        if not (ROOT / "idempotency" / name).exists() and not (ROOT / name).exists()
    ]
    assert gone == []
