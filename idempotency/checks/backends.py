"""The aliases of ``STORES``, ``TOKENS`` and ``LOCKS``: a ``"default"`` (E060), each entry
shaped as in ``CACHES`` (E061), its ``BACKEND`` usable (E044 cannot be imported, E045 no
subclass of its base class, E046 abstract), its ``LOCATION`` (E062) and ``OPTIONS``
(E063 unknown, E064 invalid) what the backend accepts, and the databases those options
name (E015)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from idempotency.checks.messages import message
from idempotency.conf import SETTINGS
from idempotency.core.backends import DEFAULT_ALIAS, BackendHandler, UnusableBackend


def handlers() -> list[BackendHandler[Any]]:
    """The handler of each setting of aliases: stores, tokens, locks."""
    from idempotency.locks.locking import lock_backends
    from idempotency.stores import stores
    from idempotency.tokens.api import token_backends

    return [stores, token_backends, lock_backends]


def as_check(problem: UnusableBackend) -> checks.CheckMessage:
    """The check message of a problem the loader would raise."""
    return checks.Error(problem.text, hint=problem.hint, id=f"idempotency.{problem.code}")


def check_backends(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E015, E044-E046 and E060-E064 for every alias of ``STORES``, ``TOKENS`` and
    ``LOCKS``."""
    errors: list[checks.CheckMessage] = []
    for handler in handlers():
        entries = values[handler.setting]
        if not SETTINGS[handler.setting].accepts(entries):
            continue  # E004
        if DEFAULT_ALIAS not in entries:
            aliases = ", ".join(repr(a) for a in entries) or "none"
            problem = UnusableBackend(
                "E060",
                setting=handler.setting,
                what=handler.what,
                alias=DEFAULT_ALIAS,
                aliases=aliases,
            )
            errors.append(as_check(problem))
        for alias, entry in entries.items():
            problems = handler.problems(alias, entry)
            errors += [as_check(problem) for problem in problems]
            if not problems:
                errors += _databases(handler, alias, entry)
    return errors


def _databases(handler: BackendHandler[Any], alias: str, entry: Any) -> list[checks.CheckMessage]:
    """E015 for each option of an entry that names a database not in DATABASES."""
    cls = handler.backend_class(alias)
    databases = getattr(settings, "DATABASES", {}) or {}
    errors = []
    for name, value in (entry.get("OPTIONS") or {}).items():
        option = getattr(cls, "options", {}).get(name)
        if option is not None and option.kind == "database" and value not in databases:
            where = f"IDEMPOTENCY[{handler.setting!r}][{alias!r}]['OPTIONS'][{name!r}]"
            known = ", ".join(sorted(databases)) or "(none)"
            errors.append(message("E015", where=where, alias=value, aliases=known))
    return errors
