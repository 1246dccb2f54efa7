#!/usr/bin/env python3
"""Move django-idempotency's modules to the layout of LAYOUT_PLAN.md (issue 38, item 4).

    python3 tools/relayout.py --dry-run   # print every move and rewrite, change nothing
    python3 tools/relayout.py             # do them (git mv, then rewrite the paths)

What it does, in this order:

1. ``git mv`` every module of :data:`MOVES` (and every test file of :data:`TEST_MOVES`)
   to its new place, creating the new packages with an ``__init__.py`` that says what
   each holds (:data:`PACKAGES`). A module that becomes a package of the same name
   (:data:`BECOME_PACKAGES`: ``idempotency.functions``, ``idempotency.tasks``) keeps its
   path: its code moves to a submodule and the package re-exports every name of it.
2. Rewrite the dotted paths (``idempotency.calls`` -> ``idempotency.core.engine``) and the
   file paths (``idempotency/calls.py``, ``tests/test_policy.py``) across the repository's
   code, docs, tests, benchmarks, chaos harness, model, sample apps, config and CI
   scripts, in one pass (an old path is never rewritten twice). ``from idempotency import
   logs`` becomes ``from idempotency.observability import logs``.
3. Add every move to ``_MOVED`` in ``idempotency/__init__.py``: the old import paths keep
   answering with the new modules (users' imports, dotted paths in their settings,
   pickles).

It is idempotent: a move whose source is gone and whose destination exists is done
already and skipped; a rewrite finds no old path the second time. It stops, changing
nothing, when a source and its destination both exist. It never touches CHANGELOG.md
(history keeps the names it had), built docs or virtualenvs.

After it: ``ruff format``, ``python3 dev.py lint typecheck docs test``, then update
docs/development.md's "Where things live" (the tree is prose; the script does not write it)
and do the renames of symbols that LAYOUT_PLAN.md lists (they need judgement).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Old dotted module -> new dotted module. Module moves only; a package keeps its
#: submodules' names unless listed.
MOVES: dict[str, str] = {
    # core/: the engine, its options, and what every keyed call relies on
    "idempotency.calls": "idempotency.functions.calls",
    "idempotency.backends": "idempotency.core.backends",
    "idempotency.canonical": "idempotency.core.canonical",
    "idempotency.payload_keys": "idempotency.functions.payload_keys",
    "idempotency.policy": "idempotency.core.options",
    "idempotency.keepalive": "idempotency.core.keepalive",
    "idempotency.backoff": "idempotency.core.backoff",
    "idempotency.outages": "idempotency.core.outages",
    "idempotency.recovery": "idempotency.core.recovery",
    "idempotency.keyed": "idempotency.core.keyed_hashes",
    "idempotency.json_codec": "idempotency.core.json_codec",
    # functions/: @idempotent_function, its keys and argument fingerprints, its results
    "idempotency.arguments": "idempotency.functions.arguments",
    "idempotency.results": "idempotency.functions.results",
    # tasks/: the Celery task, redelivery, the periodic (beat) tasks
    "idempotency.redelivery": "idempotency.tasks.redelivery",
    "idempotency.beat": "idempotency.tasks.periodic",
    # observability/: logs, Prometheus, OpenTelemetry
    "idempotency.logs": "idempotency.observability.logs",
    "idempotency.metrics": "idempotency.observability.metrics",
    "idempotency.otel": "idempotency.observability.otel",
    "idempotency.tracing": "idempotency.observability.tracing",
    # stores/: what works on the stored records themselves
    "idempotency.purge": "idempotency.stores.purge",
    "idempotency.reencryption": "idempotency.stores.reencryption",
    # http/: names that say what the modules hold
    "idempotency.http.views": "idempotency.http.view_marks",
    "idempotency.http.handling": "idempotency.http.handler",
    "idempotency.http.policy": "idempotency.http.options",
}

#: A module that becomes a package of the same dotted path: its code moves to the
#: submodule named here, and the package's ``__init__`` re-exports every name of it.
BECOME_PACKAGES: dict[str, str] = {
    "idempotency.functions": "idempotency.functions.decorator",
    "idempotency.tasks": "idempotency.tasks.task",
}

#: What each new package holds: its ``__init__``'s docstring.
PACKAGES: dict[str, str] = {
    "idempotency.core": "The engine every keyed request, function call and task runs through: "
    "claim, wait, run, complete or release; its options, keep-alive, waits, outages and "
    "recovery points.",
    "idempotency.functions": "``@idempotent_function``: keyed calls of plain callables, the "
    "keys and fingerprints of their arguments, and how their results are stored.",
    "idempotency.tasks": "Idempotent Celery tasks (``IdempotentTask``, ``@idempotent_task``), "
    "their redelivery, and the periodic tasks this package registers.",
    "idempotency.observability": "What the library tells operators: structured logs, "
    "Prometheus metrics, OpenTelemetry spans and metrics.",
}

#: Old test file -> new test file (tests/ mirrors the package one to one).
TEST_MOVES: dict[str, str] = {
    "tests/test_functions.py": "tests/functions/test_decorator.py",
    "tests/test_functions_concurrency.py": "tests/functions/test_decorator_concurrency.py",
    "tests/test_arguments.py": "tests/functions/test_arguments.py",
    "tests/test_results.py": "tests/functions/test_results.py",
    "tests/test_tasks.py": "tests/tasks/test_task.py",
    "tests/test_tasks_worker.py": "tests/tasks/test_task_worker.py",
    "tests/test_keepalive.py": "tests/core/test_keepalive.py",
    "tests/test_keyed.py": "tests/core/test_keyed_hashes.py",
    "tests/test_json_codec.py": "tests/core/test_json_codec.py",
    "tests/test_outages.py": "tests/core/test_outages.py",
    "tests/test_outages_calls.py": "tests/core/test_outages_calls.py",
    "tests/test_policy.py": "tests/core/test_options.py",
    "tests/test_logs.py": "tests/observability/test_logs.py",
    "tests/test_metrics.py": "tests/observability/test_metrics.py",
    "tests/test_otel.py": "tests/observability/test_otel.py",
    "tests/test_purge.py": "tests/stores/test_purge.py",
    "tests/test_purge_now_and_then.py": "tests/stores/test_purge_now_and_then.py",
    "tests/test_tokens.py": "tests/tokens/test_tokens.py",
    "tests/test_locks.py": "tests/locks/test_locks.py",
}

#: Where paths are rewritten: these folders and files of the repository.
REWRITE_ROOTS = (
    "idempotency",
    "tests",
    "docs",
    "bench",
    "chaos",
    "model",
    "accounts",
    "orders",
    "payments",
    "config",
    ".ci",
    "README.md",
    "pyproject.toml",
    "Makefile",
    "dev.py",
    "manage.py",
)
REWRITE_SUFFIXES = {
    ".py", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".json",
    ".html", ".pml", ".sh", "",
}  # fmt: skip
SKIP_PARTS = {"_build", ".venv", "__pycache__", "node_modules", ".git"}
SKIP_FILES = {"CHANGELOG.md", "docs/changelog.md", "tools/relayout.py"}

#: Files a dry run would have created (so it names each once).
_PLANNED: set[Path] = set()

MOVED_START = "# -- moved modules (tools/relayout.py keeps this table) --"
MOVED_END = "# -- end of moved modules --"


def path_of(module: str, *, package: bool = False) -> str:
    base = module.replace(".", "/")
    return f"{base}/__init__.py" if package else f"{base}.py"


def docstring(text: str) -> str:
    """A module docstring of ``text``, wrapped at 92 columns."""
    return '"""' + "\n".join(textwrap.wrap(text, 92)) + '"""\n'


def check_table() -> None:
    """No new path may begin with an old one, or a second run would rewrite it again."""
    olds = [*MOVES, *TEST_MOVES]
    news = [*MOVES.values(), *TEST_MOVES.values()]
    for new in news:
        for old in olds:
            if new == old or new.startswith(old + ".") or new.startswith(old.removesuffix(".py")):
                sys.exit(f"relayout: the new path {new} begins with the old path {old}")


def git(*args: str, dry: bool) -> None:
    print("  git", *args)
    if not dry:
        subprocess.run(["git", *args], cwd=ROOT, check=True)


def ensure_package(module: str, dry: bool) -> None:
    """The package ``module`` and its parents exist, each with an ``__init__.py``."""
    parts = module.split(".")
    for depth in range(2, len(parts) + 1):
        name = ".".join(parts[:depth])
        init = ROOT / path_of(name, package=True)
        if init.exists() or init in _PLANNED:
            continue
        _PLANNED.add(init)
        doc = PACKAGES.get(name, f"Tests of {name.replace('tests.', 'idempotency.', 1)}.")
        text = docstring(doc) if name.startswith("idempotency") else ""
        print(f"  create {init.relative_to(ROOT)}")
        if not dry:
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(text)
            subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)


def move_file(old: str, new: str, dry: bool) -> bool:
    """``git mv old new``; False when done already. Stops on a conflict."""
    source, target = ROOT / old, ROOT / new
    if not source.exists():
        if target.exists():
            return False
        print(f"  skip {old}: neither it nor {new} exists (the engine rewrite removed it?)")
        return False
    if target.exists():
        sys.exit(f"relayout: both {old} and {new} exist; resolve that first")
    ensure_package(".".join(Path(new).with_suffix("").parts[:-1]), dry)
    git("mv", old, new, dry=dry)
    return True


def reexports(source: Path) -> list[str]:
    """Every top-level name a module binds (its classes, functions and assignments)."""
    names: list[str] = []
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and not _helper(node.value):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in dict.fromkeys(names) if n != "__all__"]


def imported_from(module: str) -> list[str]:
    """The names the repository's Python files import from ``module`` (``from module import
    name``): those the module imported itself count too, once others take them from it."""
    found: list[str] = []
    for file in files_to_rewrite():
        if file.suffix != ".py":
            continue
        try:
            tree = ast.parse(file.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == module and not node.level:
                found += [alias.name for alias in node.names if alias.name != "*"]
    return list(dict.fromkeys(found))


def _helper(value: ast.expr) -> bool:
    """A type variable or a logger: the module's own, not worth re-exporting."""
    called = value.func if isinstance(value, ast.Call) else None
    name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
    return name in {"TypeVar", "ParamSpec", "getLogger"}


