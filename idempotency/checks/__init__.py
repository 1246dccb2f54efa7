"""System checks of django-idempotency (ids ``idempotency.E0xx`` / ``W0xx``).

Django runs the two checks registered here (``IdempotencyConfig.ready`` imports this
package); each is composed of the checks of this package's modules, one concern each:

- :mod:`~idempotency.checks.values`: each value against its description in
  :data:`idempotency.conf.SETTINGS` (type, choices, bounds, nullability);
- :mod:`~idempotency.checks.backends`: each alias of ``STORES``, ``TOKENS`` and ``LOCKS``:
  its backend, location and options;
- :mod:`~idempotency.checks.stores`: the stores in use (each alias of ``STORES`` and each
  store a view names, found by walking the URL patterns), their modes and caches, and the
  purge;
- :mod:`~idempotency.checks.caches`: the cache behind an alias, the response cache;
- :mod:`~idempotency.checks.databases`: vendors, aliases, atomic mode, routers;
- :mod:`~idempotency.checks.redis`: the Redis behind stores, tokens and locks;
- :mod:`~idempotency.checks.views`: the middleware's place, access checks and replays;
- :mod:`~idempotency.checks.messages`: every message, so each id names one problem.

They read ``settings.IDEMPOTENCY`` as written and never raise. The deployment checks
(``check --deploy``) ask for the project's own problem documentation (W041) and, the only
check that connects anywhere, ask the Redis behind the stores, tokens and locks whether it
persists anything (W007).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from idempotency.checks.backends import check_backends
from idempotency.checks.caches import check_response_cache
from idempotency.checks.databases import (
    check_database_aliases,
    check_database_vendors,
    check_routers,
    check_tenant_scope,
)
from idempotency.checks.messages import MESSAGES, message
from idempotency.checks.redis import check_persistence, check_redis, redis_forgets, redis_users
from idempotency.checks.stores import check_purge, check_stores, stores_in_use
from idempotency.checks.values import (
    check_codec,
    check_keys,
    check_problem_type_base,
    check_values,
    raw_settings,
)
from idempotency.checks.views import check_gates, check_middleware
from idempotency.conf import DEFAULTS


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Validate ``settings.IDEMPOTENCY``, how it fits the rest of the settings, and the
    stores and modes the project's views configure for themselves."""
    raw = raw_settings()
    if raw is None:
        return [message("E001", type=type(getattr(settings, "IDEMPOTENCY", None)).__name__)]
    values = {**DEFAULTS, **raw}
    errors = check_keys(raw) + check_values(values)
    errors += check_backends(values)
    uses = stores_in_use(values, errors)
    errors += check_stores(values, uses)
    errors += check_database_vendors(values, uses)
    errors += check_redis(redis_users(raw, values, uses))
    errors += check_response_cache(uses)
    errors += check_database_aliases(values, uses)
    errors += check_routers(uses)
    errors += check_tenant_scope(values)
    errors += check_middleware()
    errors += check_codec(values)
    errors += check_purge(values, uses)
    errors += check_gates()
    return [m for i, m in enumerate(errors) if m not in errors[:i]]


@checks.register(deploy=True)
def check_redis_persistence(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W007: the Redis that holds records, tokens or locks (global or a view's store)
    must survive a restart."""
    raw = raw_settings()
    if raw is None:
        return []
    values = {**DEFAULTS, **raw}
    return check_persistence(redis_users(raw, values, stores_in_use(values, [])))


@checks.register(deploy=True)
def check_problem_documentation(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W041: the problems' ``type`` links to the project's own documentation."""
    raw = raw_settings()
    if raw is None:
        return []
    return check_problem_type_base({**DEFAULTS, **raw})


__all__ = [
    "MESSAGES",
    "check_problem_documentation",
    "check_redis_persistence",
    "check_settings",
    "redis_forgets",
]
