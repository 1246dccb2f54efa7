"""Sphinx configuration of the django-idempotency documentation.

Sphinx, because Django, DRF's neighbours and Celery document themselves with it and
its autodoc reads the type hints and docstrings the reference is built from; Furo, a
maintained theme that ships its assets (no CDN); MyST-Parser, so the pages are
Markdown, as the README was. Built with ``python3 dev.py docs`` (warnings are errors,
nitpicky) without the network: no intersphinx inventories are fetched.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

import idempotency  # noqa: E402

project = "django-idempotency"
author = "django-idempotency developers"
copyright = "django-idempotency developers"  # noqa: A001
release = idempotency.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "idempotency_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "screenshots/README.md"]
templates_path: list[str] = []
html_static_path = ["_static"]
html_css_files = ["custom.css"]

myst_enable_extensions = ["colon_fence", "deflist", "fieldlist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"django-idempotency {release}"
html_theme_options = {
    "source_repository": "",
    "navigation_with_keys": True,
}
html_show_sourcelink = False

autodoc_member_order = "bysource"
autoclass_content = "both"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Nitpicky: every cross-reference must resolve, except to the projects whose inventories
# this offline build does not have (Python, Django, DRF, Celery, redis-py).
nitpicky = True
_EXTERNAL = [
    "django",
    "rest_framework",
    "celery",
    "kombu",
    "redis",
    "django_redis",
    "prometheus_client",
    "asgiref",
]
_STDLIB = [
    "typing",
    "collections",
    "datetime",
    "decimal",
    "uuid",
    "logging",
    "enum",
    "types",
    "contextlib",
    "asyncio",
    "threading",
    "dataclasses",
]
# names as type hints write them, unqualified (builtins, typing, Django, DRF, Celery)
_BARE = [
    "str",
    "int",
    "float",
    "bool",
    "bytes",
    "dict",
    "list",
    "tuple",
    "set",
    "frozenset",
    "object",
    "type",
    "None",
    "Any",
    "Callable",
    "Iterable",
    "Iterator",
    "Awaitable",
    "Mapping",
    "Sequence",
    "Coroutine",
    "Literal",
    "Self",
    "TypeVar",
    "ParamSpec",
    "Exception",
    "TypeError",
    "ValueError",
    "ImproperlyConfigured",
    "HttpRequest",
    "HttpResponse",
    "Request",
    "Response",
    "APIException",
    "BasePermission",
    "APIView",
    "Task",
    "Celery",
    "Signal",
]
nitpick_ignore_regex = [
    (r"py:.*", rf"({'|'.join(_EXTERNAL)})(\..*)?"),
    (r"py:.*", rf"({'|'.join(_STDLIB)})(\..*)"),
    (r"py:class", rf"({'|'.join(_BARE)})"),
    (r"py:.*", r"(str|string)\..*"),
    # modules are named in docstrings for orientation; the reference documents names
    (r"py:mod", r"idempotency(\.\w+)*"),
    # private helpers (``_Base``) are not documented, by design
    (r"py:class", r"idempotency(\.\w+)*\._\w+"),
    # type variables of the decorators' signatures (P, R, F, R_co)
    (r"py:(class|obj)", r"(~?_?[A-Z]|idempotency(\.\w+)+\.[A-Z](_co)?)"),
]