def become_package(module: str, submodule: str, dry: bool) -> None:
    """Move ``module``'s code to ``submodule`` and make ``module`` a package re-exporting it."""
    old, new = path_of(module), path_of(submodule)
    init = ROOT / path_of(module, package=True)
    source = ROOT / old
    if not source.exists():
        return
    names = reexports(source)
    names += [n for n in imported_from(module) if n not in names]
    (ROOT / new).parent.mkdir(parents=True, exist_ok=True) if not dry else None
    git("mv", old, new, dry=dry)
    public = [n for n in names if not n.startswith("_")]
    lines = [docstring(PACKAGES[module]).rstrip("\n"), "", "from __future__ import annotations", ""]
    lines += ["from importlib import import_module", "from typing import TYPE_CHECKING, Any", ""]
    if module == "idempotency.tasks":  # Celery's autodiscovery imports this package
        lines += ["from idempotency.tasks import periodic  # noqa: F401 (registers them)", ""]
    lines += [
        "# name -> the module that defines it, imported on first use (as idempotency's own",
        "# names are): importing a sibling module never imports this one's code",
        "_EXPORTS: dict[str, str] = {",
        *(f'    "{n}": "{submodule}",' for n in names),
        "}",
        "",
        "__all__ = [" + ", ".join(f'"{n}"' for n in sorted(public)) + "]",
        "",
        "",
        "def __getattr__(name: str) -> Any:",
        "    module_name = _EXPORTS.get(name)",
        "    if module_name is None:",
        '        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")',
        "    value = getattr(import_module(module_name), name)",
        "    globals()[name] = value",
        "    return value",
        "",
        "",
        "if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers",
        *(f"    from {submodule} import {n} as {n}" for n in names),
        "",
    ]
    _PLANNED.add(init)
    print(f"  write {init.relative_to(ROOT)} (re-exports {len(names)} names of {submodule})")
    if not dry:
        init.write_text("\n".join(lines))
        subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)


