"""django-idempotency: make Django and DRF write APIs safe to retry.

Everything public is importable from here. Names are resolved lazily on first
access, so ``import idempotency`` never imports models or touches the app
registry (it is safe in settings modules and ``AppConfig`` code).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # HTTP
    "idempotent": "idempotency.http.decorators",
    "idempotency_exempt": "idempotency.http.decorators",
    "IdempotentMixin": "idempotency.contrib.drf.mixins",
    "IdempotencyMiddleware": "idempotency.http.middleware",
    "shared": "idempotency.scopes",
    "recovery_point": "idempotency.core.recovery",
    "get_recovery_point": "idempotency.core.recovery",
    # beyond HTTP
    "idempotent_function": "idempotency.functions",
    "IdempotentTask": "idempotency.contrib.celery",
    "idempotent_task": "idempotency.contrib.celery",
    "idempotent_django_task": "idempotency.contrib.django_tasks",
    "issue_submit_token": "idempotency.tokens",
    "consume_submit_token": "idempotency.tokens",
    "require_submit_token": "idempotency.tokens",
    "SubmitTokenPermission": "idempotency.contrib.drf.tokens",
    "SubmitTokenIssueView": "idempotency.contrib.drf.tokens",
    "lock": "idempotency.locks",
    "Lock": "idempotency.locks",
    # stores
    "get_store": "idempotency.stores",
    "DatabaseStore": "idempotency.stores.database",
    "RedisStore": "idempotency.stores.redis",
    "CacheStore": "idempotency.stores.cache",
    # errors, signals, settings
    "IdempotencyError": "idempotency.exceptions",
    "InvalidIdempotencyKey": "idempotency.exceptions",
    "IdempotencyKeyRequired": "idempotency.exceptions",
    "IdempotencyKeyMismatch": "idempotency.exceptions",
    "IdempotencyRequestInProgress": "idempotency.exceptions",
    "IdempotencyAnonymousNotAllowed": "idempotency.exceptions",
    "LockNotAcquired": "idempotency.exceptions",
    "InProgress": "idempotency.exceptions",
    "TaskDeferred": "idempotency.exceptions",
    "FunctionKeyMismatch": "idempotency.exceptions",
    "ArgumentsMismatch": "idempotency.exceptions",
    "ReplayedRecord": "idempotency.core.job",
    "payload_key": "idempotency.functions.arguments",
    "PayloadKey": "idempotency.functions.arguments",
    "IdempotentCallable": "idempotency.functions",
    "IdempotencyKeyMissing": "idempotency.exceptions",
    "StoredError": "idempotency.exceptions",
    "StoreCorrupted": "idempotency.exceptions",
    "RecordForged": "idempotency.exceptions",
    "SubmitTokenInvalid": "idempotency.exceptions",
    "SubmitTokenUsed": "idempotency.exceptions",
    "ImproperlyApplied": "idempotency.exceptions",
    "StaleOwner": "idempotency.exceptions",
    "StoreUnavailable": "idempotency.exceptions",
    "StoreNotDurable": "idempotency.exceptions",
    "StoreMisconfigured": "idempotency.exceptions",
    "IdempotencyResponseNotStored": "idempotency.exceptions",
    "IdempotencyTooManyRecords": "idempotency.exceptions",
    "problem_response": "idempotency.problems",
    "idempotency_settings": "idempotency.conf",
    "purge_expired_records": "idempotency.stores.purge",
    "PurgeResult": "idempotency.stores.purge",
    "purge_expired_submit_tokens": "idempotency.tokens",
    # observability (optional extras: imported only when used)
    "metrics_view": "idempotency.contrib.prometheus",
    "JsonFormatter": "idempotency.observability.logs",
}

__all__ = sorted(_EXPORTS)

# -- moved modules: an old import path answers with the module at its new one --
#: Modules that moved, by their old dotted path: importing the old path gives the module
#: at the new one (the same module object, so its classes, pickles and ``import_string``
#: paths in settings stay valid).
_MOVED: dict[str, str] = {
    "idempotency.check_messages": "idempotency.checks.messages",
    "idempotency.client.policy": "idempotency.client.retries",
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
    "idempotency.arguments": "idempotency.functions.arguments",
    "idempotency.results": "idempotency.functions.results",
    "idempotency.redelivery": "idempotency.contrib.celery.redelivery",
    "idempotency.beat": "idempotency.contrib.celery.periodic",
    "idempotency.logs": "idempotency.observability.logs",
    "idempotency.metrics": "idempotency.contrib.prometheus",
    "idempotency.otel": "idempotency.contrib.otel",
    "idempotency.tracing": "idempotency.observability.tracing",
    "idempotency.purge": "idempotency.stores.purge",
    "idempotency.reencryption": "idempotency.stores.reencryption",
    "idempotency.http.views": "idempotency.http.view_marks",
    "idempotency.http.handling": "idempotency.http.handler",
    "idempotency.http.policy": "idempotency.http.options",
}
# -- end of moved modules --


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old path of a moved module (:data:`_MOVED`) and answers the new module."""

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return import_module(_MOVED[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module ran under its new name."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


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
    from idempotency.contrib.celery import IdempotentTask as IdempotentTask
    from idempotency.contrib.celery import idempotent_task as idempotent_task
    from idempotency.contrib.django_tasks import idempotent_django_task as idempotent_django_task
    from idempotency.contrib.drf.mixins import IdempotentMixin as IdempotentMixin
    from idempotency.contrib.drf.tokens import SubmitTokenIssueView as SubmitTokenIssueView
    from idempotency.contrib.drf.tokens import SubmitTokenPermission as SubmitTokenPermission
    from idempotency.contrib.prometheus import metrics_view as metrics_view
    from idempotency.core.job import ReplayedRecord as ReplayedRecord
    from idempotency.core.recovery import get_recovery_point as get_recovery_point
    from idempotency.core.recovery import recovery_point as recovery_point
    from idempotency.exceptions import ArgumentsMismatch as ArgumentsMismatch
    from idempotency.exceptions import FunctionKeyMismatch as FunctionKeyMismatch
    from idempotency.exceptions import (
        IdempotencyAnonymousNotAllowed as IdempotencyAnonymousNotAllowed,
    )
    from idempotency.exceptions import IdempotencyError as IdempotencyError
    from idempotency.exceptions import IdempotencyKeyMismatch as IdempotencyKeyMismatch
    from idempotency.exceptions import IdempotencyKeyMissing as IdempotencyKeyMissing
    from idempotency.exceptions import IdempotencyKeyRequired as IdempotencyKeyRequired
    from idempotency.exceptions import (
        IdempotencyRequestInProgress as IdempotencyRequestInProgress,
    )
    from idempotency.exceptions import IdempotencyResponseNotStored as IdempotencyResponseNotStored
    from idempotency.exceptions import IdempotencyTooManyRecords as IdempotencyTooManyRecords
    from idempotency.exceptions import ImproperlyApplied as ImproperlyApplied
    from idempotency.exceptions import InProgress as InProgress
    from idempotency.exceptions import InvalidIdempotencyKey as InvalidIdempotencyKey
    from idempotency.exceptions import LockNotAcquired as LockNotAcquired
    from idempotency.exceptions import RecordForged as RecordForged
    from idempotency.exceptions import StaleOwner as StaleOwner
    from idempotency.exceptions import StoreCorrupted as StoreCorrupted
    from idempotency.exceptions import StoredError as StoredError
    from idempotency.exceptions import StoreMisconfigured as StoreMisconfigured
    from idempotency.exceptions import StoreNotDurable as StoreNotDurable
    from idempotency.exceptions import StoreUnavailable as StoreUnavailable
    from idempotency.exceptions import SubmitTokenInvalid as SubmitTokenInvalid
    from idempotency.exceptions import SubmitTokenUsed as SubmitTokenUsed
    from idempotency.exceptions import TaskDeferred as TaskDeferred
    from idempotency.functions import IdempotentCallable as IdempotentCallable
    from idempotency.functions import idempotent_function as idempotent_function
    from idempotency.functions.arguments import PayloadKey as PayloadKey
    from idempotency.functions.arguments import payload_key as payload_key
    from idempotency.http.decorators import idempotency_exempt as idempotency_exempt
    from idempotency.http.decorators import idempotent as idempotent
    from idempotency.http.middleware import IdempotencyMiddleware as IdempotencyMiddleware
    from idempotency.locks import Lock as Lock
    from idempotency.locks import lock as lock
    from idempotency.observability.logs import JsonFormatter as JsonFormatter
    from idempotency.problems import problem_response as problem_response
    from idempotency.scopes import shared as shared
    from idempotency.stores import get_store as get_store
    from idempotency.stores.cache import CacheStore as CacheStore
    from idempotency.stores.database import DatabaseStore as DatabaseStore
    from idempotency.stores.purge import PurgeResult as PurgeResult
    from idempotency.stores.purge import purge_expired_records as purge_expired_records
    from idempotency.stores.redis import RedisStore as RedisStore
    from idempotency.tokens import consume_submit_token as consume_submit_token
    from idempotency.tokens import issue_submit_token as issue_submit_token
    from idempotency.tokens import purge_expired_submit_tokens as purge_expired_submit_tokens
    from idempotency.tokens import require_submit_token as require_submit_token
