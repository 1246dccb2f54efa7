"""django-idempotency: make Django and DRF write APIs safe to retry.

The names a project imports every day are importable from here: the decorators and
the middleware, keyed functions, locks and submit tokens, the stores, the errors a
caller catches, the settings and problem responses. Everything else is public in its
own module (``idempotency.exceptions``, ``idempotency.tokens``, ``idempotency.locks``,
``idempotency.stores``, ``idempotency.contrib.<integration>``...); the API reference
says where each name lives.

Names are resolved lazily on first access, so ``import idempotency`` never imports
models or touches the app registry (it is safe in settings modules and ``AppConfig``
code), and none of them needs an optional dependency (DRF, Celery, Ninja...).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # views
    "idempotent": "idempotency.http.decorators",
    "idempotency_exempt": "idempotency.http.decorators",
    "IdempotencyMiddleware": "idempotency.http.middleware",
    "recovery_point": "idempotency.http.requests",
    "get_recovery_point": "idempotency.http.requests",
    # functions, locks, submit tokens
    "idempotent_function": "idempotency.functions",
    "payload_key": "idempotency.functions.arguments",
    "lock": "idempotency.locks",
    "issue_submit_token": "idempotency.tokens",
    "consume_submit_token": "idempotency.tokens",
    # stores
    "get_store": "idempotency.stores.base",
    "DatabaseStore": "idempotency.stores.database",
    "RedisStore": "idempotency.stores.redis",
    "CacheStore": "idempotency.stores.cache",
    # the errors a caller catches (all of them: idempotency.exceptions)
    "IdempotencyError": "idempotency.exceptions",
    "KeyInvalid": "idempotency.exceptions",
    "KeyRequired": "idempotency.exceptions",
    "KeyMismatch": "idempotency.exceptions",
    "RequestInProgress": "idempotency.exceptions",
    "CallInProgress": "idempotency.exceptions",
    "KeyPartMissing": "idempotency.exceptions",
    "StoreUnavailable": "idempotency.exceptions",
    "LockNotAcquired": "idempotency.exceptions",
    "SubmitTokenInvalid": "idempotency.exceptions",
    "SubmitTokenUsed": "idempotency.exceptions",
    # settings and problems
    "idempotency_settings": "idempotency.conf",
    "problem_response": "idempotency.exceptions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'idempotency' has no attribute {name!r}")
    value = getattr(import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from idempotency.conf import idempotency_settings as idempotency_settings
    from idempotency.exceptions import CallInProgress as CallInProgress
    from idempotency.exceptions import IdempotencyError as IdempotencyError
    from idempotency.exceptions import KeyInvalid as KeyInvalid
    from idempotency.exceptions import KeyMismatch as KeyMismatch
    from idempotency.exceptions import KeyPartMissing as KeyPartMissing
    from idempotency.exceptions import KeyRequired as KeyRequired
    from idempotency.exceptions import LockNotAcquired as LockNotAcquired
    from idempotency.exceptions import RequestInProgress as RequestInProgress
    from idempotency.exceptions import StoreUnavailable as StoreUnavailable
    from idempotency.exceptions import SubmitTokenInvalid as SubmitTokenInvalid
    from idempotency.exceptions import SubmitTokenUsed as SubmitTokenUsed
    from idempotency.exceptions import problem_response as problem_response
    from idempotency.functions import idempotent_function as idempotent_function
    from idempotency.functions.arguments import payload_key as payload_key
    from idempotency.http.decorators import idempotency_exempt as idempotency_exempt
    from idempotency.http.decorators import idempotent as idempotent
    from idempotency.http.middleware import IdempotencyMiddleware as IdempotencyMiddleware
    from idempotency.http.requests import get_recovery_point as get_recovery_point
    from idempotency.http.requests import recovery_point as recovery_point
    from idempotency.locks import lock as lock
    from idempotency.stores.base import get_store as get_store
    from idempotency.stores.cache import CacheStore as CacheStore
    from idempotency.stores.database import DatabaseStore as DatabaseStore
    from idempotency.stores.redis import RedisStore as RedisStore
    from idempotency.tokens import consume_submit_token as consume_submit_token
    from idempotency.tokens import issue_submit_token as issue_submit_token