def files_to_rewrite() -> list[Path]:
    found: list[Path] = []
    for root in REWRITE_ROOTS:
        path = ROOT / root
        candidates = [path] if path.is_file() else path.rglob("*") if path.is_dir() else []
        for file in candidates:
            relative = file.relative_to(ROOT).as_posix()
            if (
                file.is_file()
                and file.suffix in REWRITE_SUFFIXES
                and not SKIP_PARTS & set(file.relative_to(ROOT).parts)
                and relative not in SKIP_FILES
            ):
                found.append(file)
    return found


def replacements() -> dict[str, str]:
    """Every old spelling -> its new one: dotted paths, file paths, test files."""
    table: dict[str, str] = dict(MOVES)
    for old, new in MOVES.items():
        table[path_of(old)] = path_of(new)
    table.update(TEST_MOVES)
    for old, new in TEST_MOVES.items():  # tests.test_policy -> tests.core.test_options
        table[old.removesuffix(".py").replace("/", ".")] = new.removesuffix(".py").replace("/", ".")
    return table


def rewrite(text: str, table: dict[str, str]) -> tuple[str, int]:
    """``text`` with every old path of ``table`` replaced, in one pass."""
    olds = sorted(table, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./])(" + "|".join(map(re.escape, olds)) + r")(?![\w/])")
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return table[match.group(1)]

    text = pattern.sub(swap, text)
    # ``from idempotency import logs`` -> ``from idempotency.observability import logs``
    lines = text.split("\n")
    for index, line in enumerate(lines):
        new_line = _module_import(line)
        if new_line != line:
            lines[index] = new_line
            count += 1
    return "\n".join(lines), count


