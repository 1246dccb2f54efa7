"""The stores in use (the global ``STORE`` and each one a view names for itself) and
whether each fits its mode and cache (E006, E008, E012, E013, E020, E050, W001, W004,
W005),
and whether something deletes the expired records of a database store (W040)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from idempotency.checks.caches import DUMMY, LOCMEM, backend_is, cache_backend, no_cache, unreadable
from idempotency.checks.messages import cap, message
from idempotency.checks.values import check_import
from idempotency.stores.atomic import AtomicStore

#: A store in use: ``(what, class, instance or None, mode)``, ``what`` naming it in messages.
Use = tuple[str, type, Any, Any]

DATABASE_STORE = "idempotency.stores.database.DatabaseStore"


def store_class(value: Any) -> type | None:
    """The store class ``value`` (a dotted path, class or instance) names; None when it
    names none (an import error is E005's, reported where the path is given)."""
    from idempotency.stores.base import BaseStore

    if isinstance(value, BaseStore):
        return type(value)
    if isinstance(value, str):
        try:
            value = import_string(value)
        except Exception:  # noqa: BLE001 - reported as E005
            return None
    return value if isinstance(value, type) and issubclass(value, BaseStore) else None


def is_store(store: type, path: str) -> bool:
    """Whether ``store`` is (a subclass of) the store class at ``path``."""
    return issubclass(store, import_string(path))


def _view_policies() -> list[tuple[str, Any]]:
    """``(view name, policy)`` of every protected view; none when the URLconf cannot be
    loaded (Django's own URL checks report that)."""
    from idempotency.http.discovery import protected_views

    try:
        return list(protected_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []


def stores_in_use(values: dict[str, Any], errors: list[checks.CheckMessage]) -> list[Use]:
    """Every store in use: the global ``STORE``, and each one a view names itself
    (``store=``, ``idempotency_store``). A value that names no store is appended to
    ``errors`` (E013)."""
    uses = []
    configured = values["STORE"]
    store = store_class(configured)
    importable = callable(configured) or isinstance(configured, str)
    if store is None and importable and not check_import("STORE", configured):
        errors.append(message("E013", what="IDEMPOTENCY['STORE']", value=configured))
    if store is not None:
        instance = values["STORE"] if not isinstance(values["STORE"], str | type) else None
        uses.append((f"the store {store.__qualname__}", store, instance, values["MODE"]))
    for view, policy in _view_policies():
        what = f"the store of the view {view!r}"
        option = policy.store
        if option is None:
            if policy.mode == "atomic" and store is not None:
                uses.append((f"the view {view!r}", store, None, "atomic"))
            continue
        cls = store_class(option)
        if cls is None:
            errors.append(message("E013", what=cap(what), value=option))
            continue
        uses.append(
            (what, cls, option if not isinstance(option, str | type) else None, policy.mode)
        )
    return uses


def check_stores(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E006, E008, E012 and W001 for each store in use; W004 and W005 for the global one."""
    errors: list[checks.CheckMessage] = []
    for what, store, instance, mode in uses:
        if mode == "atomic" and not issubclass(store, AtomicStore):  # as the engine chooses
            errors.append(message("E006", what=cap(what), store=store.__qualname__))
        if not is_store(store, "idempotency.stores.cache.CacheStore"):
            continue
        alias = getattr(instance, "alias", None) or values["CACHE_ALIAS"]
        backend = cache_backend(alias)
        where = "IDEMPOTENCY['CACHE_ALIAS']" if alias == values["CACHE_ALIAS"] else what
        if backend is None:
            errors.append(no_cache(where, alias))
        elif backend_is(backend, DUMMY):
            errors.append(message("E012", what=cap(what), alias=alias))
        elif refused := unreadable(cap(what), alias, backend):
            errors.append(refused)
        elif backend_is(backend, LOCMEM):
            errors.append(message("W001", what=cap(what), alias=alias))
    configured = store_class(values["STORE"])
    if configured is not None:
        is_database = is_store(configured, DATABASE_STORE)
        if values["RESPONSE_CACHE"] is not None and not is_database:
            errors.append(message("W005", store=configured.__qualname__))
        databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
        database = databases.get(str(values["DATABASE_ALIAS"])) or {}
        if values["MODE"] == "lease" and is_database and database.get("ATOMIC_REQUESTS"):
            errors.append(message("W004", alias=values["DATABASE_ALIAS"]))
    return errors


#: The Celery beat task that purges expired records (idempotency.tasks.periodic).
PURGE_TASK = "idempotency.purge_expired_records"


def _beat_purges() -> bool:
    """Whether ``CELERY_BEAT_SCHEDULE`` schedules :data:`PURGE_TASK`."""
    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
    if not isinstance(schedule, dict):
        return False
    return any(isinstance(e, dict) and e.get("task") == PURGE_TASK for e in schedule.values())


def check_purge(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """W040: a DatabaseStore in use, and nothing deletes its expired rows: PURGE_EVERY is
    None and no beat schedule names the purge task."""
    if values["PURGE_EVERY"] is not None or _beat_purges():
        return []
    database = [w for w, s, _i, _m in uses if is_store(s, DATABASE_STORE)]
    if not database:
        return []
    return [message("W040", what=cap(database[0]), task=PURGE_TASK)]
