"""The reference pages and the code say the same thing: settings, public names, signals."""

from __future__ import annotations

import ast
import re
from importlib import import_module
from pathlib import Path

from idempotency.conf import DEFAULTS, SETTINGS

SETTINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "settings.md"
ROW = re.compile(r"^\| `([A-Z_]+)` \| ([^|]+) \| `([^`]*)` \| .+\|$")


def documented() -> dict[str, tuple[str, object]]:
    """The settings table: name -> (type, default as a Python literal)."""
    rows = {}
    for line in SETTINGS_PAGE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = (match.group(2).strip(), ast.literal_eval(match.group(3)))
    return rows


def test_every_setting_is_documented_with_its_default() -> None:
    assert {name: default for name, (_type, default) in documented().items()} == DEFAULTS


def test_every_setting_is_documented_with_its_type() -> None:
    assert {name: kind for name, (kind, _default) in documented().items()} == {
        name: setting.label for name, setting in SETTINGS.items()
    }


DOCS = SETTINGS_PAGE.parents[1]
API_PAGE = DOCS / "reference" / "api.md"
AUTODOC = re.compile(
    r"^\.\. auto(function|class|exception|data|module):: (idempotency(?:\.\w+)*)$", re.M
)


def test_the_api_reference_lists_exactly_the_public_names() -> None:
    """The package's section documents ``idempotency.<name>`` for each name of
    ``__all__``, and nothing else is documented under the package itself."""
    import idempotency

    objects = [path for kind, path in AUTODOC.findall(API_PAGE.read_text()) if kind != "module"]
    assert {p.split(".")[1] for p in objects if p.count(".") == 1} == set(idempotency.__all__)


def test_every_exception_and_every_documented_path_are_in_the_api_reference() -> None:
    """Each class of ``idempotency.exceptions`` is documented once, under the package
    when it is exported there, else under the module; and every path the page documents
    imports (a moved name fails here before the docs build)."""
    from django.utils.module_loading import import_string

    import idempotency
    from idempotency import exceptions

    paths = [path for _kind, path in AUTODOC.findall(API_PAGE.read_text())]
    expected = {
        f"idempotency.{name}" if name in idempotency.__all__ else f"idempotency.exceptions.{name}"
        for name in exceptions.__all__
    }
    documented = [
        path
        for path in paths
        if path.rpartition(".")[0] in ("idempotency", "idempotency.exceptions")
        and path.rpartition(".")[2] in exceptions.__all__
    ]
    assert sorted(documented) == sorted(expected)
    for path in paths:
        try:
            import_string(path)
        except ImportError:
            import_module(path)  # a module (automodule)


def test_every_signal_is_in_the_signals_reference() -> None:
    from django.dispatch import Signal

    from idempotency import signals

    defined = {name for name, value in vars(signals).items() if isinstance(value, Signal)}
    page = (DOCS / "reference" / "signals.md").read_text()
    rows = set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    assert rows == defined


README = DOCS.parent / "README.md"


def test_readme_is_a_landing_page_whose_links_resolve() -> None:
    """At most 250 lines, and every relative link points at a file of the repository
    (the README is read on GitHub and PyPI, outside the docs build that checks links)."""
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    targets = re.findall(r"\]\(((?!https?:)[^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links into the docs"
    missing = [t for t in targets if not (README.parent / t).exists()]
    assert missing == []
    for target, anchor in re.findall(r"\]\(((?!https?:)[^)#\s]+)#([^)]+)\)", text):
        headings = re.findall(r"^#+ (.+)$", (README.parent / target).read_text(), re.M)
        assert anchor in {_slug(h) for h in headings}, f"{target}#{anchor}"


def _slug(heading: str) -> str:
    """The anchor GitHub (and MyST's heading anchors) give a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


LITERAL_PROBLEM = re.compile(r"problem_response\(\s*(\d{3}),\s*\"([a-z][a-z-]+)\"")


def test_problems_answered_outside_the_exception_classes_are_documented() -> None:
    """The problems page generates the classes' codes; codes the library answers with
    literally (``problem_response(413, "payload-too-large", ...)``) are written there."""
    package = DOCS.parent / "idempotency"
    literal = {
        (status, code)
        for path in package.rglob("*.py")
        for status, code in LITERAL_PROBLEM.findall(path.read_text())
    }
    assert literal, "the scan finds the literal problems (payload-too-large at least)"
    page = (DOCS / "reference" / "problems.md").read_text()
    assert [c for s, c in literal if f"{s} {c}" not in page] == []


BACKEND_HEADING = re.compile(r"^### `(idempotency\.[\w.]+)`$")
OPTION_ROW = re.compile(r"^\| `([a-z_]+)` \| ([^|]+) \| `([^`]*)` \| .+\|$")


def documented_options() -> dict[str, dict[str, tuple[str, object]]]:
    """The options tables of the settings page: backend path -> option -> (type, default)."""
    tables: dict[str, dict[str, tuple[str, object]]] = {}
    current = None
    for line in SETTINGS_PAGE.read_text().splitlines():
        if heading := BACKEND_HEADING.match(line):
            current = tables.setdefault(heading.group(1), {})
        elif (row := OPTION_ROW.match(line)) and current is not None:
            current[row.group(1)] = (row.group(2).strip(), ast.literal_eval(row.group(3)))
    return tables


def test_every_built_in_backends_options_are_documented() -> None:
    """Each built-in store, token and lock backend: its options table lists exactly the
    options it declares, each with its type and default."""
    from django.utils.module_loading import import_string

    tables = documented_options()
    assert set(tables) == {
        "idempotency.stores.database.DatabaseStore",
        "idempotency.stores.redis.RedisStore",
        "idempotency.stores.cache.CacheStore",
        "idempotency.tokens.DatabaseTokens",
        "idempotency.tokens.RedisTokens",
        "idempotency.locks.RedisLockBackend",
        "idempotency.locks.PostgresLockBackend",
        "idempotency.locks.MySQLLockBackend",
    }
    for path, rows in tables.items():
        options = import_string(path).options
        assert rows == {name: (o.label, o.default) for name, o in options.items()}, path


SAMPLE_PACKAGES = ("config", "orders", "payments", "accounts")


def sample_imports() -> dict[str, list[str]]:
    """Each name the sample project imports from the library (``from idempotency.x
    import name``), with the files that import it."""
    found: dict[str, list[str]] = {}
    for package in SAMPLE_PACKAGES:
        for path in sorted((DOCS.parent / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "idempotency"
                ):
                    for alias in node.names:
                        where = str(path.relative_to(DOCS.parent))
                        found.setdefault(f"{node.module}.{alias.name}", []).append(where)
    return found


def test_the_sample_project_imports_only_documented_names() -> None:
    """The sample shows the library's public API: every name it imports is documented
    in the API reference under the path it is imported from (or exported by the
    package itself), so no reader copies an internal name from the sample."""
    documented = {path for _kind, path in AUTODOC.findall(API_PAGE.read_text())}
    imports = sample_imports()
    assert "idempotency.idempotent" in imports, "the scan finds the sample's imports"
    undocumented = {
        name: files
        for name, files in imports.items()
        if name not in documented and name.rpartition(".")[0] != "idempotency"
    }
    assert undocumented == {}