FROM_IMPORT = re.compile(r"^(\s*)from ([\w.]+) import ([\w ,]+?)(\s*#.*)?$")


def _module_import(line: str) -> str:
    """``from parent import a, b`` with the moved modules among ``a, b`` imported from their
    new places under their old names (one line each when the parent changed)."""
    match = FROM_IMPORT.match(line)
    if match is None:
        return line
    indent, parent, names, comment = match.group(1), match.group(2), match.group(3), match.group(4)
    kept: list[str] = []
    moved: list[str] = []
    for item in (n.strip() for n in names.split(",")):
        name, _, alias = (part.strip() for part in item.partition(" as "))
        new = MOVES.get(f"{parent}.{name}")
        if new is None:
            kept.append(item)
            continue
        new_parent, _, new_name = new.rpartition(".")
        shown = alias or name
        spelled = new_name if new_name == shown else f"{new_name} as {shown}"
        if new_parent == parent:
            kept.append(spelled)
        else:
            moved.append(f"{indent}from {new_parent} import {spelled}")
    if not moved and ", ".join(kept) == names.strip():
        return line
    out = [f"{indent}from {parent} import {', '.join(kept)}{comment or ''}"] if kept else []
    return "\n".join([*out, *moved])


def rewrite_files(dry: bool) -> None:
    table = replacements()
    for file in files_to_rewrite():
        text = file.read_text(errors="surrogateescape")
        kept = ""
        if file == ROOT / "idempotency" / "__init__.py" and MOVED_START in text:
            head, _, rest = text.partition(MOVED_START)
            kept, _, tail = rest.partition(MOVED_END)
            kept = MOVED_START + kept + MOVED_END
            text = head + "\0MOVED\0" + tail
        new, count = rewrite(text, table)
        new = new.replace("\0MOVED\0", kept)
        if count:
            print(f"  rewrite {file.relative_to(ROOT)}: {count} path(s)")
            if not dry:
                file.write_text(new, errors="surrogateescape")
    news = tuple(replacements().values())
    for file in files_to_rewrite():  # longer paths, longer lines
        if file.suffix == ".py" and not dry:
            for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                if len(line) > 100 and any(new in line for new in news):
                    print(f"  by hand (over 100 columns): {file.relative_to(ROOT)}:{number}")
    parents = {old.rpartition(".")[0] for old in MOVES}
    opening = re.compile(r"^\s*from (" + "|".join(map(re.escape, parents)) + r") import \($")
    for file in files_to_rewrite():  # what the one-line rule cannot do: ``import (`` blocks
        if file.suffix != ".py":
            continue
        lines = file.read_text(errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            found = opening.match(line)
            if not found:
                continue
            block = " ".join(lines[number : number + 30]).split(")")[0]
            names = {n.strip().split(" as ")[0] for n in block.split(",")}
            if any(f"{found.group(1)}.{n}" in MOVES for n in names):
                print(f"  by hand: {file.relative_to(ROOT)}:{number}: {line.strip()} ...")


def record_moves(dry: bool) -> None:
    """Add every move to ``_MOVED`` in idempotency/__init__.py (old paths keep working)."""
    init = ROOT / "idempotency" / "__init__.py"
    text = init.read_text()
    if MOVED_START not in text:
        sys.exit("relayout: idempotency/__init__.py has no table of moved modules")
    head, _, rest = text.partition(MOVED_START)
    block, _, tail = rest.partition(MOVED_END)
    added = [f'    "{old}": "{new}",\n' for old, new in MOVES.items() if f'"{old}":' not in block]
    if not added:
        return
    print(f"  record {len(added)} moved module(s) in idempotency/__init__.py")
    closing = block.rindex("}")
    block = block[:closing] + "".join(added) + block[closing:]
    if not dry:
        init.write_text(head + MOVED_START + block + MOVED_END + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print, change nothing")
    dry = parser.parse_args().dry_run
    check_table()
    print("moves:")
    for module, submodule in BECOME_PACKAGES.items():
        become_package(module, submodule, dry)
    for old, new in MOVES.items():
        move_file(path_of(old), path_of(new), dry)
    print("test moves:")
    for old, new in TEST_MOVES.items():
        move_file(old, new, dry)
    print("rewrites:")
    rewrite_files(dry)
    print("moved modules:")
    record_moves(dry)
    print("dry run: nothing changed" if dry else "done: now ruff check --fix (import order),")
    print("ruff format, the 'by hand' lines above, then python3 dev.py lint typecheck docs test")


if __name__ == "__main__":
    main()
