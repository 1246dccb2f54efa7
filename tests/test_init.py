"""The package's top level (idempotency/__init__.py): a small public API that imports
lazily, needs no extra, and serves no old name or old module path."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

import idempotency

PACKAGE = Path(idempotency.__file__).parent

#: Every optional dependency of an integration (the extras): none is needed by the core.
EXTRAS = (
    "rest_framework",
    "drf_spectacular",
    "ninja",
    "celery",
    "django_celery_beat",
    "prometheus_client",
    "opentelemetry",
)

#: A child process that blocks every extra before Django starts, then star-imports.
STAR_IMPORT = """
import importlib.abc, json, sys

BLOCKED = set(sys.argv[1].split(","))

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Blocked())
import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "idempotency"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
)
django.setup()
namespace = {}
exec("from idempotency import *", namespace)
import idempotency
print(json.dumps({
    "missing": sorted(set(idempotency.__all__) - set(namespace)),
    "loaded": sorted({m.partition(".")[0] for m in sys.modules} & BLOCKED),
}))
"""


def test_at_most_thirty_public_names() -> None:
    assert len(idempotency.__all__) <= 30
    assert idempotency.__all__ == sorted(set(idempotency.__all__))


def star_import_without(blocked: tuple[str, ...]) -> dict[str, list[str]]:
    """``from idempotency import *`` in a child where the ``blocked`` packages are
    absent (a finder refuses them, as a missing package would): the public names it
    did not get, and the blocked packages that were imported anyway."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    child = subprocess.run(
        [sys.executable, "-c", STAR_IMPORT, ",".join(blocked)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    found: dict[str, list[str]] = json.loads(child.stdout)
    return found


def test_star_import_needs_no_extra() -> None:
    """DRF, Ninja, Celery, drf-spectacular, Prometheus and OpenTelemetry all absent:
    every public name resolves, and none of them is imported."""
    assert star_import_without(EXTRAS) == {"missing": [], "loaded": []}


def test_star_import_needs_no_extra_but_drf() -> None:
    """The integrations' own names (Celery tasks, Ninja, metrics, tracing, the OpenAPI
    schema) are not in ``__all__``: without their packages, everything resolves."""
    but_drf = tuple(name for name in EXTRAS if name != "rest_framework")
    assert star_import_without(but_drf) == {"missing": [], "loaded": []}


def test_every_public_name_resolves_and_type_checkers_see_the_same() -> None:
    """Each name of ``__all__`` is its module's object, and the ``TYPE_CHECKING``
    re-exports name exactly ``__all__`` (laziness itself: tests/test_layout.py)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    static = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module not in ("__future__", "importlib", "typing")
        for alias in node.names
    }
    assert static == set(idempotency.__all__)
    for name, module in idempotency._EXPORTS.items():
        assert getattr(idempotency, name) is getattr(import_module(module), name)
    with pytest.raises(AttributeError):
        idempotency.no_such_name  # noqa: B018


def exported_names(source: str) -> list[str]:
    """What a module's source says it exports: its literal ``__all__`` and the keys of a
    lazy ``_EXPORTS`` table."""
    names: list[str] = []
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        if isinstance(target, ast.Name) and target.id in ("__all__", "_EXPORTS"):
            value = node.value
            if isinstance(value, ast.List | ast.Tuple):
                names += [e.value for e in value.elts if isinstance(e, ast.Constant)]
            elif isinstance(value, ast.Dict):
                names += [k.value for k in value.keys if isinstance(k, ast.Constant)]
    return names


def test_the_export_scanner_reads_lists_and_tables() -> None:
    source = '__all__ = ["a", "_b"]\n_EXPORTS: dict[str, str] = {"_c": "m", "d": "m"}\n'
    assert exported_names(source) == ["a", "_b", "_c", "d"]


def test_no_module_exports_a_private_name() -> None:
    found = {
        str(path.relative_to(PACKAGE)): private
        for path in PACKAGE.rglob("*.py")
        if (private := [n for n in exported_names(path.read_text()) if n.startswith("_")])
    }
    assert found == {}


def test_no_old_name_or_module_path_is_served() -> None:
    """The package was never released: a moved module leaves no import hook behind."""
    import idempotency.checks  # noqa: F401  (whatever the package imports when used)

    hooks = [f for f in sys.meta_path if type(f).__module__.startswith("idempotency")]
    assert hooks == []
    for old in ("idempotency.checks.messages", "idempotency.tasks", "idempotency.core.canonical"):
        with pytest.raises(ModuleNotFoundError):
            import_module(old)
