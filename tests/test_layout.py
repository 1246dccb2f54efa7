"""The package's shape: importing it is lazy, the repository's modules import in no circle,
and no test module imports another test module or a conftest (shared code is in tests/support)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.utils.module_loading import import_string

from tests.support.imports import circles, import_graph, modules


def test_importing_the_package_imports_none_of_its_modules() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import sys, idempotency; "
        "loaded = sorted(m for m in sys.modules if m.startswith('idempotency.')); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


#: Every Python package of the repository, and its top-level scripts.
PACKAGES = (
    "idempotency",
    "accounts",
    "orders",
    "payments",
    "config",
    "bench",
    "chaos",
    "model",
    "tests",
)
SCRIPTS = ("dev.py", "manage.py")


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    graph = import_graph(modules(PACKAGES, SCRIPTS))
    assert "idempotency.core.engine" in graph["idempotency.http.handler"]
    assert "bench.servers" in graph["bench.run"]


def test_no_import_circle_in_the_repository() -> None:
    assert circles(import_graph(modules(PACKAGES, SCRIPTS))) == []


def test_every_benchmark_module_is_under_400_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules(["bench"]).items()}
    assert {name: lines for name, lines in sizes.items() if lines >= 400} == {}


def test_no_test_module_imports_another_test_module_or_a_conftest() -> None:
    graph = import_graph(modules(PACKAGES, SCRIPTS))
    tests = {name for name in graph if name.rpartition(".")[2].startswith(("test_", "conftest"))}
    assert "tests.storms.test_concurrency" in tests and "tests.conftest" in tests
    found = {name: sorted(graph[name] & tests) for name in graph if graph[name] & tests}
    assert found == {}


def test_a_moved_module_answers_at_its_old_path_as_the_same_module() -> None:
    import idempotency.check_messages as old_messages
    import idempotency.checks.messages as messages
    from idempotency.client import RetryPolicy
    from idempotency.client.policy import RetryPolicy as OldRetryPolicy

    assert old_messages is messages and old_messages.__name__ == "idempotency.checks.messages"
    assert OldRetryPolicy is RetryPolicy
    assert import_string("idempotency.check_messages.MESSAGES") is messages.MESSAGES
    with pytest.raises(ModuleNotFoundError):
        __import__("idempotency.never_was")
