"""The package's shape: importing it is lazy, the repository's modules import in no circle,
and no test module imports another test module or a conftest (shared code is in tests/support).
The tests' shape (tests/support/suite.py): the share of modules with a mirrored test file,
helper names defined in more than one test module, and sleeps that say why they need real
time."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from tests.support import suite
from tests.support.imports import (
    circles,
    function_imports,
    import_graph,
    modules,
    subpackage_pairs,
)


def test_importing_the_package_imports_none_of_its_modules() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import sys, idempotency; "
        "loaded = sorted(m for m in sys.modules if m.startswith('idempotency.')); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.parametrize(
    "module",
    [
        "idempotency.core.engine",
        "idempotency.utils.backends",
        "idempotency.stores",
        "idempotency.tokens",
        "idempotency.locks",
        "idempotency.checks",
        "idempotency.functions",
        "idempotency.contrib.celery",
        "idempotency.contrib.django_tasks",
        "idempotency.http.handler",
        "idempotency.observability",
    ],
)
def test_each_part_imports_first_in_a_fresh_process(module: str) -> None:
    """A process whose first import is one part of the package (a lock worker imports
    ``idempotency.locks``, a script a store) gets it whole: no part needs another to be
    imported before it (a circle the static graph cannot see, through a package's
    ``__init__``, failed exactly so)."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import django; from django.conf import settings; "
        "settings.configure(INSTALLED_APPS=[], USE_TZ=True); django.setup(); "
        f"import importlib; importlib.import_module({module!r})"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


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


#: Pairs of subpackages that still import each other, each with what removes it. Empty
#: is the goal (layers point down only: utils -> stores -> core -> interfaces -> contrib).
PAIRS_LEFT: set[tuple[str, str]] = set()


def test_no_two_subpackages_import_each_other() -> None:
    found = modules(["idempotency"])
    pairs = subpackage_pairs(import_graph(found), found)
    assert set(pairs) <= PAIRS_LEFT, {pair: pairs[pair] for pair in set(pairs) - PAIRS_LEFT}


def test_the_pair_finder_finds_a_pair() -> None:
    found = {
        "idempotency.a": Path("idempotency/a/__init__.py"),
        "idempotency.a.x": Path("idempotency/a/x.py"),
        "idempotency.b": Path("idempotency/b/__init__.py"),
        "idempotency.b.y": Path("idempotency/b/y.py"),
        "idempotency.c": Path("idempotency/c.py"),
    }
    graph = {
        "idempotency.a.x": {"idempotency.b.y", "idempotency.c"},
        "idempotency.b.y": {"idempotency.a"},
        "idempotency.c": {"idempotency.a.x"},
    }
    assert subpackage_pairs(graph, found) == {
        ("a", "b"): ["idempotency.a.x -> idempotency.b.y", "idempotency.b.y -> idempotency.a"]
    }


#: The imports of the package's own modules made inside a function, by module, and why
#: each cannot be made at the top of its module. Nothing else may import lazily (an entry
#: whose import has gone may be struck; the test does not ask it of a parallel change).
LAZY_IMPORTS = {
    # AppConfig.ready(), Django's place for it: the checks import the stores and the
    # URLconf's views, and the apps connect only what the settings ask for
    "idempotency.apps": {
        "idempotency.checks",
        "idempotency.conf",
        "idempotency.observability",
    },
    "idempotency.contrib.drf.apps": {
        "idempotency.contrib.drf.mixins",
        "idempotency.http.views",
    },
    "idempotency.contrib.ninja.apps": {"idempotency.contrib.ninja", "idempotency.http.views"},
    "idempotency.contrib.otel.apps": {
        "idempotency.conf",
        "idempotency.contrib.otel",
        "idempotency.observability",
    },
    "idempotency.contrib.prometheus.apps": {"idempotency.conf", "idempotency.contrib.prometheus"},
    # models: imported only once the app registry is ready (a Celery beat schedule and a
    # metrics collector may be imported before)
    "idempotency.contrib.prometheus": {"idempotency.models", "idempotency.stores.base"},
    "idempotency.contrib.celery.task": {"idempotency.stores.database", "idempotency.tokens"},
}


def test_no_lazy_import_of_the_package_but_the_listed_ones() -> None:
    """A model is reached with ``apps.get_model`` where models may not be imported yet;
    every other import of the package's own modules stands at the top of its module."""
    found = modules(["idempotency"])
    known = set(found)
    lazy = {name: function_imports(name, path, known) for name, path in found.items()}
    lazy = {name: targets for name, targets in lazy.items() if targets}
    extra = {
        name: sorted(targets - LAZY_IMPORTS.get(name, set())) for name, targets in lazy.items()
    }
    assert {name: targets for name, targets in extra.items() if targets} == {}


def test_no_test_module_imports_another_test_module_or_a_conftest() -> None:
    graph = import_graph(modules(PACKAGES, SCRIPTS))
    tests = {name for name in graph if name.rpartition(".")[2].startswith(("test_", "conftest"))}
    assert "tests.storms.test_concurrency" in tests and "tests.conftest" in tests
    found = {name: sorted(graph[name] & tests) for name in graph if graph[name] & tests}
    assert found == {}


