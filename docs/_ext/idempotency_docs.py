"""Reference tables generated from the code, so they cannot drift from it.

Directives (MyST: ```{name}``` fences):

- ``idempotency-problems``: every problem ``code`` the library answers with, its HTTP
  status, title and meaning, from the :class:`~idempotency.exceptions.IdempotencyError`
  subclasses;
- ``idempotency-checks``: every system check id, its level, message and hint, from
  :data:`idempotency.checks.MESSAGES`;
- ``idempotency-command``: a management command's ``--help``, from its own parser;
- ``idempotency-tasks``: the Celery tasks the app registers, with their docstrings.

And two link fixes: a reference by an object's defining path resolves to where the
reference documents it (:func:`resolve_alias`), and viewcode's source pages find the
anchor they link to (:func:`viewcode_anchors`).
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

#: Modules whose IdempotencyError subclasses are answered by the library.
PROBLEM_MODULES = ("idempotency.exceptions",)


def _cell(text: str) -> str:
    return " ".join(text.split()) or "–"


def _text(text: str) -> str:
    """Plain text for a Markdown table cell: inline markup characters escaped."""
    return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", _cell(text))


def _prose(text: str) -> str:
    """A docstring's text for a table cell: its ``literals`` as code, the rest escaped."""
    parts = re.split(r"``(.+?)``", _cell(text))
    return "".join(_code(part) if i % 2 else _text(part) for i, part in enumerate(parts))


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown (MyST) table: the pages are Markdown, so nested content is too."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


class _TableDirective(SphinxDirective):
    has_content = False

    def lines(self) -> list[str]:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(self.lines(), source="<generated>"), 0, container)
        return list(container.children)


def problem_classes() -> list[type]:
    """Every public problem class, in the order the modules define them."""
    from idempotency.exceptions import IdempotencyError

    found: list[type] = []
    for module_name in PROBLEM_MODULES:
        module = importlib.import_module(module_name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, IdempotencyError)
                and obj is not IdempotencyError
                and not obj.__name__.startswith("_")
                and obj.__module__ == module_name
                and obj not in found
            ):
                found.append(obj)
    return found


def _public(cls: type) -> str:
    """Where the reference documents ``cls``: ``idempotency.<name>`` when exported."""
    import idempotency

    if getattr(idempotency, cls.__name__, None) is cls:
        return f"idempotency.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


class ProblemsDirective(_TableDirective):
    def lines(self) -> list[str]:
        rows = []
        for cls in problem_classes():
            rows.append(
                [
                    _code(cls.default_code),
                    str(cls.status_code),
                    f"{_text(str(cls.title))} ({{class}}`~{_public(cls)}`)",
                    _text(str(cls.default_detail)),
                ]
            )
        return _table(["code", "status", "title (exception)", "detail (default)"], rows)


def _placeholders(text: str) -> str:
    # "{key!r}" -> "<key>", "{{...}}" -> "{...}"
    text = re.sub(r"(?<!\{)\{(\w+)(![rs])?\}(?!\})", r"<\1>", text)
    return text.replace("{{", "{").replace("}}", "}")


class ChecksDirective(_TableDirective):
    def lines(self) -> list[str]:
        from idempotency.checks import MESSAGES

        rows = []
        for code in sorted(MESSAGES):
            message = MESSAGES[code]
            level = "Error" if code.startswith("E") else "Warning"
            rows.append(
                [
                    _code(f"idempotency.{code}"),
                    level,
                    _text(_placeholders(message.msg)),
                    _text(_placeholders(message.hint)),
                ]
            )
        return _table(["id", "level", "message", "hint"], rows)


class CommandDirective(SphinxDirective):
    required_arguments = 1
    option_spec: dict[str, Any] = {"app": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        from django.core.management import load_command_class

        name = self.arguments[0]
        command = load_command_class(self.options.get("app", "idempotency"), name)
        text = command.create_parser("manage.py", name).format_help()
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


class TasksDirective(_TableDirective):
    def lines(self) -> list[str]:
        from celery import current_app

        import idempotency.contrib.celery  # noqa: F401  (registers the tasks)

        rows = []
        for name in sorted(current_app.tasks):
            if not name.startswith("idempotency."):
                continue
            task = current_app.tasks[name]
            signature = str(inspect.signature(task.run))
            doc = inspect.getdoc(task.run) or ""
            rows.append([_code(name), _code(signature), _prose(doc)])
        return _table(["task", "arguments", "what it does"], rows)


def _import(path: str) -> Any:
    from django.utils.module_loading import import_string

    try:
        return import_string(path)
    except ImportError:
        module, _, attr = path.rpartition(".")
        try:
            return getattr(_import(module), attr) if module else None
        except AttributeError:
            return None


def resolve_alias(app: Sphinx, env: Any, node: Any, contnode: nodes.Node) -> nodes.Node | None:
    """Resolve a reference to where the object is documented.

    Docstrings and type hints name objects by their defining module
    (``idempotency.http.decorators.idempotent``), the reference documents them
    where users import them (``idempotency.idempotent``). A reference that does not
    resolve is retried under every documented name of the same object; what still
    resolves nowhere stays a warning (and fails the build).
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    module = node.get("py:module") or ""
    klass = node.get("py:class") or ""
    candidates = [target]
    if module:
        candidates += [f"{module}.{klass}.{target}" if klass else "", f"{module}.{target}"]
    domain = env.get_domain("py")
    documented = getattr(env, "_idempotency_documented", None)
    if documented is None:
        documented = {}
        for name in domain.objects:
            obj = _import(name)
            if obj is not None:
                documented.setdefault(id(obj), name)
        env._idempotency_documented = documented
    if "." not in target:  # a bare name: the one documented object of that name
        suffixed = [name for name in domain.objects if name.endswith(f".{target}")]
        candidates += suffixed if len(suffixed) == 1 else []
    for candidate in filter(None, candidates):
        if not candidate.startswith("idempotency"):
            continue
        obj = _import(candidate)
        name = documented.get(id(obj)) if obj is not None else None
        if name is None:
            continue
        new = node.deepcopy()
        new["reftarget"] = name
        return domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], name, new, contnode
        )
    return None


def viewcode_anchors(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Give each documented object the anchor viewcode's source page links it by.

    viewcode links every object of a module under one prefix, the documented module of
    the first object it met from there (``idempotency.`` for ``idempotency.exceptions``,
    whose daily errors the reference documents under the package): an object of that
    module documented under its own path (``idempotency.exceptions.TaskDeferred``) gets
    that anchor too (``idempotency.TaskDeferred``).
    """
    modules = getattr(app.env, "_viewcode_modules", {})
    taken = {id_ for node in doctree.findall(nodes.Element) for id_ in node.get("ids", [])}
    for signode in doctree.findall(addnodes.desc_signature):
        module, fullname = signode.get("module"), signode.get("fullname")
        obj = _import(f"{module}.{fullname}") if module and fullname else None
        entry = modules.get(getattr(obj, "__module__", None))
        if not isinstance(entry, tuple):
            continue
        anchor = f"{entry[3]}.{fullname}"
        if anchor not in taken:
            signode["ids"].append(anchor)
            taken.add(anchor)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", resolve_alias)
    app.connect("doctree-resolved", viewcode_anchors)
    app.add_directive("idempotency-problems", ProblemsDirective)
    app.add_directive("idempotency-checks", ChecksDirective)
    app.add_directive("idempotency-command", CommandDirective)
    app.add_directive("idempotency-tasks", TasksDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