#: The share of idempotency/'s modules with a mirrored ``tests/<path>/test_<module>.py``:
#: every module has one (issue 45 asked for 80 %): a new module comes with its test file.
MIRROR_SHARE_FLOOR = 1.0

#: Top-level helper names defined in more than one test module: today's count, a ceiling
#: that only falls (a helper two modules need belongs in tests/support).
DUPLICATED_HELPERS_CEILING = 29


def test_the_mirror_measure_maps_a_module_to_its_test_file() -> None:
    engine = suite.PACKAGE / "core" / "engine.py"
    assert suite.mirrored_test(engine) == suite.TESTS / "core" / "test_engine.py"
    assert engine in suite.package_modules()
    assert not any(p.name == "__init__.py" for p in suite.package_modules())


def test_modules_with_a_mirrored_test_file_stay_at_or_above_the_floor() -> None:
    share = suite.mirror_share()
    missing = [str(p.relative_to(suite.ROOT)) for p in suite.unmirrored_modules()]
    print(f"mirrored: {share:.1%} of {len(suite.package_modules())} modules; missing: {missing}")
    assert share >= MIRROR_SHARE_FLOOR, missing


def test_the_helper_finder_finds_a_helper_two_modules_define(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def post(): ...\ndef test_x(): ...\n")
    (tmp_path / "test_b.py").write_text("def post(): ...\ndef only_here(): ...\n")
    paths = [tmp_path / "test_a.py", tmp_path / "test_b.py"]
    assert suite.duplicated_helpers(paths) == {"post": [str(p) for p in paths]}


def test_helper_names_defined_in_more_than_one_test_module_stay_under_the_ceiling() -> None:
    found = suite.duplicated_helpers()
    assert len(found) <= DUPLICATED_HELPERS_CEILING, found


def test_the_sleep_finder_needs_a_real_time_comment_on_the_line_or_above() -> None:
    source = (
        "time.sleep(1)\n"
        "time.sleep(1)  # real time: a server's timer\n"
        "# real time: the outage's length\n"
        "await asyncio.sleep(\n    0.1\n)\n"
        "'sleep(1) in a string'  # not a call\n"
        "cursor.execute('SELECT pg_sleep(1)')\n"
    )
    assert suite.sleeps(source) == [(1, False), (2, True), (4, True)]


def test_every_sleep_in_the_tests_says_why_it_needs_real_time() -> None:
    """Time is a fixture (tests/support/clocks.py) and overlap an event or a barrier; a
    ``sleep`` stays only where a real server needs real time, and says so in a
    ``# real time:`` comment on its line or the line above."""
    assert suite.unexplained_sleeps() == []


#: Files allowed type ignores or casts with no comment (none: every one says why). A
#: file added here must leave it again once it has none.
UNJUSTIFIED_ALLOWED: set[str] = set()

_IGNORE = re.compile(r"#\s*type:\s*ignore\b(\[[^\]]*\])?(?P<why>\s*#\s*\S)?")


def unjustified_escapes(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every ``# type: ignore`` and ``cast(`` in ``source`` with no
    comment saying why: a ``#`` comment after the ignore (or beside the cast) on its
    line, or a comment line just above it."""
    lines = source.splitlines()
    found: dict[int, str] = {}
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    comments = {tok.start[0]: tok.string for tok in tokens if tok.type == tokenize.COMMENT}
    for tok, following in zip(tokens, tokens[1:], strict=False):
        if tok.type == tokenize.COMMENT:
            ignore = _IGNORE.search(tok.string)
            if ignore is not None and ignore.group("why") is None:
                found[tok.start[0]] = tok.string
        elif tok.type == tokenize.NAME and tok.string == "cast" and following.string == "(":
            if tok.start[0] in comments:
                continue
            found[tok.start[0]] = lines[tok.start[0] - 1].strip()
    return sorted(
        (number, text)
        for number, text in found.items()
        if not (number > 1 and lines[number - 2].lstrip().startswith("#"))
    )


def test_the_escape_finder_finds_an_unexplained_ignore_or_cast() -> None:
    source = (
        "x = f()  # type: ignore[misc]\n"
        "y = f()  # type: ignore[misc]  # the library has no hints\n"
        "# the library has no hints\n"
        "z = f()  # type: ignore\n"
        "w = cast(int, v)\n"
        "u = typing.cast(int, v)  # what the reader knows and the checker cannot\n"
        "s = 'cast(int, v)  # type: ignore'\n"
    )
    assert unjustified_escapes(source) == [
        (1, "# type: ignore[misc]"),
        (5, "w = cast(int, v)"),
    ]


def test_every_type_ignore_and_cast_in_the_package_says_why() -> None:
    root = Path(__file__).resolve().parent.parent
    unexplained = {}
    for path in sorted((root / "idempotency").rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if "/migrations/" in name or name in UNJUSTIFIED_ALLOWED:
            continue
        escapes = unjustified_escapes(path.read_text())
        if escapes:
            unexplained[name] = escapes
    assert unexplained == {}


def test_the_files_allowed_unexplained_escapes_still_have_some() -> None:
    root = Path(__file__).resolve().parent.parent
    for name in UNJUSTIFIED_ALLOWED:
        assert unjustified_escapes((root / name).read_text()), f"{name}: take it off the list"
